// An .npz archive from untrusted bytes (amphora::read_npz): zip structure,
// member sizes and CRCs through libzip, the members' .npy headers, and the
// sparse-matrix checks. The reader must either throw an amphora::Error or
// return a matrix that:
//   - passes the checks again, independently (every index is touched), and
//     holds no more stored entries than its shape has cells (what a
//     decompression bomb of duplicates needs: issue 21, item 10);
//   - round-trips exactly: saved to a store and loaded, it is bit for bit the
//     same; written by write_npz (as `amphora export` does) and read again,
//     too (bfloat16 data, which NumPy has not, is refused by write_npz with
//     Unsupported, and nothing else);
// and the reader's memory is bounded, twice over:
//   - per input byte, whatever happens: at most kConstant + kPerByte x the
//     input's size. Deflate cannot expand more than about 1032:1, the
//     reader refuses a member claiming more than 1100:1, and it holds at
//     most about five bytes per inflated byte at once (an int32 index array
//     inflated, then widened to int64 as a vector and again as a tensor):
//     8 x 1100 per input byte. Measured: legitimate archives as SciPy
//     writes them, 1000 x 1000 of ones, CSR (41 KB) 12.1 MB and COO (44 KB)
//     16.1 MB, an int32/int64 mix needing widening (11.5 KB) 7.0 MB: 300 to
//     610 bytes per input byte;
//   - for an accepted matrix, relative to what it returns: at most
//     kConstant + kPerResultByte x the matrix's bytes + kZipPerByte x the
//     input's size. Measured 1.0 to 1.75 times the matrix.
// A per-input-byte bound cannot tell a decompression bomb of duplicates
// (issue 21, item 10: a 1 x 1 matrix of 134 million zeros, 1.5 MB inflating
// to 1.6 GB, about 1070:1) from a legitimate matrix of zeros compressed as
// well; what tells them apart is the shape, so every accepted matrix must
// hold no more entries than cells, and such a bomb must be refused before it
// is inflated: a 1 x 1 COO of 2 million zeros (32 KB) is refused here
// holding 51 KB.

#include <amphora/sparse.hpp>

#include "alloc_bound.hpp"
#include "scratch_store.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <unistd.h>

namespace {

constexpr std::uint64_t kConstant = 8u << 20;
constexpr std::uint64_t kPerByte = 1100 * 8;
constexpr std::uint64_t kPerResultByte = 4;
constexpr std::uint64_t kZipPerByte = 64;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_npz: %s\n", what);
  __builtin_trap();
}

std::filesystem::path scratch(const char* name) {
  static const std::filesystem::path dir = [] {
    // Under $TMPDIR when set (fuzz/run.sh points it into the build directory).
    std::string tmpl = (std::filesystem::temp_directory_path() / "amphora-fuzz-npz-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    return std::filesystem::path(tmpl);
  }();
  return dir / name;
}

std::uint64_t matrix_bytes(const amphora::SparseMatrix& m) {
  const bool coo = m.format() == amphora::SparseFormat::coo;
  return m.data().nbytes() + (coo ? m.row().nbytes() + m.col().nbytes() : m.indices().nbytes() + m.indptr().nbytes());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<amphora::SparseMatrix> read;
  fuzz::PeakAllocation memory;
  try {
    read = amphora::read_npz(amphora::ConstBytes(reinterpret_cast<const std::byte*>(data), size), "fuzz.npz");
  } catch (const amphora::Error&) {
  }
  fuzz::require_peak_within("fuzz_npz", "read_npz", memory, size, kConstant, kPerByte);
  if (!read) return 0;
  const amphora::SparseMatrix& m = *read;
  fuzz::require_peak_within("fuzz_npz", "read_npz, for the matrix it returned", memory, size,
                            kConstant + kPerResultByte * matrix_bytes(m), kZipPerByte);

  // A returned matrix passed validation: recheck it independently.
  const bool coo = m.format() == amphora::SparseFormat::coo;
  const amphora::Tensor& first = coo ? m.row() : m.indices();
  const amphora::Tensor& second = coo ? m.col() : m.indptr();
  if (!amphora::SparseMatrix::problem(m.format(), m.shape(), m.data(), first, second).empty())
    finding("a matrix read_npz returned fails the checks");
  if (first.num_elements() != static_cast<std::uint64_t>(m.nnz())) finding("index count differs from nnz");
  const unsigned __int128 cells = static_cast<unsigned __int128>(m.rows()) * static_cast<unsigned __int128>(m.cols());
  if (static_cast<unsigned __int128>(m.nnz()) > cells) finding("more stored entries than the matrix has cells");
  volatile std::uint64_t sum = 0;
  for (std::size_t k = 0; k < m.data().nbytes(); ++k) sum = sum + static_cast<std::uint8_t>(m.data().data()[k]);

  // Saved and loaded: the same matrix.
  amphora::Store store = scratch_store();
  try {
    const auto back = store.load<amphora::SparseMatrix>(store.save(m).digest);
    if (!back.bit_equal(m)) finding("a matrix saved and loaded differs");
  } catch (const amphora::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    finding("a matrix read_npz returned cannot be saved and loaded");
  }

  // Exported and read again: the same matrix.
  const auto file = scratch("out.npz");
  try {
    amphora::write_npz(m, file);
  } catch (const amphora::Unsupported& e) {
    if (m.dtype() == amphora::DType::bfloat16) return 0;
    std::fprintf(stderr, "%s\n", e.what());
    finding("write_npz refused a matrix other than of bfloat16");
  } catch (const amphora::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    finding("write_npz failed");
  }
  try {
    if (!amphora::read_npz(file).bit_equal(m)) finding("a matrix written by write_npz reads back different");
  } catch (const amphora::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    finding("what write_npz wrote does not read back");
  }
  return 0;
}
