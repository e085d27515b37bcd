#include <amphora/array_encoding.hpp>
#include <amphora/error.hpp>
#include <amphora/parallel.hpp>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <functional>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace amphora {

namespace {

template <class T>
struct Tag {
  using type = T;
};


// Calls f(Tag<T>{}) with the C++ type of integer dtype `d`.
template <class F>
decltype(auto) visit_integer(DType d, F&& f) {
  switch (d) {
    case DType::int8: return f(Tag<std::int8_t>{});
    case DType::int16: return f(Tag<std::int16_t>{});
    case DType::int32: return f(Tag<std::int32_t>{});
    case DType::int64: return f(Tag<std::int64_t>{});
    case DType::uint8: return f(Tag<std::uint8_t>{});
    case DType::uint16: return f(Tag<std::uint16_t>{});
    case DType::uint32: return f(Tag<std::uint32_t>{});
    case DType::uint64: return f(Tag<std::uint64_t>{});
    default: throw InvalidArgument(std::string(dtype_name(d)) + " is not an integer dtype");
  }
}

DType unsigned_of(DType d) {
  switch (d) {
    case DType::int8: return DType::uint8;
    case DType::int16: return DType::uint16;
    case DType::int32: return DType::uint32;
    case DType::int64: return DType::uint64;
    default: return d;
  }
}

// The narrowest integer dtype holding every value in [lo, hi].
template <class T>
DType narrowest(T lo, T hi) {
  if constexpr (std::is_signed_v<T>) {
    if (lo < 0) {
      for (auto [d, min, max] : {std::tuple{DType::int8, std::int64_t{INT8_MIN}, std::int64_t{INT8_MAX}},
                                 {DType::int16, std::int64_t{INT16_MIN}, std::int64_t{INT16_MAX}},
                                 {DType::int32, std::int64_t{INT32_MIN}, std::int64_t{INT32_MAX}}})
        if (lo >= min && hi <= max) return d;
      return DType::int64;
    }
  }
  const auto top = static_cast<std::uint64_t>(hi);
  if (top <= UINT8_MAX) return DType::uint8;
  if (top <= UINT16_MAX) return DType::uint16;
  if (top <= UINT32_MAX) return DType::uint32;
  return DType::uint64;
}

// Elements a block of the encoding and decoding steps takes: large enough
// that a block is worth a core, small enough to spread a large array over
// all of them.
constexpr std::size_t kDecodeBlock = 1u << 18;

std::size_t block_count(std::size_t n) { return (n + kDecodeBlock - 1) / kDecodeBlock; }

// Runs body(begin, end) over blocks of [0, n) on all cores (block b starts
// at b * kDecodeBlock); a failure is reported for the first block in order
// that failed, whichever ran first.
void for_blocks(std::size_t n, const std::function<void(std::size_t, std::size_t)>& body) {
  const std::size_t blocks = block_count(n);
  std::vector<std::exception_ptr> failed(blocks);
  parallel_for(blocks, [&](std::size_t b) {
    try {
      body(b * kDecodeBlock, std::min(n, (b + 1) * kDecodeBlock));
    } catch (...) {
      failed[b] = std::current_exception();
    }
  });
  for (const auto& f : failed)
    if (f) std::rethrow_exception(f);
}

// The same when decoding: a value that does not fit To is damage.
template <class From, class To>
std::vector<std::byte> widen_checked(ConstBytes data, std::string_view where) {
  const std::size_t n = data.size() / sizeof(From);
  std::vector<std::byte> out(n * sizeof(To));
  for_blocks(n, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      From v;
      std::memcpy(&v, data.data() + i * sizeof(From), sizeof v);
      if (!std::in_range<To>(v))
        throw CorruptData(std::string(where) + ": squeezed element " + std::to_string(i) + " (" + std::to_string(v) +
                          ") does not fit the dtype it widens to");
      const To w = static_cast<To>(v);
      std::memcpy(out.data() + i * sizeof(To), &w, sizeof w);
    }
  });
  return out;
}

// Element bytes to byte planes (shuffle) or back: byte b of element i sits
// at i * W + b in elements and at b * n + i in planes. Elements [begin, end)
// only, so blocks of them can go to different cores; W known at compile
// time lets the compiler unroll the inner loop into W streams.
template <std::size_t W>
void transpose_block(const std::byte* src, std::byte* dst, std::size_t n, std::size_t begin, std::size_t end,
                     bool to_planes) {
  if (to_planes) {
    for (std::size_t i = begin; i < end; ++i)
      for (std::size_t b = 0; b < W; ++b) dst[b * n + i] = src[i * W + b];
  } else {
    for (std::size_t i = begin; i < end; ++i)
      for (std::size_t b = 0; b < W; ++b) dst[i * W + b] = src[b * n + i];
  }
}

// 8-byte elements to planes, eight elements at a time: the 8 x 8 bytes they
// make are transposed inside eight 64-bit words (swapping 4-byte, then
// 2-byte, then 1-byte blocks between word pairs), and word j goes to plane
// j whole. The compiler does not vectorize the byte loop for this width.
void planes_of_8_byte_elements(const std::byte* src, std::byte* dst, std::size_t n, std::size_t begin,
                               std::size_t end) {
  std::size_t i = begin;
#if defined(__SSE2__)
  // Sixteen elements at a time: four rounds of byte, 2-, 4- and 8-byte
  // interleaves, register k with register k + 4, turn registers holding two
  // elements each into registers holding one byte plane of all sixteen.
  // Those rounds put element p at the bit reversal of p, so each register is
  // loaded with the two elements that land in order (rev[k] and rev[k] + 8).
  constexpr std::size_t rev[8] = {0, 4, 2, 6, 1, 5, 3, 7};
  auto sixteen = [&](std::size_t at, __m128i (&r)[8]) {
    for (int k = 0; k < 8; ++k)
      r[k] = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + (at + rev[k]) * 8)),
                                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + (at + rev[k] + 8) * 8)));
    auto round = [&r](auto lo, auto hi) {
      __m128i next[8];
      for (int k = 0; k < 4; ++k) {
        next[2 * k] = lo(r[k], r[k + 4]);
        next[2 * k + 1] = hi(r[k], r[k + 4]);
      }
      std::copy(std::begin(next), std::end(next), std::begin(r));
    };
    round([](__m128i x, __m128i y) { return _mm_unpacklo_epi8(x, y); },
          [](__m128i x, __m128i y) { return _mm_unpackhi_epi8(x, y); });
    round([](__m128i x, __m128i y) { return _mm_unpacklo_epi16(x, y); },
          [](__m128i x, __m128i y) { return _mm_unpackhi_epi16(x, y); });
    round([](__m128i x, __m128i y) { return _mm_unpacklo_epi32(x, y); },
          [](__m128i x, __m128i y) { return _mm_unpackhi_epi32(x, y); });
    round([](__m128i x, __m128i y) { return _mm_unpacklo_epi64(x, y); },
          [](__m128i x, __m128i y) { return _mm_unpackhi_epi64(x, y); });
  };
  // Two sixteens before storing, so each plane gets 32 consecutive bytes.
  for (; i + 32 <= end; i += 32) {
    __m128i first[8], second[8];
    sixteen(i, first);
    sixteen(i + 16, second);
    for (std::size_t b = 0; b < 8; ++b) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + b * n + i), first[b]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + b * n + i + 16), second[b]);
    }
  }
