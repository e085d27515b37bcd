#pragma once
// The memory one fuzz input makes the code under test hold at its peak, so a
// target can require it to stay within a constant plus a factor of the
// input's size: a few bytes that make a reader allocate gigabytes (a
// decompression bomb, an alias bomb, a buffer per column) are findings even
// when the machine has the memory.
//
// Counted: every heap block (malloc, new, aligned_alloc, ... through
// AddressSanitizer's allocator hooks, so libzip's and yaml-cpp's too) and
// every anonymous mmap made by Amphora's code (Buffer::allocate maps 1 MiB and
// more; the fuzz targets link with -Wl,--wrap=mmap,--wrap=munmap, see
// fuzz/CMakeLists.txt). Not counted: files mapped read-only, thread stacks.
// Blocks held on every thread count, the library's worker pool included.

#include <cstddef>
#include <cstdint>

namespace fuzz {

/// Heap bytes live in the process now (relative: only differences mean anything).
std::int64_t live_bytes();

/// Measures, from its construction, the highest live_bytes() reached above
/// what was live then. One at a time (the peak is process-wide).
class PeakAllocation {
 public:
  PeakAllocation();
  /// Bytes above the starting point at the highest point so far.
  std::uint64_t peak() const;

 private:
  std::int64_t start_;
};

/// Traps, after printing the figures, when `peak` exceeds `constant` +
/// `per_byte` x `input_bytes`: "TARGET: WHAT held N bytes at its peak for an
/// input of M bytes, more than the bound C + F x M".
void require_peak_within(const char* target, const char* what, const PeakAllocation& measured, std::size_t input_bytes,
                         std::uint64_t constant, std::uint64_t per_byte);

/// With FUZZ_ALLOC_REPORT=1 in the environment, every require_peak_within
/// also prints its figures (to choose or check the constants by running a
/// target over a corpus: `FUZZ_ALLOC_REPORT=1 fuzz_csv -runs=0 CORPUS`).
bool report_peaks();

}  // namespace fuzz
