#include "tensor_stats.hpp"

#include <amphora/parallel.hpp>

#include <cmath>
#include <limits>
#include <vector>

namespace amphora::detail {

namespace {

constexpr std::uint64_t kBlock = 256u << 10;
static_assert(kBlock / 8 < (std::uint64_t{1} << 31), "integer_block sums 64-bit halves of fewer than 2^31 elements");

// An aggregate without default member initializers, each one copied from
// kEmpty: clang 16 emits no constructor of a class that only an internal
// target_clones function (summarise) uses, and the link fails.
struct Partial {
  __int128 imin, imax, isum;
  double fmin, fmax;
  double fsum;
  std::uint64_t nan;
};
constexpr Partial kEmpty{0, 0, 0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), 0, 0};

enum class Kind { none, boolean, integer, floating };

Kind kind_of(DType d) {
  switch (d) {
    case DType::bool_: return Kind::boolean;
    case DType::int8: case DType::int16: case DType::int32: case DType::int64:
    case DType::uint8: case DType::uint16: case DType::uint32: case DType::uint64: return Kind::integer;
    case DType::float16: case DType::bfloat16: case DType::float32: case DType::float64: return Kind::floating;
    case DType::complex64: case DType::complex128: return Kind::none;
  }
  return Kind::none;
}

#define AMPHORA_INLINE inline __attribute__((always_inline))

template <class T>
AMPHORA_INLINE Partial integer_block(const T* v, std::size_t n) {
  using Wide = std::conditional_t<(sizeof(T) < 8), std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>,
                                  std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>>;
  T mn = v[0], mx = v[0];
  Partial p = kEmpty;
  if constexpr (sizeof(T) == 8) {
    // A 128-bit sum keeps the loop from vectorizing: the halves are summed
    // apart in 64 bits instead (exact for fewer than 2^31 elements a block,
    // which kBlock keeps far below) and joined once.
    using Half = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
    std::uint64_t low = 0;
    Half high = 0;
    for (std::size_t i = 0; i < n; ++i) {
      mn = v[i] < mn ? v[i] : mn;
      mx = v[i] > mx ? v[i] : mx;
      low += static_cast<std::uint64_t>(v[i]) & 0xFFFFFFFFu;
      high += static_cast<Half>(v[i]) >> 32;  // arithmetic for signed T
    }
    p.isum = static_cast<__int128>(static_cast<Wide>(high) * (Wide{1} << 32) + static_cast<Wide>(low));
  } else {
    Wide s = 0;
    for (std::size_t i = 0; i < n; ++i) {
      mn = v[i] < mn ? v[i] : mn;
      mx = v[i] > mx ? v[i] : mx;
      s += v[i];
    }
    p.isum = static_cast<__int128>(s);
  }
  p.imin = mn;
  p.imax = mx;
  return p;
}

AMPHORA_INLINE Partial bool_block(const std::uint8_t* v, std::size_t n) {
  std::uint64_t trues = 0;
  for (std::size_t i = 0; i < n; ++i) trues += v[i] != 0;
  Partial p = kEmpty;
  p.imin = trues == n ? 1 : 0;
  p.imax = trues > 0 ? 1 : 0;
  p.isum = trues;
  return p;
}

template <class T>
using Lane = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
Lane<T> to_lane(T v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return v.to_float();
  else
    return v;
}

template <class T>
AMPHORA_INLINE Partial float_block(const T* v, std::size_t n) {
  // Independent lanes the compiler turns into SIMD; short runs are summed in
  // the lane type and folded into doubles, always in the same order.
  constexpr std::size_t kLanes = 16, kRun = 16 * kLanes;
  using L = Lane<T>;
  L mn[kLanes], mx[kLanes];
  double sum[kLanes] = {};
  std::uint32_t nan[kLanes] = {};
  for (std::size_t j = 0; j < kLanes; ++j) mn[j] = std::numeric_limits<L>::infinity(), mx[j] = -mn[j];
  std::size_t i = 0;
  for (; i + kRun <= n; i += kRun) {
    L run[kLanes] = {};
    for (std::size_t g = 0; g < kRun; g += kLanes) {
      for (std::size_t j = 0; j < kLanes; ++j) {
        L x = to_lane(v[i + g + j]);
        bool is_nan = x != x;
        mn[j] = x < mn[j] ? x : mn[j];  // NaN compares false and is skipped
        mx[j] = x > mx[j] ? x : mx[j];
        run[j] += is_nan ? L(0) : x;
        nan[j] += is_nan;
      }
    }
    for (std::size_t j = 0; j < kLanes; ++j) sum[j] += run[j];
  }
  Partial p = kEmpty;
  for (; i < n; ++i) {
    double x = to_lane(v[i]);
    bool is_nan = x != x;
    p.fmin = x < p.fmin ? x : p.fmin;
    p.fmax = x > p.fmax ? x : p.fmax;
    p.fsum += is_nan ? 0.0 : x;
    p.nan += is_nan;
  }
  for (std::size_t j = 0; j < kLanes; ++j) {
    p.fmin = std::min<double>(p.fmin, mn[j]);
    p.fmax = std::max<double>(p.fmax, mx[j]);
    p.fsum += sum[j];
    p.nan += nan[j];
  }
  return p;
}

// The block kernels are inlined here and compiled for wider vectors too; the
// widest the CPU supports is picked at load time.
__attribute__((target_clones("avx512f", "avx2", "default"))) Partial summarise(DType dtype, const std::byte* data, std::size_t n) {
  switch (dtype) {
    case DType::bool_: return bool_block(reinterpret_cast<const std::uint8_t*>(data), n);
    case DType::int8: return integer_block(reinterpret_cast<const std::int8_t*>(data), n);
    case DType::int16: return integer_block(reinterpret_cast<const std::int16_t*>(data), n);
    case DType::int32: return integer_block(reinterpret_cast<const std::int32_t*>(data), n);
    case DType::int64: return integer_block(reinterpret_cast<const std::int64_t*>(data), n);
    case DType::uint8: return integer_block(reinterpret_cast<const std::uint8_t*>(data), n);
    case DType::uint16: return integer_block(reinterpret_cast<const std::uint16_t*>(data), n);
    case DType::uint32: return integer_block(reinterpret_cast<const std::uint32_t*>(data), n);
    case DType::uint64: return integer_block(reinterpret_cast<const std::uint64_t*>(data), n);
    case DType::float16: return float_block(reinterpret_cast<const float16*>(data), n);
    case DType::bfloat16: return float_block(reinterpret_cast<const bfloat16*>(data), n);
    case DType::float32: return float_block(reinterpret_cast<const float*>(data), n);
    case DType::float64: return float_block(reinterpret_cast<const double*>(data), n);
    case DType::complex64:
    case DType::complex128: break;
  }
  return kEmpty;
}

nlohmann::json float_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

nlohmann::json integer_json(__int128 v) {
  if (v < 0) return static_cast<std::int64_t>(v);
  return static_cast<std::uint64_t>(v);
}

}  // namespace

