#pragma once
// N-dimensional arrays and their materializer, "amphora.tensor".
// Payload: a NumPy .npy file whose data starts at byte 4096 for a tensor of
// 64 KiB or more (at the next multiple of 64 after the header for a smaller
// one), or the same file as independent LZ4 or zstd frames with a chunk
// index (docs/FORMAT.md).

#include <amphora/export.hpp>
#include <amphora/buffer.hpp>
#include <amphora/builtins.hpp>
#include <amphora/dtype.hpp>
#include <amphora/materializer.hpp>

#include <array>
#include <complex>
#include <cstring>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <typeinfo>
#include <string_view>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

/// How tensor payloads are compressed, in 1 MiB chunks either way so row
/// reads decode only the chunks they need: `lz4` is the fastest, `zstd`
/// the smallest; `automatic` uses LZ4 only where a sample shrinks.
enum class Compression { none, lz4, zstd, automatic };

/// "none", "lz4", "zstd" or "auto".
std::string_view to_string(Compression c);
/// Parses "none", "lz4", "zstd" or "auto"; throws InvalidArgument naming the text otherwise.
Compression parse_compression(std::string_view text);

/// zstd levels a save accepts, and the one it uses unless told (docs/FORMAT.md §5.7).
inline constexpr int kMinZstdLevel = 1;
inline constexpr int kMaxZstdLevel = 19;
inline constexpr int kDefaultZstdLevel = 1;

/// The tensor materializer's save options:
/// `store.save(t, {.options = TensorOptions{.compression = Compression::lz4}})`.
/// They reach every tensor a save stores, inside composites too.
struct TensorOptions {
  Compression compression = Compression::automatic;
  /// Lossless transforms applied before compression (docs/FORMAT.md §5.9):
  /// delta and squeeze for integer tensors, shuffle for any. The payload
  /// then holds the encoded elements; loading undoes them.
  ArrayEncoding encoding{};
  /// zstd's level, kMinZstdLevel..kMaxZstdLevel; 0 means kDefaultZstdLevel.
  /// A save throws InvalidArgument for a level outside that range, or for a
  /// non-zero level with another compression.
  int level = 0;
};

/// A dense, C-ordered (row-major) N-dimensional array over a shared Buffer.
/// Copies share the buffer (like NumPy views). Tensors loaded from an
/// uncompressed artifact map the payload file read-only; the mapping lives as
/// long as any tensor or buffer referring to it. Thread-safe for reading.
class Tensor {
 public:
  /// An empty 1-d float32 tensor.
  Tensor();

  /// Validating factory: `data` must hold exactly the bytes `shape` needs,
  /// starting at an address aligned to min(dtype_size(dtype), 16). Throws
  /// InvalidArgument naming the mismatch.
  static Tensor Make(DType dtype, std::vector<std::int64_t> shape, std::shared_ptr<const Buffer> data);
  /// A new writable zero-filled tensor.
  static Tensor zeros(DType dtype, std::vector<std::int64_t> shape);
  /// A new tensor holding a copy of `values`.
  template <class T>
  static Tensor from_values(std::vector<std::int64_t> shape, std::span<const T> values) {
    Tensor t = zeros(dtype_of<T>::value, std::move(shape));
    if (values.size() != t.num_elements()) throw_size_mismatch(values.size(), t.num_elements());
    if (!values.empty()) std::memcpy(t.mutable_data(), values.data(), values.size_bytes());
    return t;
  }
  template <class T>
  static Tensor from_values(std::vector<std::int64_t> shape, const std::vector<T>& values) {
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> is packed bits
      std::vector<std::uint8_t> bytes(values.begin(), values.end());
      Tensor t = from_values<std::uint8_t>(std::move(shape), std::span<const std::uint8_t>(bytes));
      t.dtype_ = DType::bool_;
      return t;
    } else {
      return from_values<T>(std::move(shape), std::span<const T>(values));
    }
  }

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t ndim() const { return shape_.size(); }
  std::uint64_t num_elements() const { return elements_; }
  std::size_t nbytes() const { return buffer_->size(); }
  /// Bytes of one index along the first axis (the whole tensor for 0-d).
  std::size_t row_bytes() const;

  const std::byte* data() const { return buffer_->data(); }
  /// Throws InvalidArgument when the tensor maps a stored (read-only) file;
  /// copy() gives a writable one.
  std::byte* mutable_data();
  const std::shared_ptr<const Buffer>& buffer() const { return buffer_; }

  /// Typed view; throws InvalidArgument when T does not match dtype().
  template <class T>
  std::span<const T> values() const {
    check_type(dtype_of<T>::value);
    return {reinterpret_cast<const T*>(data()), static_cast<std::size_t>(elements_)};
  }
  template <class T>
  std::span<T> mutable_values() {
    check_type(dtype_of<T>::value);
    return {reinterpret_cast<T*>(mutable_data()), static_cast<std::size_t>(elements_)};
  }

  /// Rows [begin, end) along the first axis, sharing this tensor's buffer.
  /// Throws InvalidArgument for a 0-d tensor or an out-of-range interval.
  Tensor rows(std::int64_t begin, std::int64_t end) const;

  /// A writable deep copy in fresh memory, copied on all cores (which also
  /// spreads the page faults of a mapped source over them).
  Tensor copy() const;

  /// Same dtype, shape and bytes.
  bool bit_equal(const Tensor& other) const;

  /// Value equality, as `==` on each element: the same dtype and shape, and
  /// every element equal. Floating-point elements compare as IEEE numbers,
  /// as a double member of a struct does: a NaN equals nothing (itself
  /// included) and -0.0 equals +0.0; complex elements compare both parts
  /// so. A tensor of another dtype is unequal even where the numbers agree
  /// (int32 1 and int64 1). bit_equal compares bytes instead, NaNs included.
  /// Lets `bool operator==(const S&) const = default;` work for structs
  /// holding tensors.
  friend bool operator==(const Tensor& a, const Tensor& b);

 private:
  void check_type(DType requested) const;
  [[noreturn]] static void throw_size_mismatch(std::size_t got, std::uint64_t want);

  DType dtype_ = DType::float32;
  std::vector<std::int64_t> shape_;
  std::uint64_t elements_ = 0;
  std::shared_ptr<const Buffer> buffer_;
};