#endif
  for (; i + 8 <= end; i += 8) {
    std::uint64_t r[8];
    std::memcpy(r, src + i * 8, sizeof r);
    auto swap = [&r](int lo, int hi, int shift, std::uint64_t mask) {
      const std::uint64_t t = ((r[lo] >> shift) ^ r[hi]) & mask;
      r[lo] ^= t << shift;
      r[hi] ^= t;
    };
    swap(0, 4, 32, 0x00000000FFFFFFFFull), swap(1, 5, 32, 0x00000000FFFFFFFFull);
    swap(2, 6, 32, 0x00000000FFFFFFFFull), swap(3, 7, 32, 0x00000000FFFFFFFFull);
    swap(0, 2, 16, 0x0000FFFF0000FFFFull), swap(1, 3, 16, 0x0000FFFF0000FFFFull);
    swap(4, 6, 16, 0x0000FFFF0000FFFFull), swap(5, 7, 16, 0x0000FFFF0000FFFFull);
    swap(0, 1, 8, 0x00FF00FF00FF00FFull), swap(2, 3, 8, 0x00FF00FF00FF00FFull);
    swap(4, 5, 8, 0x00FF00FF00FF00FFull), swap(6, 7, 8, 0x00FF00FF00FF00FFull);
    for (std::size_t b = 0; b < 8; ++b) std::memcpy(dst + b * n + i, &r[b], 8);
  }
  transpose_block<8>(src, dst, n, i, end, true);
}

void transpose_into(ConstBytes data, std::size_t width, bool to_planes, std::byte* out) {
  const std::size_t n = width ? data.size() / width : 0;
  constexpr std::size_t kBlockElements = 1u << 16;
  auto run = [&](std::size_t begin, std::size_t end) {
    switch (width) {
      case 2: return transpose_block<2>(data.data(), out, n, begin, end, to_planes);
      case 4: return transpose_block<4>(data.data(), out, n, begin, end, to_planes);
      case 8:
        if (to_planes && std::endian::native == std::endian::little)
          return planes_of_8_byte_elements(data.data(), out, n, begin, end);
        return transpose_block<8>(data.data(), out, n, begin, end, to_planes);
      case 16: return transpose_block<16>(data.data(), out, n, begin, end, to_planes);
      default:
        for (std::size_t i = begin; i < end; ++i)
          for (std::size_t b = 0; b < width; ++b) {
            const std::size_t element = i * width + b, plane = b * n + i;
            out[to_planes ? plane : element] = data[to_planes ? element : plane];
          }
    }
  };
  if (width == 1) {
    if (n) std::memcpy(out, data.data(), n);
    return;
  }
  // Small arrays (a chunk) on the calling thread; large ones on all cores.
  if (data.size() <= (4u << 20)) return run(0, n);
  parallel_for((n + kBlockElements - 1) / kBlockElements, [&](std::size_t k) {
    run(k * kBlockElements, std::min(n, (k + 1) * kBlockElements));
  });
}

std::vector<std::byte> transpose_bytes(ConstBytes data, std::size_t width, bool to_planes) {
  std::vector<std::byte> out(data.size());
  transpose_into(data, width, to_planes, out.data());
  return out;
}

void check_shuffle_sizes(ConstBytes from, std::size_t width, MutableBytes to) {
  if (width < 1 || width > 16 || from.size() != to.size() || from.size() % width)
    throw InvalidArgument("cannot shuffle " + std::to_string(from.size()) + " bytes of " + std::to_string(width) +
                          "-byte elements into " + std::to_string(to.size()) + " bytes");
}

[[noreturn]] void bad_recipe(std::string_view where, const std::string& why) {
  throw CorruptData(std::string(where) + ": invalid encoding recipe: " + why);
}

DType recipe_dtype(const nlohmann::json& recipe, const char* key, std::string_view where) {
  auto it = recipe.find(key);
  if (it == recipe.end() || !it->is_string()) bad_recipe(where, std::string("'") + key + "' is missing or not a string");
  try {
    return dtype_from_name(it->get<std::string>());
  } catch (const Unsupported&) {
    bad_recipe(where, std::string("'") + key + "' names no dtype ('" + it->get<std::string>() + "')");
  }
}

// 10^k for k in [0, 15], each exact in a double.
constexpr double kPowersOfTen[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
constexpr int kMaxDecimalDigits = 15;
constexpr double kDecimalLimit = 9007199254740992.0;  // 2^53: larger integers are not all exact doubles
constexpr double kUniqueBelow = 1125899906842624.0;   // 2^50

// Whether v is exactly round(v · 10^k) / 10^k, that integer below 2^53 in
// magnitude; it is stored in `d`. Division of two exact doubles rounds
// correctly, so the quotient is the double nearest the decimal, as a parser
// of the decimal's text would give.
// v · 10^k is itself rounded, and for integers near 2^53 may land one off
// the integer sought, so its neighbours are tried too. Near 2^53 two
// neighbours can both divide back to v: the one with the most trailing
// zeros is taken, which is 10 times the integer at k - 1 whenever v has one
// there, so a scan that raises k by multiplying its least and greatest
// integers by 10 (DecimalScan::add) agrees with every value's own integer.
inline int trailing_zeros(std::int64_t d) {
  int zeros = 0;
  for (; d != 0 && d % 10 == 0 && zeros < 18; d /= 10) ++zeros;
  return d == 0 ? 18 : zeros;
}
inline bool decimal_at(double v, int k, std::int64_t& d) {
  if (v == 0 && std::signbit(v)) return false;  // the integer 0 decodes to +0.0
  const double scaled = std::nearbyint(v * kPowersOfTen[k]);
  if (!(std::fabs(scaled) < kDecimalLimit)) return false;  // NaN too
  // Below 2^50, integers one apart divide to doubles more than two ulps
  // apart, so no neighbour can divide back to v as well: the rounded
  // product, when it works, is the only candidate (the common case).
  if (std::fabs(scaled) < kUniqueBelow) {
    const double back = scaled / kPowersOfTen[k];
    if (std::memcmp(&back, &v, sizeof v) == 0) {
      d = static_cast<std::int64_t>(scaled);
      return true;
    }
  }
  bool found = false;
  for (double candidate : {scaled, scaled - 1, scaled + 1}) {
    if (!(std::fabs(candidate) < kDecimalLimit)) continue;
    const double back = candidate / kPowersOfTen[k];
    if (std::memcmp(&back, &v, sizeof v) != 0) continue;
    const auto c = static_cast<std::int64_t>(candidate);
    if (!found || trailing_zeros(c) > trailing_zeros(d)) d = c;
    found = true;
  }
  return found;
}

inline double double_at(ConstBytes data, std::size_t i) {
  double v;
  std::memcpy(&v, data.data() + i * sizeof v, sizeof v);
  return v;
}

// The smallest digits k that hold every value, and the least and greatest
// integer d at that k; digits -1 when there is none. Blocks are scanned on
// all cores and merged in order, which gives what one scan in order gives.
DecimalScan scan_decimals(ConstBytes data, std::size_t count) {
  std::vector<DecimalScan> scans(block_count(count));
  for_blocks(count, [&](std::size_t begin, std::size_t end) {
    DecimalScan& scan = scans[begin / kDecodeBlock];
    // Values that fit the digits so far only move the bounds: kept here as
    // the values holding the least and greatest integer, which the scan
    // takes in (giving the bounds it would have found) before any value
    // that needs more digits, and at the end.
    std::optional<std::pair<double, std::int64_t>> least, greatest;
    auto flush = [&] {
      if (least) scan.add(least->first), scan.add(greatest->first);
      least.reset(), greatest.reset();
    };
    for (std::size_t i = begin; i < end && scan.digits() >= 0; ++i) {
      const double v = double_at(data, i);
      std::int64_t d = 0;
      if (!decimal_at(v, scan.digits(), d)) {
        flush();
        scan.add(v);
        continue;
      }
      if (!least || d < least->second) least.emplace(v, d);
      if (!greatest || d > greatest->second) greatest.emplace(v, d);
    }
    flush();
  });
  DecimalScan all;
  for (const auto& scan : scans) all.merge(scan);
  return all;
}

}  // namespace

