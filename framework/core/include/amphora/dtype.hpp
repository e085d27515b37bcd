#pragma once
// Element types of arrays (tensors, table columns, sparse matrix data) and
// their names. Shared by every materializer that stores arrays.

#include <amphora/export.hpp>

#include <complex>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

AMPHORA_API_BEGIN

namespace amphora {

/// An array's element type. Stored by name (dtype_name), never by number;
/// bool_ is one byte, 0 or 1. Only the enumerators are valid values.
enum class DType : std::uint8_t {
  bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
  float16, bfloat16, float32, float64, complex64, complex128,
};

/// IEEE 754 half precision, stored as its bit pattern.
struct float16 {
  std::uint16_t bits = 0;
  static float16 from_float(float value);
  float to_float() const;
  friend bool operator==(float16, float16) = default;
};

/// bfloat16 (the upper half of a float32), stored as its bit pattern.
struct bfloat16 {
  std::uint16_t bits = 0;
  static bfloat16 from_float(float value);
  float to_float() const;
  friend bool operator==(bfloat16, bfloat16) = default;
};

/// "bool", "int8", ..., "bfloat16", "complex128". Throws InvalidArgument
/// for a value that is no enumerator (a DType cast from a stray number).
std::string_view dtype_name(DType dtype);
/// Inverse of dtype_name; throws Unsupported naming the text for unknown names.
DType dtype_from_name(std::string_view name);
/// Bytes per element. Throws InvalidArgument as dtype_name does.
std::size_t dtype_size(DType dtype);
/// Every dtype, in enum order.
std::span<const DType> all_dtypes();
/// True for the integer dtypes, int8 to uint64 (bool is not one).
bool is_integer(DType dtype);

template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::bool_; };
template <> struct dtype_of<std::int8_t> { static constexpr DType value = DType::int8; };
template <> struct dtype_of<std::int16_t> { static constexpr DType value = DType::int16; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::int32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::int64; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::uint8; };
template <> struct dtype_of<std::uint16_t> { static constexpr DType value = DType::uint16; };
template <> struct dtype_of<std::uint32_t> { static constexpr DType value = DType::uint32; };
template <> struct dtype_of<std::uint64_t> { static constexpr DType value = DType::uint64; };
template <> struct dtype_of<float16> { static constexpr DType value = DType::float16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bfloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::float64; };
template <> struct dtype_of<std::complex<float>> { static constexpr DType value = DType::complex64; };
template <> struct dtype_of<std::complex<double>> { static constexpr DType value = DType::complex128; };

/// Maximum number of dimensions (NumPy's limit).
inline constexpr std::size_t kMaxTensorDims = 32;

/// Product of `shape`; throws InvalidArgument when a dimension is negative,
/// there are too many dimensions, or the byte size of `dtype` elements would
/// overflow 63 bits. As in NumPy, the product of the non-zero dimensions
/// must fit even when another dimension is 0.
std::uint64_t checked_element_count(std::span<const std::int64_t> shape, DType dtype);

}  // namespace amphora

AMPHORA_API_END