// Declared again at namespace scope: a function first declared as a friend
// does not take the header's default visibility, and programs linking the
// shared library call it.
bool operator==(const Tensor& a, const Tensor& b);

template <>
struct materializer<Tensor> {
  static constexpr std::string_view name = "amphora.tensor";
  static constexpr int version = 1;
  /// Honors the TensorOptions of the save; see docs/FORMAT.md for the encodings.
  /// Throws InvalidArgument for a bool tensor holding a byte other than 0 or 1.
  static void save(const Tensor& tensor, ArtifactWriter& out);
  /// Zero-copy for uncompressed payloads (read on all cores into fresh
  /// memory with LoadOptions::eager); parallel decompression otherwise.
  /// Runs the checks of validate() on the way.
  static Tensor load(const ArtifactReader& in);
  /// Checks that the payload is a well-formed tensor matching its metadata
  /// without building the tensor: metadata, header, sizes, the chunk index and
  /// every compressed chunk (decoded one at a time), and that bool elements
  /// are 0 or 1. Digests are not checked here. Throws CorruptData or
  /// Unsupported naming the artifact.
  static void validate(const ArtifactReader& in);
  /// Its buffer, named by the address, size, dtype and shape of the bytes:
  /// copies of one tensor referenced twice in a save are saved once.
  static ValueIdentity identity(const Tensor& tensor);
};

/// Reads rows [begin, end) along the first axis of a stored tensor, touching
/// only the compressed chunks that hold them (and, on a remote, fetching only
/// the chunk index and those chunks, or the rows' bytes of an uncompressed
/// tensor). The rows come in fresh, writable memory. An encoded tensor
/// (ArrayEncoding) reads only the rows too, unless a delta needs everything
/// before them: then it is decoded whole. Throws InvalidArgument for an
/// out-of-range interval, Unsupported if `in` is not a tensor artifact.
Tensor load_tensor_rows(const ArtifactReader& in, std::int64_t begin, std::int64_t end);

/// Types with a dtype: bool, fixed-width integers, float16, bfloat16, float,
/// double and std::complex of float or double.
template <class T>
concept ArrayElement = requires { dtype_of<T>::value; };

namespace detail {

/// Loads a tensor artifact and checks it is `ndim`-dimensional of `dtype`.
Tensor load_tensor_as(const ArtifactReader& in, DType dtype, int ndim);
/// The same check from the metadata alone, loading nothing: throws
/// TypeMismatch naming what the artifact holds instead.
void accept_tensor_as(const ArtifactReader& in, DType dtype, int ndim);

}  // namespace detail

// ---------------------------------------------------------------------------
// Numbers and vectors of numbers: tensors, so numpy reads them too.

template <ArrayElement T>
struct materializer<T> {
  static constexpr std::string_view name = "amphora.tensor";
  static constexpr int version = 1;
  static void save(const T& value, ArtifactWriter& out) {
    materializer<Tensor>::save(Tensor::from_values<T>({}, std::span<const T>(&value, 1)), out);
  }
  static T load(const ArtifactReader& in) {
    Tensor t = detail::load_tensor_as(in, dtype_of<T>::value, 0);
    T value;
    std::memcpy(&value, t.data(), sizeof(T));
    return value;
  }  static void accept(const ArtifactReader& in) { detail::accept_tensor_as(in, dtype_of<T>::value, 0); }
};