// A value exact at k is exact at every larger k with d scaled by the same
// power of ten, so raising k rescales the bounds found so far.
bool DecimalScan::raise_to(int digits) {
  while (digits_ >= 0 && digits_ < digits) {
    if (++digits_ > kMaxDecimalDigits) return (digits_ = -1), false;
    lo_ *= 10, hi_ *= 10;  // both below 2^53 before, so below 2^57 now: no overflow
    if (lo_ <= -(std::int64_t{1} << 53) || hi_ >= (std::int64_t{1} << 53)) return (digits_ = -1), false;
  }
  return digits_ >= 0;
}

void DecimalScan::add(double v) {
  if (digits_ < 0) return;
  std::int64_t d = 0;
  while (!decimal_at(v, digits_, d))
    if (!raise_to(digits_ + 1)) return;
  if (!any_ || d < lo_) lo_ = d;
  if (!any_ || d > hi_) hi_ = d;
  any_ = true;
}

void DecimalScan::merge(const DecimalScan& other) {
  if (other.digits_ < 0) return void(digits_ = -1);
  if (digits_ < 0 || !other.any_) return;
  DecimalScan theirs = other;
  if (!theirs.raise_to(digits_) || !raise_to(theirs.digits_)) return void(digits_ = -1);
  if (!any_ || theirs.lo_ < lo_) lo_ = theirs.lo_;
  if (!any_ || theirs.hi_ > hi_) hi_ = theirs.hi_;
  any_ = true;
}

bool DecimalScan::scaled(double v, int k, std::int64_t& d) {
  return k >= 0 && k <= kMaxDecimalDigits && decimal_at(v, k, d);
}

int decimal_digits(std::span<const double> values) {
  return scan_decimals(std::as_bytes(values), values.size()).digits();
}

namespace {

// The least and greatest of value(i) over [0, count), scanned on all cores;
// {0, 0} when empty.
template <class T, class F>
std::pair<T, T> range_of(std::size_t count, const F& value) {
  std::vector<std::pair<T, T>> ranges(block_count(count));
  for_blocks(count, [&](std::size_t begin, std::size_t end) {
    T lo = value(begin), hi = lo;
    for (std::size_t i = begin + 1; i < end; ++i) {
      const T v = value(i);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    ranges[begin / kDecodeBlock] = {lo, hi};
  });
  std::pair<T, T> all{T{0}, T{0}};
  for (std::size_t b = 0; b < ranges.size(); ++b) {
    if (b == 0 || ranges[b].first < all.first) all.first = ranges[b].first;
    if (b == 0 || ranges[b].second > all.second) all.second = ranges[b].second;
  }
  return all;
}

// value(i) for every i in [0, count) as little-endian To, written on all cores.
template <class To, class F>
std::vector<std::byte> values_as(std::size_t count, const F& value) {
  std::vector<std::byte> out(count * sizeof(To));
  for_blocks(count, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const To v = static_cast<To>(value(i));
      std::memcpy(out.data() + i * sizeof(To), &v, sizeof(To));
    }
  });
  return out;
}

template <class T>
T element_at(ConstBytes bytes, std::size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

// Element i's difference from element i - 1 (0 for the first) in the
// unsigned integer U of the elements' width, wrapping.
template <class U>
auto wrapped_difference(ConstBytes data) {
  return [data](std::size_t i) {
    return i == 0 ? U{0} : static_cast<U>(element_at<U>(data, i) - element_at<U>(data, i - 1));
  };
}

std::size_t whole_elements(DType dtype, ConstBytes data, const char* who) {
  const std::size_t width = dtype_size(dtype);
  if (data.size() % width != 0)
    throw InvalidArgument(std::string(who) + ": " + std::to_string(data.size()) + " bytes are not a whole number of " +
                          std::string(dtype_name(dtype)) + " elements");
  return data.size() / width;
}

// Decimal coding in one pass where a sample tells the outcome: the digits
// of evenly spaced values, and from their least and greatest integers the
// stored width. Every value is then checked at those digits, converted and
// written in that width at once, where a scan and then the store would each
// divide every value. The digits are the whole array's whenever every
// value is exact at them, as sampled values need them; the width may prove
// too narrow, which the range found says.
struct DecimalPass {
  bool exact = false;  // every value is exact at `digits`
  int digits = 0;
  std::int64_t lo = 0, hi = 0;  // the least and greatest integer at `digits`, when exact
  DType stored = DType::int64;
  std::vector<std::byte> bytes;  // every integer as `stored`; valid when exact and narrowest(lo, hi) is `stored`
};

constexpr std::size_t kDecimalSample = 4096;

DecimalPass decimal_pass(ConstBytes data, std::size_t count, bool squeeze) {
  DecimalPass pass;
  DecimalScan sample;
  for (std::size_t k = 0; k < kDecimalSample; ++k) sample.add(double_at(data, k * count / kDecimalSample));
  if (sample.digits() < 0) return pass;
  pass.digits = sample.digits();
  pass.stored = squeeze ? narrowest<std::int64_t>(sample.lo(), sample.hi()) : DType::int64;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges(block_count(count));
  std::atomic<bool> inexact{false};
  pass.bytes = visit_integer(pass.stored, [&](auto tag) {
    using To = typename decltype(tag)::type;
    std::vector<std::byte> out(count * sizeof(To));
    for_blocks(count, [&](std::size_t begin, std::size_t end) {
      std::int64_t lo = 0, hi = 0;
      for (std::size_t i = begin; i < end; ++i) {
        std::int64_t d = 0;
        if (!decimal_at(double_at(data, i), pass.digits, d)) return void(inexact = true);
        lo = i == begin || d < lo ? d : lo;
        hi = i == begin || d > hi ? d : hi;
        const To v = static_cast<To>(d);  // wraps when the width proves too narrow: then unused
        std::memcpy(out.data() + i * sizeof(To), &v, sizeof(To));
        if ((i & 0xFFFF) == 0 && inexact.load(std::memory_order_relaxed)) return;
      }
      ranges[begin / kDecodeBlock] = {lo, hi};
    });
    return out;
  });
  if (inexact) return pass;
  pass.exact = true;
  for (std::size_t b = 0; b < ranges.size(); ++b) {
    if (b == 0 || ranges[b].first < pass.lo) pass.lo = ranges[b].first;
    if (b == 0 || ranges[b].second > pass.hi) pass.hi = ranges[b].second;
  }
  return pass;
}

}  // namespace

