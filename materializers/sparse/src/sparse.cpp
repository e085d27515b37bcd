#include <amphora/npy_format.hpp>
#include <amphora/sparse.hpp>

#include "tensor_stats.hpp"

#include <cstring>
#include <limits>

namespace amphora {

namespace {

constexpr std::size_t kArrayAlignment = 64;  // as ArtifactWriter::write_array

// The names SciPy's save_npz gives the arrays of each layout.
const char* first_name(SparseFormat f) { return f == SparseFormat::coo ? "row" : "indices"; }
const char* second_name(SparseFormat f) { return f == SparseFormat::coo ? "col" : "indptr"; }

std::string at(const char* array, std::uint64_t k) { return std::string(array) + "[" + std::to_string(k) + "]"; }

// The checks of SparseMatrix::problem that read index values, for one index type.
template <class I>
std::string index_problem(SparseFormat format, std::array<std::int64_t, 2> shape, std::uint64_t nnz,
                          std::span<const I> first, std::span<const I> second) {
  if (format == SparseFormat::coo) {
    for (std::uint64_t k = 0; k < nnz; ++k) {
      if (first[k] < 0 || first[k] >= shape[0])
        return at("row", k) + " = " + std::to_string(first[k]) + " is outside the " + std::to_string(shape[0]) + " rows";
      if (second[k] < 0 || second[k] >= shape[1])
        return at("col", k) + " = " + std::to_string(second[k]) + " is outside the " + std::to_string(shape[1]) +
               " columns";
    }
    return {};
  }
  const bool csr = format == SparseFormat::csr;
  const std::int64_t minor = csr ? shape[1] : shape[0];
  if (second[0] != 0) return "indptr[0] = " + std::to_string(second[0]) + ", not 0";
  for (std::size_t k = 1; k < second.size(); ++k)
    if (second[k] < second[k - 1])
      return at("indptr", k) + " = " + std::to_string(second[k]) + " is less than " + at("indptr", k - 1) + " = " +
             std::to_string(second[k - 1]);
  if (static_cast<std::uint64_t>(second.back()) != nnz)
    return "indptr ends at " + std::to_string(second.back()) + ", but there are " + std::to_string(nnz) +
           " stored entries (the length of data)";
  for (std::uint64_t k = 0; k < nnz; ++k)
    if (first[k] < 0 || first[k] >= minor)
      return at("indices", k) + " = " + std::to_string(first[k]) + " is outside the " + std::to_string(minor) +
             (csr ? " columns" : " rows");
  return {};
}

const Tensor& require(const Tensor& t, bool ok, SparseFormat format, const char* what) {
  if (!ok)
    throw InvalidArgument(std::string("a ") + std::string(to_string(format)) + " matrix has no '" + what +
                          "' array");
  return t;
}

Tensor tensor_of(const ArrayView& array, const std::vector<std::int64_t>& shape, bool eager) {
  Tensor t = Tensor::Make(array.dtype(), shape, array.buffer());
  return eager ? t.copy() : t;
}

// A scalar .npy of a 3-byte string, as NumPy writes np.array(b"csr").
std::string format_npy(SparseFormat format) {
  std::string file = make_npy_header("|S3", std::span<const std::int64_t>(), kArrayAlignment);
  file += to_string(format);
  return file;
}

struct Stored {
  SparseFormat format;
  std::array<std::int64_t, 2> shape;
  ArrayView data, first, second;
};

// Reads and cross-checks everything the artifact holds; CorruptData names it.
Stored open_stored(const ArtifactReader& in) {
  in.require_materializer(materializer<SparseMatrix>::name, materializer<SparseMatrix>::version,
                          "a sparse matrix");
  Stored s{};
  try {
    s.format = parse_sparse_format(in.meta<std::string>("format"));
  } catch (const InvalidArgument& e) {
    throw CorruptData(in.label() + ": " + e.what());
  }
  auto shape = in.meta<std::vector<std::int64_t>>("shape");
  if (shape.size() != 2)
    throw CorruptData(in.label() + ": metadata 'shape' has " + std::to_string(shape.size()) + " dimensions, not 2");
  s.shape = {shape[0], shape[1]};
  DType dtype = dtype_from_name(in.meta<std::string>("dtype"));
  DType index = dtype_from_name(in.meta<std::string>("index_dtype"));
  s.data = in.read_array("data.npy", dtype, 1);
  s.first = in.read_array(std::string(first_name(s.format)) + ".npy", index, 1);
  s.second = in.read_array(std::string(second_name(s.format)) + ".npy", index, 1);
  ArrayView stored_shape = in.read_array("shape.npy", DType::int64, 1);
  auto dims = stored_shape.values<std::int64_t>();
  if (dims.size() != 2 || dims[0] != s.shape[0] || dims[1] != s.shape[1])
    throw CorruptData(in.label() + ": 'shape.npy' disagrees with the metadata's shape [" +
                      std::to_string(s.shape[0]) + ", " + std::to_string(s.shape[1]) + "]");
  const std::string want = format_npy(s.format);
  if (in.file_size("format.npy") != want.size() ||
      std::memcmp(in.read("format.npy", 0, want.size())->data(), want.data(), want.size()) != 0)
    throw CorruptData(in.label() + ": 'format.npy' does not hold the format '" + std::string(to_string(s.format)) +
                      "' the metadata names");
  if (in.meta<std::int64_t>("nnz") != static_cast<std::int64_t>(s.data.size()))
    throw CorruptData(in.label() + ": metadata says " + std::to_string(in.meta<std::int64_t>("nnz")) +
                      " stored entries, 'data.npy' holds " + std::to_string(s.data.size()));
  auto dims_of = [](const ArrayView& a) { return std::vector<std::int64_t>{static_cast<std::int64_t>(a.size())}; };
  std::string problem =
      SparseMatrix::problem(s.format, s.shape, Tensor::Make(dtype, dims_of(s.data), s.data.buffer()),
                            Tensor::Make(index, dims_of(s.first), s.first.buffer()),
                            Tensor::Make(index, dims_of(s.second), s.second.buffer()));
  if (!problem.empty()) throw CorruptData(in.label() + ": invalid sparse matrix: " + problem);
  return s;
}

}  // namespace

std::string_view to_string(SparseFormat format) {
  switch (format) {
    case SparseFormat::csr: return "csr";
    case SparseFormat::csc: return "csc";
    case SparseFormat::coo: return "coo";
  }
  return "?";
}

SparseFormat parse_sparse_format(std::string_view text) {
  if (text == "csr") return SparseFormat::csr;
  if (text == "csc") return SparseFormat::csc;
  if (text == "coo") return SparseFormat::coo;
  throw InvalidArgument("unknown sparse format '" + std::string(text) + "' (expected csr, csc or coo)");
}

SparseMatrix::SparseMatrix()
    : data_(Tensor::zeros(DType::float64, {0})),
      first_(Tensor::zeros(DType::int32, {0})),
      second_(Tensor::from_values<std::int32_t>({1}, std::vector<std::int32_t>{0})) {}

std::string SparseMatrix::problem(SparseFormat format, std::array<std::int64_t, 2> shape, const Tensor& data,
                                  const Tensor& first, const Tensor& second) {
  const char* first_is = first_name(format);
  const char* second_is = second_name(format);
  if (shape[0] < 0 || shape[1] < 0)
    return "the shape (" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + ") is negative";
  for (auto [t, name] : {std::pair{&data, "data"}, {&first, first_is}, {&second, second_is}})
    if (t->ndim() != 1) return std::string("'") + name + "' has " + std::to_string(t->ndim()) + " dimensions, not 1";
  if (first.dtype() != DType::int32 && first.dtype() != DType::int64)
    return std::string("'") + first_is + "' holds " + std::string(dtype_name(first.dtype())) +
           "; index arrays hold int32 or int64";
  if (second.dtype() != first.dtype())
    return std::string("'") + second_is + "' holds " + std::string(dtype_name(second.dtype())) + " but '" + first_is +
           "' holds " + std::string(dtype_name(first.dtype())) + "; index arrays share one dtype";
  const std::uint64_t nnz = data.num_elements();
  const std::int64_t limit = first.dtype() == DType::int32 ? std::numeric_limits<std::int32_t>::max()
                                                           : std::numeric_limits<std::int64_t>::max() - 1;
  if (shape[0] > limit || shape[1] > limit || nnz > static_cast<std::uint64_t>(limit))
    return "the shape (" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + ") with " +
           std::to_string(nnz) + " entries does not fit " + std::string(dtype_name(first.dtype())) + " indices";
  if (first.num_elements() != nnz)
    return std::string("'") + first_is + "' holds " + std::to_string(first.num_elements()) + " entries, 'data' " +
           std::to_string(nnz);
  const std::uint64_t want_second =
      format == SparseFormat::coo ? nnz : static_cast<std::uint64_t>((format == SparseFormat::csr ? shape[0] : shape[1]) + 1);
  if (second.num_elements() != want_second)
    return std::string("'") + second_is + "' holds " + std::to_string(second.num_elements()) + " entries, not " +
           std::to_string(want_second) +
           (format == SparseFormat::coo ? " (as many as 'data')"
                                        : format == SparseFormat::csr ? " (rows + 1)" : " (columns + 1)");
  if (first.dtype() == DType::int32)
    return index_problem(format, shape, nnz, first.values<std::int32_t>(), second.values<std::int32_t>());
  return index_problem(format, shape, nnz, first.values<std::int64_t>(), second.values<std::int64_t>());
}

SparseMatrix SparseMatrix::make(SparseFormat format, std::array<std::int64_t, 2> shape, Tensor data, Tensor first,
                                Tensor second) {
  std::string why = problem(format, shape, data, first, second);
  if (!why.empty()) throw InvalidArgument("invalid " + std::string(to_string(format)) + " matrix: " + why);
  return assemble(format, shape, std::move(data), std::move(first), std::move(second));
}

SparseMatrix SparseMatrix::assemble(SparseFormat format, std::array<std::int64_t, 2> shape, Tensor data, Tensor first,
                                    Tensor second) {
  SparseMatrix m;
  m.format_ = format;
  m.shape_ = shape;
  m.data_ = std::move(data);
  m.first_ = std::move(first);
  m.second_ = std::move(second);
  return m;
}

SparseMatrix SparseMatrix::csr(std::int64_t rows, std::int64_t cols, Tensor data, Tensor indices, Tensor indptr) {
  return make(SparseFormat::csr, {rows, cols}, std::move(data), std::move(indices), std::move(indptr));
}
SparseMatrix SparseMatrix::csc(std::int64_t rows, std::int64_t cols, Tensor data, Tensor indices, Tensor indptr) {
  return make(SparseFormat::csc, {rows, cols}, std::move(data), std::move(indices), std::move(indptr));
}
SparseMatrix SparseMatrix::coo(std::int64_t rows, std::int64_t cols, Tensor data, Tensor row, Tensor col) {
  return make(SparseFormat::coo, {rows, cols}, std::move(data), std::move(row), std::move(col));
}

const Tensor& SparseMatrix::indices() const { return require(first_, format_ != SparseFormat::coo, format_, "indices"); }
const Tensor& SparseMatrix::indptr() const { return require(second_, format_ != SparseFormat::coo, format_, "indptr"); }
const Tensor& SparseMatrix::row() const { return require(first_, format_ == SparseFormat::coo, format_, "row"); }
const Tensor& SparseMatrix::col() const { return require(second_, format_ == SparseFormat::coo, format_, "col"); }

bool SparseMatrix::bit_equal(const SparseMatrix& other) const {
  return format_ == other.format_ && shape_ == other.shape_ && data_.bit_equal(other.data_) &&
         first_.bit_equal(other.first_) && second_.bit_equal(other.second_);
}

void materializer<SparseMatrix>::save(const SparseMatrix& m, ArtifactWriter& out) {
  const SparseFormat f = m.format();
  auto& meta = out.meta();
  meta["format"] = to_string(f);
  meta["shape"] = {m.rows(), m.cols()};
  meta["nnz"] = m.nnz();
  meta["dtype"] = dtype_name(m.dtype());
  meta["index_dtype"] = dtype_name(m.index_dtype());
  const double cells = static_cast<double>(m.rows()) * static_cast<double>(m.cols());
  meta["density"] = cells > 0 ? static_cast<double>(m.nnz()) / cells : 0.0;

  // data.npy is summarised (min, max, mean of the stored entries) while it is hashed.
  const Tensor& data = m.data();
  std::string header = make_npy_header(data.dtype(), data.shape(), kArrayAlignment);
  detail::TensorStats stats(data, header.size());
  const ConstBytes parts[] = {std::as_bytes(std::span<const char>(header)), ConstBytes(data.data(), data.nbytes())};
  out.write_file("data.npy", parts,
                 [&](std::uint64_t offset, ConstBytes bytes) { stats.observe(offset, bytes); });
  meta["stats"] = stats.finish();

  const bool coo = f == SparseFormat::coo;
  auto write_index = [&](const char* name, const Tensor& t) {
    out.write_array(std::string(name) + ".npy", t.dtype(), t.shape(), ConstBytes(t.data(), t.nbytes()));
  };
  write_index(first_name(f), coo ? m.row() : m.indices());
  write_index(second_name(f), coo ? m.col() : m.indptr());
  const std::array<std::int64_t, 2> shape = m.shape();
  out.write_array<std::int64_t>("shape.npy", shape);
  const std::string format_file = format_npy(f);
  out.write_file("format.npy", std::as_bytes(std::span<const char>(format_file)));
}

SparseMatrix materializer<SparseMatrix>::load(const ArtifactReader& in) {
  Stored s = open_stored(in);
  const bool eager = in.load_options().eager;
  auto one = [&](const ArrayView& a) {
    return tensor_of(a, {static_cast<std::int64_t>(a.size())}, eager);
  };
  // open_stored has validated the arrays: they are not checked again.
  return SparseMatrix::assemble(s.format, s.shape, one(s.data), one(s.first), one(s.second));
}

void materializer<SparseMatrix>::validate(const ArtifactReader& in) { (void)open_stored(in); }

}  // namespace amphora