struct TensorStats::Impl {
  Impl(const Tensor& t, std::uint64_t data_offset)
      : tensor(t), kind(t.num_elements() ? kind_of(t.dtype()) : Kind::none), begin(data_offset),
        end(data_offset + t.nbytes()) {}

  const Tensor& tensor;
  Kind kind;
  std::uint64_t begin, end;  // the data, in file offsets
  std::uint64_t first_block = 0;
  std::vector<Partial> blocks;
  std::vector<char> seen;

  // Block b covers file bytes [max(b*kBlock, begin), min((b+1)*kBlock, end)).
  std::uint64_t block_begin(std::size_t b) const { return std::max<std::uint64_t>((first_block + b) * kBlock, begin); }
  std::uint64_t block_end(std::size_t b) const { return std::min<std::uint64_t>((first_block + b + 1) * kBlock, end); }
  std::size_t elements(std::uint64_t bytes) const { return static_cast<std::size_t>(bytes / dtype_size(tensor.dtype())); }
};

TensorStats::TensorStats(const Tensor& tensor, std::uint64_t data_offset)
    : impl_(std::make_unique<Impl>(tensor, data_offset)) {
  auto& s = *impl_;
  if (s.kind == Kind::none) return;
  s.first_block = s.begin / kBlock;
  std::size_t count = static_cast<std::size_t>((s.end - 1) / kBlock - s.first_block + 1);
  s.blocks.assign(count, kEmpty);
  s.seen.assign(count, 0);
}

TensorStats::~TensorStats() = default;

void TensorStats::observe(std::uint64_t file_offset, ConstBytes bytes) {
  auto& s = *impl_;
  if (s.kind == Kind::none) return;
  std::uint64_t lo = std::max(file_offset, s.begin), hi = std::min(file_offset + bytes.size(), s.end);
  if (lo >= hi) return;
  for (std::size_t b = static_cast<std::size_t>(lo / kBlock - s.first_block);
       b < s.blocks.size() && s.block_begin(b) < hi; ++b) {
    std::uint64_t bb = s.block_begin(b), be = s.block_end(b);
    if (bb < lo || be > hi) continue;  // only part of this block is here: summarised in finish()
    s.blocks[b] = summarise(s.tensor.dtype(), bytes.data() + (bb - file_offset), s.elements(be - bb));
    s.seen[b] = 1;
  }
}

nlohmann::json TensorStats::finish() {
  auto& s = *impl_;
  if (s.kind == Kind::none) return nullptr;
  parallel_for(s.blocks.size(), [&](std::size_t b) {
    if (s.seen[b]) return;
    std::uint64_t bb = s.block_begin(b), be = s.block_end(b);
    s.blocks[b] = summarise(s.tensor.dtype(), s.tensor.data() + (bb - s.begin), s.elements(be - bb));
  });
  Partial total = s.blocks.front();
  for (std::size_t b = 1; b < s.blocks.size(); ++b) {  // in file order: the float sum is order-sensitive
    const Partial& p = s.blocks[b];
    total.imin = std::min(total.imin, p.imin);
    total.imax = std::max(total.imax, p.imax);
    total.isum += p.isum;
    total.fmin = std::min(total.fmin, p.fmin);
    total.fmax = std::max(total.fmax, p.fmax);
    total.fsum += p.fsum;
    total.nan += p.nan;
  }
  const double n = static_cast<double>(s.tensor.num_elements());
  if (s.kind != Kind::floating) {
    return {{"min", integer_json(total.imin)}, {"max", integer_json(total.imax)},
            {"mean", static_cast<double>(total.isum) / n}};
  }
  nlohmann::json out = {{"nan_count", total.nan}};
  std::uint64_t counted = s.tensor.num_elements() - total.nan;
  if (counted == 0) return out;
  out["min"] = float_json(total.fmin);
  out["max"] = float_json(total.fmax);
  out["mean"] = float_json(total.fsum / static_cast<double>(counted));
  return out;
}

}  // namespace amphora::detail