DType delta_squeeze_dtype(DType dtype, ConstBytes data) {
  const std::size_t count = whole_elements(dtype, data, "delta_squeeze_dtype");
  if (!is_integer(dtype)) throw InvalidArgument("delta coding needs an integer dtype, not " + std::string(dtype_name(dtype)));
  return visit_integer(dtype, [&](auto tag) {
    using U = std::make_unsigned_t<typename decltype(tag)::type>;
    return std::apply(narrowest<U>, range_of<U>(count, wrapped_difference<U>(data)));
  });
}

EncodedArray encode_array(DType dtype, ConstBytes data, const ArrayEncoding& encoding) {
  const std::size_t count = whole_elements(dtype, data, "encode_array");
  if (encoding.decimal && dtype != DType::float64)
    throw InvalidArgument("decimal coding needs float64, not " + std::string(dtype_name(dtype)));
  if ((encoding.delta || encoding.squeeze) && !is_integer(dtype) && !encoding.decimal)
    throw InvalidArgument(std::string(encoding.delta ? "delta coding" : "squeezing") + " needs an integer dtype, not " +
                          std::string(dtype_name(dtype)));
  if (encoding.decimal && encoding.delta) throw InvalidArgument("decimal and delta coding do not combine");
  EncodedArray out;
  out.recipe = {{"dtype", dtype_name(dtype)}, {"count", count}, {"transforms", nlohmann::json::array()}};
  out.stored_dtype = dtype;
  // The bytes as decimal, delta and squeeze leave them: the input itself
  // when none applies (no copy for what stays unchanged). They are computed
  // element by element straight into the stored width, so a large array is
  // never held at an intermediate width, and on all cores.
  ConstBytes current = data;
  // Stores value(i) for every element as `narrow` (no copy when the values
  // are the input's own and keep their dtype).
  auto store = [&](DType narrow, bool input_itself, const auto& value) {
    out.stored_dtype = narrow;
    if (narrow == dtype && input_itself) return;
    out.bytes = visit_integer(narrow, [&](auto to) { return values_as<typename decltype(to)::type>(count, value); });
    current = ConstBytes(out.bytes.data(), out.bytes.size());
  };

  if (encoding.decimal) {
    // A large array in one pass when a sample tells its digits and width
    // (decimal_pass); otherwise, or where it proves wrong, a scan of every
    // value, then the store.
    DecimalPass pass = count >= 16 * kDecimalSample ? decimal_pass(data, count, encoding.squeeze) : DecimalPass{};
    if (!pass.exact) {
      const DecimalScan scan = scan_decimals(data, count);
      if (scan.digits() < 0)
        throw InvalidArgument("decimal coding needs values with at most " + std::to_string(kMaxDecimalDigits) +
                              " decimal digits after the point and fewer than 16 in all, not -0.0, NaN or infinite");
      pass = {true, scan.digits(), scan.lo(), scan.hi(), DType::int64, {}};
    }
    const int digits = pass.digits;
    const DType stored = encoding.squeeze ? narrowest<std::int64_t>(pass.lo, pass.hi) : DType::int64;
    if (!pass.bytes.empty() && stored == pass.stored) {
      out.stored_dtype = stored;
      out.bytes = std::move(pass.bytes);
      current = ConstBytes(out.bytes.data(), out.bytes.size());
    } else {
      std::vector<std::byte>().swap(pass.bytes);  // written in a width the range outgrew
      store(stored, false, [&](std::size_t i) {
        std::int64_t d = 0;
        if (!decimal_at(double_at(data, i), digits, d))
          throw InvalidArgument("decimal coding: element " + std::to_string(i) + " changed while it was encoded");
        return d;
      });
    }
    out.recipe["decimal_digits"] = digits;
    out.recipe["transforms"].push_back("decimal");
  } else if (encoding.delta) {
    // Differences wrap in the unsigned integer of the same width, so values
    // that decrease are stored exactly too; only mostly increasing ones make
    // small differences that squeeze and the codecs shrink.
    visit_integer(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using U = std::make_unsigned_t<T>;
      out.recipe["first"] = count ? element_at<T>(data, 0) : T{0};
      auto difference = wrapped_difference<U>(data);
      store(encoding.squeeze ? std::apply(narrowest<U>, range_of<U>(count, difference)) : dtype_of<U>::value, false,
            difference);
    });
    out.recipe["transforms"].push_back("delta");
  } else if (encoding.squeeze) {
    visit_integer(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto value = [&](std::size_t i) { return element_at<T>(data, i); };
      store(std::apply(narrowest<T>, range_of<T>(count, value)), true, value);
    });
  }
  if (encoding.squeeze) out.recipe["transforms"].push_back("squeeze");
  if (encoding.shuffle) {
    out.bytes = transpose_bytes(current, dtype_size(out.stored_dtype), true);
    current = ConstBytes(out.bytes.data(), out.bytes.size());
    out.recipe["transforms"].push_back("shuffle");
  }
  if (current.data() != out.bytes.data() || current.size() != out.bytes.size())
    out.bytes.assign(current.begin(), current.end());
  out.recipe["stored_dtype"] = dtype_name(out.stored_dtype);
  return out;
}

void shuffle_bytes(ConstBytes elements, std::size_t width, MutableBytes planes) {
  check_shuffle_sizes(elements, width, planes);
  transpose_into(elements, width, true, planes.data());
}

