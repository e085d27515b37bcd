// Runs one piece of work while memory cannot be had, and says what came
// out: exit 0 and the message for amphora::OutOfResources, 3 for a raw
// std::bad_alloc, 4 for anything else, 5 when nothing was thrown.
//   (no argument)  starts a SHA-256 computation while libcrypto cannot
//                  allocate (its memory functions replaced before its first
//                  allocation); 10 when libcrypto had allocated already and
//                  kept its own functions;
//   fingerprint    declares a pipeline step, which fingerprints this program
//                  by its file (it is linked without a build ID), while every
//                  non-aligned operator new of 1 MiB or more fails.
#include <amphora/digest.hpp>
#include <amphora/everyday.hpp>
#include <amphora/error.hpp>
#include <amphora/pipeline.hpp>

#include <openssl/crypto.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>

namespace {
void* no_malloc(std::size_t, const char*, int) { return nullptr; }
void* no_realloc(void*, std::size_t, const char*, int) { return nullptr; }
void plain_free(void* p, const char*, int) { std::free(p); }

std::atomic<bool> large_allocations_fail{false};

int outcome(const std::function<void()>& work) {
  try {
    work();
    return 5;
  } catch (const amphora::OutOfResources& e) {
    std::puts(e.what());
    return 0;
  } catch (const std::bad_alloc&) {
    return 3;
  } catch (...) {
    return 4;
  }
}

void* allocate(std::size_t size) noexcept {
  if (large_allocations_fail.load(std::memory_order_relaxed) && size >= (std::size_t{1} << 20)) return nullptr;
  return std::malloc(size ? size : 1);
}
void* allocate_or_throw(std::size_t size) {
  if (void* p = allocate(size)) return p;
  throw std::bad_alloc();
}
}  // namespace

// Every form but the aligned ones (left to the runtime in pairs), all
// through malloc and free: under AddressSanitizer a block must be freed the
// way it was allocated.
void* operator new(std::size_t size) { return allocate_or_throw(size); }
void* operator new[](std::size_t size) { return allocate_or_throw(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return allocate(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "fingerprint") == 0) {
    amphora::Pipeline pipeline("oom");
    return outcome([&] {
      large_allocations_fail.store(true, std::memory_order_relaxed);
      pipeline.step({.name = "one"}, [] { return 1; });
    });
  }
  if (!CRYPTO_set_mem_functions(no_malloc, no_realloc, plain_free)) return 10;
  return outcome([] { amphora::Sha256 hash; });
}
