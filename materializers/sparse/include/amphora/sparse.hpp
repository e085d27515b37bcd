#pragma once
// Sparse matrices and their materializer, "amphora.sparse".
// Payload: the arrays scipy.sparse.save_npz writes, under the same names,
// each a .npy file (docs/FORMAT.md §8): data, indices and indptr (CSR, CSC)
// or row and col (COO), plus shape and format. Zipped together they are the
// .npz that scipy.sparse.load_npz opens; `amphora export` writes exactly that.

#include <amphora/export.hpp>
#include <amphora/tensor.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

AMPHORA_API_BEGIN

namespace amphora {

/// The three layouts of scipy.sparse.
enum class SparseFormat { csr, csc, coo };

/// "csr", "csc" or "coo".
std::string_view to_string(SparseFormat format);
/// Parses "csr", "csc" or "coo"; throws InvalidArgument naming the text otherwise.
SparseFormat parse_sparse_format(std::string_view text);

/// A two-dimensional sparse matrix in SciPy's layouts, over 1-d tensors:
///   CSR: row r holds the entries k in [indptr[r], indptr[r+1]), at column
///        indices[k] with value data[k]; CSC: the same by columns;
///   COO: entry k is at (row[k], col[k]) with value data[k].
/// data may have any tensor dtype; index arrays are int32 or int64, all of
/// one dtype. As in SciPy, indices within a row need not be sorted and
/// duplicates are kept (they add up when densified). Immutable once built;
/// copies share their tensors (mapped files stay mapped while any copy
/// lives). Thread-safe for reading.
class SparseMatrix {
 public:
  /// An empty 0 x 0 CSR matrix of float64 with int32 indices.
  SparseMatrix();

  /// Validating factories: check everything load checks (see validate) and
  /// throw InvalidArgument naming the first problem, e.g. "indptr[3] = 7 is
  /// less than indptr[2] = 9".
  static SparseMatrix csr(std::int64_t rows, std::int64_t cols, Tensor data, Tensor indices, Tensor indptr);
  static SparseMatrix csc(std::int64_t rows, std::int64_t cols, Tensor data, Tensor indices, Tensor indptr);
  static SparseMatrix coo(std::int64_t rows, std::int64_t cols, Tensor data, Tensor row, Tensor col);

  SparseFormat format() const { return format_; }
  std::int64_t rows() const { return shape_[0]; }
  std::int64_t cols() const { return shape_[1]; }
  std::array<std::int64_t, 2> shape() const { return shape_; }
  /// Stored entries (duplicates and explicit zeros included), as SciPy's nnz.
  std::int64_t nnz() const { return static_cast<std::int64_t>(data_.num_elements()); }
  DType dtype() const { return data_.dtype(); }
  /// int32 or int64.
  DType index_dtype() const { return first_.dtype(); }

  const Tensor& data() const { return data_; }
  /// CSR/CSC only (InvalidArgument for COO): column (CSR) or row (CSC) of each entry.
  const Tensor& indices() const;
  /// CSR/CSC only: where each row (CSR) or column (CSC) starts in data.
  const Tensor& indptr() const;
  /// COO only (InvalidArgument otherwise): row and column of each entry.
  const Tensor& row() const;
  const Tensor& col() const;

  /// Same format, shape and bit-identical arrays.
  bool bit_equal(const SparseMatrix& other) const;

  /// The problem that makes these arrays no valid matrix of `format`, or an
  /// empty string: a shape that is negative or too large for the index
  /// dtype, arrays that are not 1-d, index arrays of mixed or non-integer
  /// dtypes, lengths that disagree (indptr holds rows + 1 entries for CSR,
  /// cols + 1 for CSC; data, indices, row and col hold nnz), indptr not
  /// starting at 0, decreasing or not ending at nnz, an index outside the
  /// shape. `second` is indptr for CSR/CSC and col for COO.
  static std::string problem(SparseFormat format, std::array<std::int64_t, 2> shape, const Tensor& data,
                             const Tensor& first, const Tensor& second);

 private:
  static SparseMatrix make(SparseFormat format, std::array<std::int64_t, 2> shape, Tensor data, Tensor first,
                           Tensor second);
  // Without checks, for arrays already validated.
  static SparseMatrix assemble(SparseFormat format, std::array<std::int64_t, 2> shape, Tensor data, Tensor first,
                               Tensor second);
  friend struct materializer<SparseMatrix>;
  SparseFormat format_ = SparseFormat::csr;
  std::array<std::int64_t, 2> shape_{0, 0};
  Tensor data_;
  Tensor first_;   // indices (CSR/CSC) or row (COO)
  Tensor second_;  // indptr (CSR/CSC) or col (COO)
};

template <>
struct materializer<SparseMatrix> {
  static constexpr std::string_view name = "amphora.sparse";
  static constexpr int version = 1;
  static void save(const SparseMatrix& matrix, ArtifactWriter& out);
  /// Maps the arrays (reads them into memory with LoadOptions::eager) and
  /// validates the structure: CorruptData naming the artifact and the problem.
  static SparseMatrix load(const ArtifactReader& in);
  static void validate(const ArtifactReader& in);
};

/// Reads a .npz written by scipy.sparse.save_npz (compressed or not; CSR,
/// CSC or COO), read into memory whole first. Index arrays of two integer
/// dtypes are widened to int64, as SciPy does. Throws NotFound for a missing
/// file, InvalidArgument for one that is not a regular file (a FIFO is
/// refused at once), CorruptData naming the
/// file and member for a damaged archive, a member whose size disagrees with
/// its header, or one that inflates far beyond what deflate can produce (a
/// zip bomb), InvalidArgument for an archive that is no sparse matrix,
/// Unsupported for a format SciPy has but Amphora does not store (bsr, dia,
/// lil, dok).
SparseMatrix read_npz(const std::filesystem::path& file);
/// The same for an archive held in memory (which must outlive the call);
/// `where` names it in errors.
SparseMatrix read_npz(ConstBytes archive, std::string_view where);

/// Writes `matrix` as an uncompressed .npz that scipy.sparse.load_npz opens,
/// atomically (complete or not at all). Throws Unsupported for bfloat16
/// data (NumPy has no such dtype), IoError when the file cannot be written.
void write_npz(const SparseMatrix& matrix, const std::filesystem::path& file);

}  // namespace amphora

AMPHORA_API_END
