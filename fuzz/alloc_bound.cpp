// Live heap bytes through AddressSanitizer's malloc/free hooks and a wrapper
// around mmap/munmap (fuzz/alloc_bound.hpp).

#include "alloc_bound.hpp"

#include <sanitizer/allocator_interface.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace {

std::atomic<std::int64_t> live{0};
std::atomic<std::int64_t> highest{0};

void add(std::int64_t bytes) {
  const std::int64_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::int64_t seen = highest.load(std::memory_order_relaxed);
  while (now > seen && !highest.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void on_malloc(const volatile void*, std::size_t size) { add(static_cast<std::int64_t>(size)); }
// Called before the block is released, while its size can still be asked.
void on_free(const volatile void* p) {
  if (p) live.fetch_sub(static_cast<std::int64_t>(__sanitizer_get_allocated_size(p)), std::memory_order_relaxed);
}

const bool hooks_installed = [] {
  if (__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) == 0) {
    std::fprintf(stderr, "alloc_bound: cannot install the allocator hooks\n");
    std::abort();
  }
  return true;
}();

// Anonymous mappings by address, so munmap can take back their size. Only
// those made through the wrapper (Amphora's own code) are here. The table is
// a plain unordered_map: its own nodes go through malloc, and count.
std::mutex mappings_mutex;
std::unordered_map<std::uintptr_t, std::size_t>& mappings() {
  static auto* table = new std::unordered_map<std::uintptr_t, std::size_t>();
  return *table;
}

}  // namespace

// -Wl,--wrap=mmap sends the code's calls here; __real_mmap is the mmap the
// program would have called (AddressSanitizer's interceptor, then libc's).
extern "C" void* __real_mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset);
extern "C" int __real_munmap(void* addr, std::size_t length);

extern "C" void* __wrap_mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) {
  void* p = __real_mmap(addr, length, prot, flags, fd, offset);
  if (p != MAP_FAILED && (flags & MAP_ANONYMOUS)) {
    {
      std::lock_guard lock(mappings_mutex);
      mappings()[reinterpret_cast<std::uintptr_t>(p)] = length;
    }
    add(static_cast<std::int64_t>(length));
  }
  return p;
}

extern "C" int __wrap_munmap(void* addr, std::size_t length) {
  {
    std::lock_guard lock(mappings_mutex);
    auto it = mappings().find(reinterpret_cast<std::uintptr_t>(addr));
    if (it != mappings().end()) {
      live.fetch_sub(static_cast<std::int64_t>(it->second), std::memory_order_relaxed);
      mappings().erase(it);
    }
  }
  return __real_munmap(addr, length);
}

namespace fuzz {

std::int64_t live_bytes() {
  (void)hooks_installed;
  return live.load(std::memory_order_relaxed);
}

PeakAllocation::PeakAllocation() : start_(live_bytes()) { highest.store(start_, std::memory_order_relaxed); }

std::uint64_t PeakAllocation::peak() const {
  const std::int64_t top = highest.load(std::memory_order_relaxed);
  return top > start_ ? static_cast<std::uint64_t>(top - start_) : 0;
}

bool report_peaks() {
  static const bool on = [] {
    const char* v = std::getenv("FUZZ_ALLOC_REPORT");
    return v && *v && *v != '0';
  }();
  return on;
}

void require_peak_within(const char* target, const char* what, const PeakAllocation& measured, std::size_t input_bytes,
                         std::uint64_t constant, std::uint64_t per_byte) {
  const std::uint64_t peak = measured.peak();
  const std::uint64_t bound = constant + per_byte * input_bytes;
  if (report_peaks())
    std::fprintf(stderr, "alloc_bound: %s: %s: peak %llu bytes, input %zu bytes, %.1f%% of the bound\n", target, what,
                 static_cast<unsigned long long>(peak), input_bytes, 100.0 * static_cast<double>(peak) / static_cast<double>(bound));
  if (peak <= bound) return;
  std::fprintf(stderr,
               "%s: %s held %llu bytes at its peak for an input of %zu bytes, more than the bound %llu + %llu x %zu = "
               "%llu\n",
               target, what, static_cast<unsigned long long>(peak), input_bytes, static_cast<unsigned long long>(constant),
               static_cast<unsigned long long>(per_byte), input_bytes, static_cast<unsigned long long>(bound));
  __builtin_trap();
}

}  // namespace fuzz