void unshuffle_bytes(ConstBytes planes, std::size_t width, MutableBytes elements) {
  check_shuffle_sizes(planes, width, elements);
  transpose_into(planes, width, false, elements.data());
}

namespace {

void check_delta_sizes(std::size_t from, std::size_t width, std::size_t to) {
  if ((width != 1 && width != 2 && width != 4 && width != 8) || from != to || from % width)
    throw InvalidArgument("cannot delta-code " + std::to_string(from) + " bytes of " + std::to_string(width) +
                          "-byte integers into " + std::to_string(to) + " bytes");
}

template <class F>
decltype(auto) visit_unsigned_width(std::size_t width, F&& f) {
  switch (width) {
    case 1: return f(Tag<std::uint8_t>{});
    case 2: return f(Tag<std::uint16_t>{});
    case 4: return f(Tag<std::uint32_t>{});
    default: return f(Tag<std::uint64_t>{});
  }
}

}  // namespace

// Zigzag: a difference read as signed goes to 0, 1, 2, 3, 4, ... for 0,
// -1, 1, -2, 2, ..., so a small fall is a small number too rather than
// one with every high byte set.
template <class U>
U zigzag(U d) {
  return static_cast<U>(static_cast<U>(d << 1) ^ static_cast<U>(U{0} - static_cast<U>(d >> (8 * sizeof(U) - 1))));
}
template <class U>
U unzigzag(U z) {
  return static_cast<U>(static_cast<U>(z >> 1) ^ static_cast<U>(U{0} - static_cast<U>(z & 1u)));
}

#if defined(__SSE2__)
// The running sum of 16 bytes at a time, in place: within a vector by
// adding it to itself shifted by 1, 2, 4, ... elements, then the last sum
// of the vector before, broadcast. The chain from vector to vector is that
// one addition, where a scalar sum has one per element. Returns how many
// elements it summed (whole vectors); `acc` ends as the last sum.
template <class U>
std::size_t running_sum_sse2(std::byte* p, std::size_t n, U& acc) {
  constexpr std::size_t kLanes = 16 / sizeof(U);
  auto add = [](__m128i a, __m128i b) {
    if constexpr (sizeof(U) == 1) return _mm_add_epi8(a, b);
    else if constexpr (sizeof(U) == 2) return _mm_add_epi16(a, b);
    else return _mm_add_epi32(a, b);
  };
  auto last_everywhere = [](__m128i x) {  // the last lane in every lane
    if constexpr (sizeof(U) == 1) {
      x = _mm_unpackhi_epi8(x, x);
      x = _mm_unpackhi_epi16(x, x);
    } else if constexpr (sizeof(U) == 2) {
      x = _mm_unpackhi_epi16(x, x);
    }
    return _mm_shuffle_epi32(x, 0xFF);
  };
  __m128i carry = _mm_setzero_si128();
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i * sizeof(U)));
    if constexpr (sizeof(U) == 1) x = add(x, _mm_slli_si128(x, 1));
    if constexpr (sizeof(U) <= 2) x = add(x, _mm_slli_si128(x, 2));
    x = add(x, _mm_slli_si128(x, 4));
    x = add(x, _mm_slli_si128(x, 8));
    x = add(x, carry);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i * sizeof(U)), x);
    carry = last_everywhere(x);
  }
  if (i) std::memcpy(&acc, p + (i - 1) * sizeof(U), sizeof(U));
  return i;
}
#endif

void delta_bytes(ConstBytes elements, std::size_t width, MutableBytes differences) {
  check_delta_sizes(elements.size(), width, differences.size());
  if (elements.data() == differences.data() && !elements.empty())
    throw InvalidArgument("delta_bytes: the differences cannot overwrite the elements");
  visit_unsigned_width(width, [&](auto tag) {
    using U = typename decltype(tag)::type;
    const std::size_t n = elements.size() / sizeof(U);
    if (n == 0) return;
    std::byte* out = differences.data();
    const U first = zigzag(element_at<U>(elements, 0));
    std::memcpy(out, &first, sizeof(U));
    // Each difference from two loads, not from a value carried over, so
    // the loop vectorizes.
    for (std::size_t i = 1; i < n; ++i) {
      const U d = zigzag(static_cast<U>(element_at<U>(elements, i) - element_at<U>(elements, i - 1)));
      std::memcpy(out + i * sizeof(U), &d, sizeof(U));
    }
  });
}

void undelta_bytes(MutableBytes differences, std::size_t width) {
  check_delta_sizes(differences.size(), width, differences.size());
  visit_unsigned_width(width, [&](auto tag) {
    using U = typename decltype(tag)::type;
    const std::size_t n = differences.size() / sizeof(U);
    std::byte* p = differences.data();
    // Undoing the zigzag vectorizes; the running sum after it is one chain.
    for (std::size_t i = 0; i < n; ++i) {
      U z;
      std::memcpy(&z, p + i * sizeof(U), sizeof(U));
      z = unzigzag(z);
      std::memcpy(p + i * sizeof(U), &z, sizeof(U));
    }
    std::size_t i = 0;
    U acc = 0;
#if defined(__SSE2__)
    if constexpr (sizeof(U) < 8) i = running_sum_sse2<U>(p, n, acc);
#endif
    for (; i < n; ++i) {
      U d;
      std::memcpy(&d, p + i * sizeof(U), sizeof(U));
      acc = static_cast<U>(acc + d);
      std::memcpy(p + i * sizeof(U), &acc, sizeof(U));
    }
  });
}

