#include <amphora/dtype.hpp>
#include <amphora/error.hpp>

#include <algorithm>
#include <bit>
#include <iterator>
#include <limits>
#include <string>

namespace amphora {

// ---------------------------------------------------------------------------
// dtypes

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::bool_, "bool", 1},         {DType::int8, "int8", 1},         {DType::int16, "int16", 2},
    {DType::int32, "int32", 4},        {DType::int64, "int64", 8},       {DType::uint8, "uint8", 1},
    {DType::uint16, "uint16", 2},      {DType::uint32, "uint32", 4},     {DType::uint64, "uint64", 8},
    {DType::float16, "float16", 2},    {DType::bfloat16, "bfloat16", 2}, {DType::float32, "float32", 4},
    {DType::float64, "float64", 8},    {DType::complex64, "complex64", 8}, {DType::complex128, "complex128", 16},
};
constexpr DType kAll[] = {DType::bool_,   DType::int8,     DType::int16,   DType::int32,     DType::int64,
                          DType::uint8,   DType::uint16,   DType::uint32,  DType::uint64,    DType::float16,
                          DType::bfloat16, DType::float32, DType::float64, DType::complex64, DType::complex128};

// info_of indexes the table by the enumerator's value.
static_assert([] {
  for (std::size_t k = 0; k < std::size(kDTypes); ++k)
    if (static_cast<std::size_t>(kDTypes[k].dtype) != k || k >= std::size(kAll) || kAll[k] != kDTypes[k].dtype)
      return false;
  return std::size(kDTypes) == std::size(kAll) && kAll[std::size(kAll) - 1] == DType::complex128;
}());

const DTypeInfo& info_of(DType dtype) {
  const auto index = static_cast<std::size_t>(dtype);
  if (index >= std::size(kDTypes)) throw InvalidArgument("not a DType: " + std::to_string(index));
  return kDTypes[index];
}
}  // namespace

std::string_view dtype_name(DType dtype) { return info_of(dtype).name; }
std::size_t dtype_size(DType dtype) { return info_of(dtype).size; }
std::span<const DType> all_dtypes() { return kAll; }
bool is_integer(DType dtype) { return dtype >= DType::int8 && dtype <= DType::uint64; }

DType dtype_from_name(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  throw Unsupported("unknown dtype '" + std::string(name) + "'");
}

float float16::to_float() const {
  std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  std::uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  std::uint32_t out;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;
  } else {  // subnormal half: normalise
    int shift = std::countl_zero(mantissa) - 21;
    mantissa = (mantissa << shift) & 0x3ffu;
    out = sign | (static_cast<std::uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(out);
}

float16 float16::from_float(float value) {
  std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  std::uint16_t sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
  std::uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or nan
    return {static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u))};
  if (abs >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (abs < 0x38800000u) {  // subnormal or zero in half precision
    if (abs < 0x33000000u) return {sign};
    std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    std::uint32_t half = mantissa >> shift;
    std::uint32_t rem = mantissa & ((1u << shift) - 1), midpoint = 1u << (shift - 1);
    if (rem > midpoint || (rem == midpoint && (half & 1))) ++half;
    return {static_cast<std::uint16_t>(sign | half)};
  }
  std::uint32_t half = ((abs >> 13) - (112u << 10));
  std::uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return {static_cast<std::uint16_t>(sign | half)};
}

float bfloat16::to_float() const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

bfloat16 bfloat16::from_float(float value) {
  std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((f >> 16) | 0x40u)};  // keep NaN a NaN
  f += 0x7fffu + ((f >> 16) & 1u);  // round to nearest even
  return {static_cast<std::uint16_t>(f >> 16)};
}

std::uint64_t checked_element_count(std::span<const std::int64_t> shape, DType dtype) {
  if (shape.size() > kMaxTensorDims)
    throw InvalidArgument("tensor has " + std::to_string(shape.size()) + " dimensions; at most " +
                          std::to_string(kMaxTensorDims) + " are allowed");
  for (auto d : shape)
    if (d < 0) throw InvalidArgument("tensor dimension " + std::to_string(d) + " is negative");
  // Like NumPy, the non-zero dimensions must fit even when a zero makes the
  // tensor empty: a row of such a tensor, or the same shape with the zero
  // changed, would otherwise overflow.
  const std::uint64_t limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / dtype_size(dtype);
  std::uint64_t count = 1;
  const bool zero = std::find(shape.begin(), shape.end(), 0) != shape.end();
  for (auto d : shape) {
    if (d == 0) continue;
    auto u = static_cast<std::uint64_t>(d);
    if (count > limit / u) {
      std::string text;
      for (std::size_t k = 0; k < shape.size(); ++k) text += (k ? "x" : "") + std::to_string(shape[k]);
      throw InvalidArgument("tensor shape " + text + " of " + std::string(dtype_name(dtype)) +
                            " overflows: more than 2^63 bytes" + (zero ? " in its non-zero dimensions" : ""));
    }
    count *= u;
  }
  return zero ? 0 : count;
}

}  // namespace amphora
