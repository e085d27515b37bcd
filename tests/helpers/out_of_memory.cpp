// Starts a SHA-256 computation while libcrypto cannot allocate (its memory
// functions replaced before its first allocation), and says what came out:
// exit 0 and the message for amphora::OutOfResources, 3 for a raw
// std::bad_alloc, 4 for anything else, 5 when nothing was thrown, 10 when
// libcrypto had allocated already and kept its own functions.
#include <amphora/digest.hpp>
#include <amphora/error.hpp>

#include <openssl/crypto.h>

#include <cstdio>
#include <cstdlib>
#include <new>

namespace {
void* no_malloc(std::size_t, const char*, int) { return nullptr; }
void* no_realloc(void*, std::size_t, const char*, int) { return nullptr; }
void plain_free(void* p, const char*, int) { std::free(p); }
}  // namespace

int main() {
  if (!CRYPTO_set_mem_functions(no_malloc, no_realloc, plain_free)) return 10;
  try {
    amphora::Sha256 hash;
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
