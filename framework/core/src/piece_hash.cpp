#include "piece_hash.hpp"

#include "sha256_x16.hpp"
#include "sha256_x2.hpp"

#include <amphora/parallel.hpp>

#include <algorithm>
#include <cstring>

namespace amphora::detail {

PartList::PartList(std::span<const ConstBytes> parts) : starts_{0} {
  for (const auto& p : parts) {
    if (p.empty()) continue;
    parts_.push_back(p);
    starts_.push_back(starts_.back() + p.size());
  }
}

ConstBytes PartList::contiguous_at(std::uint64_t offset) const {
  if (offset >= size()) return {};
  auto k = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin()) - 1;
  return parts_[k].subspan(static_cast<std::size_t>(offset - starts_[k]));
}

void PartList::for_each(std::uint64_t begin, std::uint64_t end,
                        const std::function<void(std::uint64_t, ConstBytes)>& fn) const {
  while (begin < end) {
    ConstBytes run = contiguous_at(begin);
    auto n = static_cast<std::size_t>(std::min<std::uint64_t>(run.size(), end - begin));
    fn(begin, run.first(n));
    begin += n;
  }
}

void PartList::runs(std::uint64_t begin, std::uint64_t end, std::vector<ConstBytes>& out) const {
  for_each(begin, end, [&](std::uint64_t, ConstBytes b) { out.push_back(b); });
}

void PartList::copy(std::uint64_t offset, std::size_t size, std::byte* dst) const {
  for_each(offset, offset + size, [&](std::uint64_t at, ConstBytes b) { std::memcpy(dst + (at - offset), b.data(), b.size()); });
}

namespace {

constexpr std::uint64_t kSlice = 256u << 10;  // per lane between hand-offs to the sink

// The multi-buffer kernels, as hash_group sees them.
struct SixteenLanes {
  static constexpr std::size_t kLanes = 16;
  using State = Sha256x16State;
  static void compress(State& s, const std::uint8_t* const* data, std::size_t blocks) { sha256_x16_compress(s, data, blocks); }
  static std::uint32_t word(const State& s, std::size_t lane, int w) { return s.h[w][lane]; }
};
struct TwoLanes {
  static constexpr std::size_t kLanes = 2;
  using State = Sha256x2State;
  static void compress(State& s, const std::uint8_t* const* data, std::size_t blocks) { sha256_x2_compress(s, data, blocks); }
  static std::uint32_t word(const State& s, std::size_t lane, int w) { return s.h[lane][w]; }
};

// Hands [begin, end) to the sink as one run of parts.
void feed(const PartList& data, std::uint64_t begin, std::uint64_t end, const SegmentSink& sink,
          std::vector<ConstBytes>& run) {
  if (!sink || begin >= end) return;
  run.clear();
  data.runs(begin, end, run);
  sink(begin, run);
}

Sha256Value hash_one(const PartList& data, std::uint64_t begin, std::uint64_t end, const SegmentSink& sink) {
  Sha256 hash;
  std::vector<ConstBytes> run;
  // Slice by slice, so the sink gets each range while it is still in cache.
  for (std::uint64_t slice = begin; slice < end; slice += kSlice) {
    run.clear();
    data.runs(slice, std::min(end, slice + kSlice), run);
    for (ConstBytes b : run) hash.update(b);
    if (sink) sink(slice, run);
  }
  return hash.finish();
}

// Hashes Kernel::kLanes whole pieces starting at piece `first` in lockstep.
template <class Kernel>
void hash_group(const PartList& data, std::uint64_t first, std::uint64_t piece, const SegmentSink& sink,
                Sha256Value* out) {
  constexpr std::size_t kLanes = Kernel::kLanes;
  typename Kernel::State state;
  alignas(64) std::uint8_t scratch[kLanes][64];
  const std::uint8_t* lanes[kLanes];
  std::vector<ConstBytes> run;
  for (std::uint64_t slice = 0; slice < piece; slice += kSlice) {
    std::uint64_t slice_end = std::min(piece, slice + kSlice);
    for (std::uint64_t at = slice; at < slice_end;) {
      std::uint64_t blocks = (slice_end - at) / 64;
      for (std::size_t l = 0; l < kLanes; ++l) {
        std::uint64_t offset = (first + l) * piece + at;
        ConstBytes run = data.contiguous_at(offset);
        if (run.size() >= 64) {
          lanes[l] = reinterpret_cast<const std::uint8_t*>(run.data());
          blocks = std::min<std::uint64_t>(blocks, run.size() / 64);
        } else {  // a block straddling two parts
          data.copy(offset, 64, reinterpret_cast<std::byte*>(scratch[l]));
          lanes[l] = scratch[l];
          blocks = 1;
        }
      }
      Kernel::compress(state, lanes, static_cast<std::size_t>(blocks));
      at += blocks * 64;
    }
    for (std::size_t l = 0; l < kLanes; ++l) feed(data, (first + l) * piece + slice, (first + l) * piece + slice_end, sink, run);
  }
  // Every lane has the same length, so one padding block serves all.
  alignas(64) std::uint8_t pad[64] = {0x80};
  std::uint64_t bits = piece * 8;
  for (int k = 0; k < 8; ++k) pad[63 - k] = static_cast<std::uint8_t>(bits >> (8 * k));
  for (auto& lane : lanes) lane = pad;
  Kernel::compress(state, lanes, 1);
  for (std::size_t l = 0; l < kLanes; ++l)
    for (int w = 0; w < 8; ++w)
      for (int k = 0; k < 4; ++k) out[l].bytes[4 * w + k] = static_cast<std::uint8_t>(Kernel::word(state, l, w) >> (24 - 8 * k));
}

}  // namespace

std::vector<Sha256Value> hash_pieces(const PartList& data, std::uint64_t piece, const SegmentSink& sink) {
  const std::uint64_t total = data.size();
  const std::size_t count = static_cast<std::size_t>(total == 0 ? 1 : (total - 1) / piece + 1);
  std::vector<Sha256Value> out(count);
  const std::size_t full = static_cast<std::size_t>(total / piece);
  // Sixteen-lane groups pay off only when every thread gets whole groups; a
  // pair costs one SHA-NI stream's time, so pairs always pay.
  std::size_t lanes = 1;
  if (piece % 64 == 0) {
    if (sha256_x16_available() && full / SixteenLanes::kLanes >= parallel_threads()) lanes = SixteenLanes::kLanes;
    else if (sha256_x2_available() && full >= TwoLanes::kLanes) lanes = TwoLanes::kLanes;
  }
  const std::size_t groups = lanes > 1 ? full / lanes : 0;
  const std::size_t singles = count - groups * lanes;
  parallel_for(groups + singles, [&](std::size_t task) {
    if (task < groups) {
      if (lanes == SixteenLanes::kLanes)
        hash_group<SixteenLanes>(data, task * lanes, piece, sink, &out[task * lanes]);
      else
        hash_group<TwoLanes>(data, task * lanes, piece, sink, &out[task * lanes]);
      return;
    }
    std::size_t k = groups * lanes + (task - groups);
    std::uint64_t begin = k * piece;
    out[k] = hash_one(data, begin, std::min(total, begin + piece), sink);
  });
  return out;
}

}  // namespace amphora::detail
