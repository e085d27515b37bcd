// An .npz archive from untrusted bytes (amphora::read_npz): zip structure,
// member sizes and CRCs through libzip, the members' .npy headers, and the
// sparse-matrix checks. The reader must either return a matrix whose arrays
// agree with its shape (every index is touched here) or throw an
// amphora::Error; never crash, hang or read out of bounds.

#include <amphora/sparse.hpp>

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto m = amphora::read_npz(amphora::ConstBytes(reinterpret_cast<const std::byte*>(data), size), "fuzz.npz");
    // A returned matrix passed validation: recheck it independently.
    const bool coo = m.format() == amphora::SparseFormat::coo;
    const amphora::Tensor& first = coo ? m.row() : m.indices();
    const amphora::Tensor& second = coo ? m.col() : m.indptr();
    if (!amphora::SparseMatrix::problem(m.format(), m.shape(), m.data(), first, second).empty()) std::abort();
    if (first.num_elements() != static_cast<std::uint64_t>(m.nnz())) std::abort();
    volatile std::uint64_t sum = 0;
    for (std::size_t k = 0; k < m.data().nbytes(); ++k) sum = sum + static_cast<std::uint8_t>(m.data().data()[k]);
  } catch (const amphora::Error&) {
  }
  return 0;
}