std::vector<std::byte> decode_array(const nlohmann::json& recipe, ConstBytes stored, std::string_view where) {
  if (!recipe.is_object()) bad_recipe(where, "not a JSON object");
  const DType dtype = recipe_dtype(recipe, "dtype", where);
  const DType stored_dtype = recipe_dtype(recipe, "stored_dtype", where);
  auto count_it = recipe.find("count");
  if (count_it == recipe.end() || !count_it->is_number_integer() ||
      (!count_it->is_number_unsigned() && count_it->get<std::int64_t>() < 0))
    bad_recipe(where, "'count' is not a count");
  const auto count = count_it->get<std::uint64_t>();
  if (count > stored.size() || stored.size() / dtype_size(stored_dtype) != count ||
      stored.size() % dtype_size(stored_dtype) != 0)
    throw CorruptData(std::string(where) + ": " + std::to_string(stored.size()) + " stored bytes are not " +
                      std::to_string(count) + " " + std::string(dtype_name(stored_dtype)) + " elements");
  auto t = recipe.find("transforms");
  if (t == recipe.end() || !t->is_array()) bad_recipe(where, "'transforms' is not a list");
  bool decimal = false, delta = false, squeeze = false, shuffled = false;
  int last = -1;
  for (const auto& name : *t) {
    const int rank = !name.is_string()      ? -1
                     : name == "decimal" ? 0
                     : name == "delta"   ? 1
                     : name == "squeeze" ? 2
                     : name == "shuffle" ? 3
                                         : -1;
    if (rank < 0) bad_recipe(where, "unknown transform " + name.dump());
    if (rank <= last) bad_recipe(where, "transforms repeated or out of order (decimal, delta, squeeze, shuffle)");
    last = rank;
    (rank == 0 ? decimal : rank == 1 ? delta : rank == 2 ? squeeze : shuffled) = true;
  }
  if (decimal && (dtype != DType::float64 || delta))
    bad_recipe(where, "decimal applies to float64 without delta, not to " + std::string(dtype_name(dtype)));
  if ((delta || squeeze) && !is_integer(dtype) && !decimal)
    bad_recipe(where, "delta and squeeze apply to integers, not " + std::string(dtype_name(dtype)));
  int digits = 0;
  if (decimal) {
    auto k = recipe.find("decimal_digits");
    if (k == recipe.end() || !k->is_number_integer() || k->get<std::int64_t>() < 0 ||
        k->get<std::int64_t>() > kMaxDecimalDigits)
      bad_recipe(where, "'decimal_digits' is not an integer in [0, " + std::to_string(kMaxDecimalDigits) + "]");
    digits = k->get<int>();
  }
  const DType before_squeeze = decimal ? DType::int64 : delta ? unsigned_of(dtype) : dtype;
  if (squeeze ? !is_integer(stored_dtype) || dtype_size(stored_dtype) > dtype_size(before_squeeze)
              : stored_dtype != before_squeeze)
    bad_recipe(where, "stored dtype " + std::string(dtype_name(stored_dtype)) + " does not follow from " +
                          std::string(dtype_name(dtype)) + " and the transforms");

  // Each step reads what the one before left and writes a buffer at most
  // once; delta and decimal rewrite the buffer already owned in place.
  std::vector<std::byte> owned;
  ConstBytes current = stored;
  auto take = [&](std::vector<std::byte>&& bytes) {
    owned = std::move(bytes);
    current = ConstBytes(owned.data(), owned.size());
  };
  auto own = [&] {
    if (current.data() != owned.data() || current.size() != owned.size()) take({current.begin(), current.end()});
  };
  if (shuffled) take(transpose_bytes(stored, dtype_size(stored_dtype), false));
  if (squeeze && stored_dtype != before_squeeze)
    take(visit_integer(stored_dtype, [&](auto from) {
      return visit_integer(before_squeeze, [&](auto to) {
        return widen_checked<typename decltype(from)::type, typename decltype(to)::type>(current, where);
      });
    }));
  if (delta)
    visit_integer(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using U = std::make_unsigned_t<T>;
      auto first = recipe.find("first");
      if (first == recipe.end() || !first->is_number_integer()) bad_recipe(where, "'first' is missing");
      const bool fits = first->is_number_unsigned() ? std::in_range<T>(first->get<std::uint64_t>())
                                                    : std::in_range<T>(first->get<std::int64_t>());
      if (!fits) bad_recipe(where, "'first' " + first->dump() + " does not fit " + std::string(dtype_name(dtype)));
      own();
      const U start = first->is_number_unsigned() ? static_cast<U>(first->get<std::uint64_t>())
                                                  : static_cast<U>(first->get<std::int64_t>());
      std::byte* p = owned.data();
      const std::size_t n = owned.size() / sizeof(U);
      // A prefix sum in two passes over blocks: each block's sum, then each
      // block accumulated from the sum of those before it (wrapping, as the
      // differences were taken).
      const std::size_t blocks = block_count(n);
      std::vector<U> sums(blocks);
      for_blocks(n, [&](std::size_t begin, std::size_t end) {
        U sum = 0;
        for (std::size_t i = begin; i < end; ++i) {
          U d;
          std::memcpy(&d, p + i * sizeof(U), sizeof d);
          sum = static_cast<U>(sum + d);
        }
        sums[begin / kDecodeBlock] = sum;
      });
      std::vector<U> before(blocks);
      U running = start;
      for (std::size_t b = 0; b < blocks; ++b) before[b] = running, running = static_cast<U>(running + sums[b]);
      for_blocks(n, [&](std::size_t begin, std::size_t end) {
        U acc = before[begin / kDecodeBlock];
        for (std::size_t i = begin; i < end; ++i) {
          U d;
          std::memcpy(&d, p + i * sizeof(U), sizeof d);
          acc = static_cast<U>(acc + d);
          const T v = static_cast<T>(acc);
          std::memcpy(p + i * sizeof(T), &v, sizeof v);
        }
      });
    });
  if (decimal) {
    own();
    std::byte* p = owned.data();
    for_blocks(owned.size() / 8, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        std::int64_t d;
        std::memcpy(&d, p + i * 8, 8);
        if (!(static_cast<double>(d) < kDecimalLimit && static_cast<double>(d) > -kDecimalLimit))
          throw CorruptData(std::string(where) + ": decimal element " + std::to_string(i) + " (" + std::to_string(d) +
                            ") is not below 2^53 in magnitude");
        const double v = static_cast<double>(d) / kPowersOfTen[digits];
        std::memcpy(p + i * 8, &v, 8);
      }
    });
  }
  own();
  return owned;
}