template <ArrayElement T>
struct materializer<std::vector<T>> {
  static constexpr std::string_view name = "amphora.tensor";
  static constexpr int version = 1;
  static void save(const std::vector<T>& values, ArtifactWriter& out) {
    materializer<Tensor>::save(Tensor::from_values<T>({static_cast<std::int64_t>(values.size())}, values), out);
  }
  static std::vector<T> load(const ArtifactReader& in) {
    Tensor t = detail::load_tensor_as(in, dtype_of<T>::value, 1);
    if constexpr (std::is_same_v<T, bool>) {
      auto bytes = std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(t.data()), t.nbytes());
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      auto v = t.values<T>();
      return std::vector<T>(v.begin(), v.end());
    }
  }  static void accept(const ArtifactReader& in) { detail::accept_tensor_as(in, dtype_of<T>::value, 1); }
};

// ---------------------------------------------------------------------------
// Fixed-size arrays of numbers: tensors of their shape, and a std::vector of
// them one more dimension (std::vector<std::array<float, 4>> is n x 4).

/// std::array of numbers, or of such arrays: its element type and shape.
template <class A>
struct FixedShape {
  static constexpr bool value = false;
};
template <ArrayElement E, std::size_t N>
struct FixedShape<std::array<E, N>> {
  static constexpr bool value = true;
  using Scalar = E;
  static constexpr std::size_t count = N;
  static std::vector<std::int64_t> dims() { return {static_cast<std::int64_t>(N)}; }
};
template <class E, std::size_t N>
  requires FixedShape<E>::value
struct FixedShape<std::array<E, N>> {
  static constexpr bool value = true;
  using Scalar = typename FixedShape<E>::Scalar;
  static constexpr std::size_t count = N * FixedShape<E>::count;
  static std::vector<std::int64_t> dims() {
    std::vector<std::int64_t> d = FixedShape<E>::dims();
    d.insert(d.begin(), static_cast<std::int64_t>(N));
    return d;
  }
};

/// A std::array of numbers (or of such arrays) laid out as one block of
/// elements, as every standard library lays them out.
template <class A>
concept FixedArray = FixedShape<A>::value && sizeof(A) == FixedShape<A>::count * sizeof(typename FixedShape<A>::Scalar);

namespace detail {

/// Loads a tensor artifact and checks it holds `dtype` elements in `shape`
/// (-1 for a dimension of any length): TypeMismatch naming `declared` otherwise.
Tensor load_tensor_shaped(const ArtifactReader& in, DType dtype, std::span<const std::int64_t> shape,
                          const std::type_info& declared);
/// The same check from the metadata alone, loading nothing.
void accept_tensor_shaped(const ArtifactReader& in, DType dtype, std::span<const std::int64_t> shape,
                          const std::type_info& declared);

}  // namespace detail

template <FixedArray A>
struct materializer<A> {
  using Scalar = typename FixedShape<A>::Scalar;
  static constexpr std::string_view name = "amphora.tensor";
  static constexpr int version = 1;
  static void save(const A& value, ArtifactWriter& out) {
    materializer<Tensor>::save(
        Tensor::from_values<Scalar>(FixedShape<A>::dims(), std::span<const Scalar>(reinterpret_cast<const Scalar*>(value.data()),
                                                                                 FixedShape<A>::count)),
        out);
  }
  static A load(const ArtifactReader& in) {
    Tensor t = detail::load_tensor_shaped(in, dtype_of<Scalar>::value, FixedShape<A>::dims(), typeid(A));
    A value;
    std::memcpy(value.data(), t.data(), sizeof(A));
    return value;
  }
  static void accept(const ArtifactReader& in) {
    detail::accept_tensor_shaped(in, dtype_of<Scalar>::value, FixedShape<A>::dims(), typeid(A));
  }
};

template <FixedArray A>
struct materializer<std::vector<A>> {
  using Scalar = typename FixedShape<A>::Scalar;
  static constexpr std::string_view name = "amphora.tensor";
  static constexpr int version = 1;
  static std::vector<std::int64_t> shape(std::int64_t rows) {
    std::vector<std::int64_t> s = FixedShape<A>::dims();
    s.insert(s.begin(), rows);
    return s;
  }
  static void save(const std::vector<A>& values, ArtifactWriter& out) {
    materializer<Tensor>::save(
        Tensor::from_values<Scalar>(shape(static_cast<std::int64_t>(values.size())),
                                    std::span<const Scalar>(reinterpret_cast<const Scalar*>(values.data()),
                                                            values.size() * FixedShape<A>::count)),
        out);
  }
  static std::vector<A> load(const ArtifactReader& in) {
    Tensor t = detail::load_tensor_shaped(in, dtype_of<Scalar>::value, shape(-1), typeid(std::vector<A>));
    std::vector<A> values(static_cast<std::size_t>(t.shape()[0]));
    if (!values.empty()) std::memcpy(values.data(), t.data(), values.size() * sizeof(A));
    return values;
  }
  static void accept(const ArtifactReader& in) {
    detail::accept_tensor_shaped(in, dtype_of<Scalar>::value, shape(-1), typeid(std::vector<A>));
  }
};

}  // namespace amphora

AMPHORA_API_END