namespace {

// A string's length and bytes packed for comparison without reading the
// string again: for up to 16 bytes `head` and `tail` hold them all (loads
// that overlap for shorter strings), so equal keys mean equal strings; longer
// strings also compare their bytes.
struct Key {
  std::uint64_t head = 0, tail = 0;
  std::uint32_t size = 0;
  std::uint64_t hash = 0;
};

inline std::uint64_t load8(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint32_t load4(const char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline Key key_of(std::string_view s) {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  Key k;
  k.size = static_cast<std::uint32_t>(s.size());
  const char* p = s.data();
  const std::size_t n = s.size();
  if (n >= 8) {
    k.head = load8(p);
    k.tail = load8(p + n - 8);
  } else if (n >= 4) {
    k.head = load4(p) | (std::uint64_t{load4(p + n - 4)} << 32);
  } else if (n > 0) {
    k.head = static_cast<unsigned char>(p[0]) | (std::uint64_t{static_cast<unsigned char>(p[n / 2])} << 8) |
             (std::uint64_t{static_cast<unsigned char>(p[n - 1])} << 16);
  }
  std::uint64_t h = (k.head ^ (n * kMul)) * kMul;
  h = (h ^ (h >> 29) ^ k.tail) * kMul;
  for (std::size_t i = 8; i + 8 < n; i += 8) h = (h ^ (h >> 29) ^ load8(p + i)) * kMul;  // the middle of long strings
  k.hash = h ^ (h >> 32);
  return k;
}

// The distinct strings of one range of rows, in order of first appearance,
// in an open-addressing table (power-of-two slots, at most three quarters
// full). A slot holds a string's size, its first eight bytes (key_of's head)
// and 1 + its code: for strings of up to 8 bytes, which head and size spell
// out exactly, a lookup reads one slot and nothing else. Longer strings go on
// to their key (by code) for the last eight bytes, and past 16 bytes to the
// string itself.
class LocalDictionary {
 public:
  std::vector<std::string_view> words;
  std::uint64_t word_bytes = 0;  // of `words`

  bool within_limits() const { return words.size() <= kMaxDictionaryWords && word_bytes <= kMaxDictionaryBytes; }

  /// Starts loading the slot `key` hashes to (call a few keys ahead of code_of).
  void prefetch(const Key& key) const { __builtin_prefetch(&slots_[key.hash & (slots_.size() - 1)]); }

  std::uint32_t code_of(std::string_view s) { return code_of(s, key_of(s)); }

  /// The code of `s`, adding it as persist(s) (a view that outlives `s`
  /// when the caller's strings do not) if it is new.
  template <class Persist = std::identity>
  std::uint32_t code_of(std::string_view s, const Key& key, const Persist& persist = {}) {
    std::size_t at = 0;
    if (const std::int64_t code = find(s, key, at); code >= 0) return static_cast<std::uint32_t>(code);
    return insert(s, key, at, persist);
  }

  /// The code of `s`, or -1 with `at` the free slot where it would go.
  std::int64_t find(std::string_view s, const Key& key, std::size_t& at) const {
    const std::size_t mask = slots_.size() - 1;
    at = key.hash & mask;
    while (true) {
      const Slot& slot = slots_[at];
      if (slot.code_plus_1 == 0) return -1;
      if (slot.head == key.head && slot.size == key.size) {
        const std::uint32_t code = slot.code_plus_1 - 1;
        if (key.size <= 8 || (keys_[code].tail == key.tail && (key.size <= 16 || words[code] == s))) return code;
      }
      at = (at + 1) & mask;
    }
  }

 private:
  struct Slot {
    std::uint64_t head = 0;
    std::uint32_t size = 0;
    std::uint32_t code_plus_1 = 0;  // 0: free
  };

  // Out of line: most lookups find their string, and the loop around
  // code_of stays small enough to inline.
  template <class Persist>
  [[gnu::noinline]] std::uint32_t insert(std::string_view s, const Key& key, std::size_t at, const Persist& persist) {
    if (words.size() >= std::numeric_limits<std::uint32_t>::max() - 1)
      throw InvalidArgument("dictionary encoding holds fewer than 2^32 - 1 distinct strings");
    if (4 * (words.size() + 1) > 3 * slots_.size()) {
      grow();
      at = free_slot(key.hash);
    }
    words.push_back(persist(s));
    word_bytes += s.size();
    keys_.push_back(key);
    slots_[at] = {key.head, key.size, static_cast<std::uint32_t>(words.size())};
    return static_cast<std::uint32_t>(words.size() - 1);
  }

  std::size_t free_slot(std::uint64_t hash) const {
    std::size_t at = hash & (slots_.size() - 1);
    while (slots_[at].code_plus_1 != 0) at = (at + 1) & (slots_.size() - 1);
    return at;
  }

  void grow() {
    slots_.assign(slots_.size() * 2, Slot{});
    for (std::size_t code = 0; code < keys_.size(); ++code) {
      const Key& k = keys_[code];
      slots_[free_slot(k.hash)] = {k.head, k.size, static_cast<std::uint32_t>(code + 1)};
    }
  }
  std::vector<Slot> slots_ = std::vector<Slot>(8);  // never empty, so lookups need no check; small, as wide imports hold one per column
  std::vector<Key> keys_;
};

// Dictionary-encodes `count` strings, string i being get(i): ranges of rows
// are encoded on all cores, then their dictionaries are merged in row order,
// which keeps the global order of first appearance, and codes remapped.
template <class Get>
DictionaryStrings encode_dictionary(std::size_t count, const Get& get) {
  DictionaryStrings out;
  out.codes.resize(count);
  const std::size_t ranges = count < (1u << 16) ? 1 : std::min<std::size_t>(64, parallel_threads());
  std::vector<LocalDictionary> local(ranges);
  // A range past the limits puts the whole list past them: every range stops.
  std::atomic<bool> past_limits{false};
  parallel_for(ranges, [&](std::size_t r) {
    const std::size_t begin = count * r / ranges, end = count * (r + 1) / ranges;
    // Keys are computed a batch ahead and their slots prefetched, so the
    // table's cache misses overlap instead of following one another.
    constexpr std::size_t kBatch = 16;
    std::string_view views[kBatch];
    Key keys[kBatch];
    for (std::size_t b = begin; b < end; b += kBatch) {
      const std::size_t n = std::min(kBatch, end - b);
      for (std::size_t j = 0; j < n; ++j) {
        views[j] = get(b + j);
        keys[j] = key_of(views[j]);
        local[r].prefetch(keys[j]);
      }
      for (std::size_t j = 0; j < n; ++j) out.codes[b + j] = local[r].code_of(views[j], keys[j]);
      if (!local[r].within_limits()) past_limits = true;
      if (past_limits.load(std::memory_order_relaxed)) return;
    }
  });
  auto beyond = [&] {
    out = DictionaryStrings{};
    out.within_limits = false;
    return std::move(out);
  };
  if (past_limits) return beyond();
  // The first range's dictionary is the start of the global one as it stands.
  LocalDictionary global = std::move(local[0]);
  std::vector<std::vector<std::uint32_t>> remap(ranges);
  for (std::size_t r = 1; r < ranges; ++r) {
    remap[r].reserve(local[r].words.size());
    for (std::string_view w : local[r].words) remap[r].push_back(global.code_of(w));
    if (!global.within_limits()) return beyond();
  }
  // The first range's codes are already global; the others' are remapped in
  // chunks, so every core takes part whatever the number of ranges.
  const std::size_t first_end = count / ranges;
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  parallel_for((count - first_end + kChunk - 1) / kChunk, [&](std::size_t c) {
    const std::size_t begin = first_end + c * kChunk, end = std::min(count, begin + kChunk);
    std::size_t r = 1;  // the range of row `begin`
    while (count * (r + 1) / ranges <= begin) ++r;
    for (std::size_t i = begin; i < end; ++r) {
      const std::size_t stop = std::min(end, count * (r + 1) / ranges);
      for (; i < stop; ++i) out.codes[i] = remap[r][out.codes[i]];
    }
  });
  out.dictionary = std::move(global.words);
  return out;
}

}  // namespace

DictionaryStrings dictionary_encode(std::span<const std::string_view> values) {
  return encode_dictionary(values.size(), [&](std::size_t i) { return values[i]; });
}

DictionaryStrings dictionary_encode(ConstBytes bytes, std::span<const std::int64_t> offsets) {
  const char* base = reinterpret_cast<const char*>(bytes.data());
  const std::size_t count = offsets.empty() ? 0 : offsets.size() - 1;
  return encode_dictionary(count, [&](std::size_t i) {
    return std::string_view(base + offsets[i], static_cast<std::size_t>(offsets[i + 1] - offsets[i]));
  });
}

namespace {

std::uint64_t bytes_of(std::span<const std::string_view> words) {
  std::uint64_t total = 0;
  for (std::string_view v : words) total += v.size();
  return total;
}

bool within_limits(std::size_t words, std::uint64_t bytes) {
  return words <= kMaxDictionaryWords && bytes <= kMaxDictionaryBytes;
}

bool smaller(std::size_t count, std::uint64_t total_bytes, std::size_t words, std::uint64_t word_bytes) {
  if (!within_limits(words, word_bytes)) return false;
  const std::uint64_t merged = 8 * (count + 1) + total_bytes, dictionary = 8 * (words + 1) + word_bytes;
  const std::uint64_t code_width = words <= 256 ? 1 : words <= 65536 ? 2 : 4;
  // The dictionary form has one more file (its codes), so one more header.
  return dictionary + code_width * count + 128 < merged;
}

}  // namespace

bool dictionary_within_limits(const DictionaryStrings& encoded) {
  return encoded.within_limits && within_limits(encoded.dictionary.size(), bytes_of(encoded.dictionary));
}

bool dictionary_is_smaller(std::size_t count, std::uint64_t total_bytes, const DictionaryStrings& encoded) {
  return encoded.within_limits && smaller(count, total_bytes, encoded.dictionary.size(), bytes_of(encoded.dictionary));
}

bool dictionary_is_smaller(std::span<const std::string_view> values, const DictionaryStrings& encoded) {
  std::uint64_t total = 0;
  for (std::string_view v : values) total += v.size();
  return dictionary_is_smaller(values.size(), total, encoded);
}

// ---------------------------------------------------------------------------
// Distinct counts and dictionaries built one string at a time

namespace {

constexpr int kEstimatorBits = 14;

// Spreads the dictionary hash (fast, but not uniform in every bit) so that
// the estimator's index and rank bits are (splitmix64's finalizer).
std::uint64_t mix(std::uint64_t h) {
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  return h ^ (h >> 31);
}

}  // namespace

void DistinctEstimator::add_hash(std::uint64_t hash) {
  if (registers_.empty()) registers_.assign(std::size_t{1} << kEstimatorBits, 0);
  const std::uint64_t h = mix(hash);
  const std::size_t index = h >> (64 - kEstimatorBits);
  const std::uint64_t rest = h << kEstimatorBits;
  const auto rank = static_cast<std::uint8_t>(rest == 0 ? 64 - kEstimatorBits + 1 : std::countl_zero(rest) + 1);
  if (rank > registers_[index]) registers_[index] = rank;
}

void DistinctEstimator::add(std::string_view s) { add_hash(key_of(s).hash); }

std::uint64_t DistinctEstimator::estimate() const {
  // Flajolet et al.'s estimate with linear counting for small cardinalities;
  // 64-bit hashes need no large-range correction. The sum runs in register
  // order, so the result is the same for the same registers.
  if (registers_.empty()) return 0;
  const double m = static_cast<double>(registers_.size());
  double sum = 0;
  std::size_t zeros = 0;
  for (std::uint8_t r : registers_) {
    sum += std::ldexp(1.0, -static_cast<int>(r));
    zeros += r == 0;
  }
  double e = 0.7213 / (1 + 1.079 / m) * m * m / sum;
  if (e <= 2.5 * m && zeros > 0) e = m * std::log(m / static_cast<double>(zeros));
  return static_cast<std::uint64_t>(std::llround(e));
}

struct StreamingDictionary::Impl {
  LocalDictionary dictionary;
  std::vector<std::unique_ptr<char[]>> blocks;  // the words' bytes; views into them stay valid
  std::size_t block_left = 0, last_block = 0;
  char* block_at = nullptr;
  bool overflowed = false;
  DistinctEstimator estimator;  // fed only once the dictionary has overflowed: until then it counts exactly

  std::string_view keep(std::string_view s) {
    if (s.empty()) return {};
    if (s.size() > block_left) {
      // Blocks grow from 4 KiB to 1 MiB: a wide import keeps one dictionary per column.
      const std::size_t grown = std::clamp<std::size_t>(last_block * 2, std::size_t{4} << 10, std::size_t{1} << 20);
      const std::size_t size = std::max(s.size(), grown);
      last_block = grown;
      blocks.push_back(std::make_unique<char[]>(size));
      block_at = blocks.back().get();
      block_left = size;
    }
    std::memcpy(block_at, s.data(), s.size());
    const std::string_view kept(block_at, s.size());
    block_at += s.size();
    block_left -= s.size();
    return kept;
  }
};

StreamingDictionary::StreamingDictionary() : impl_(std::make_unique<Impl>()) {}
StreamingDictionary::~StreamingDictionary() = default;
StreamingDictionary::StreamingDictionary(StreamingDictionary&&) noexcept = default;
StreamingDictionary& StreamingDictionary::operator=(StreamingDictionary&&) noexcept = default;

void StreamingDictionary::add(std::string_view s) {
  ++count_;
  total_bytes_ += s.size();
  const Key key = key_of(s);
  if (impl_->overflowed) return impl_->estimator.add_hash(key.hash);
  impl_->dictionary.code_of(s, key, [&](std::string_view v) { return impl_->keep(v); });
  if (!impl_->dictionary.within_limits()) {
    // Past the limits the dictionary form is never chosen: let it go, and
    // count on in the estimator, which sees each distinct word once as it
    // would have seen it in every repetition.
    for (std::string_view w : impl_->dictionary.words) impl_->estimator.add(w);
    impl_->overflowed = true;
    impl_->dictionary = LocalDictionary();
    impl_->blocks.clear();
    impl_->block_left = 0;
  }
}

bool StreamingDictionary::within_limits() const { return !impl_->overflowed; }

std::span<const std::string_view> StreamingDictionary::words() const { return impl_->dictionary.words; }

std::uint32_t StreamingDictionary::code_of(std::string_view s) const {
  std::size_t at = 0;
  const std::int64_t code = impl_->overflowed ? -1 : impl_->dictionary.find(s, key_of(s), at);
  if (code < 0)
    throw InvalidArgument(impl_->overflowed ? "the dictionary passed its limits and holds no codes"
                                            : "a string the dictionary was not given: the input changed between passes");
  return static_cast<std::uint32_t>(code);
}

std::uint64_t StreamingDictionary::distinct() const {
  return impl_->overflowed ? impl_->estimator.estimate() : impl_->dictionary.words.size();
}

bool StreamingDictionary::dictionary_is_smaller() const {
  return !impl_->overflowed &&
         smaller(count_, total_bytes_, impl_->dictionary.words.size(), impl_->dictionary.word_bytes);
}

}  // namespace amphora
