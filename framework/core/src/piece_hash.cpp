#include "piece_hash.hpp"

#include "sha256_x16.hpp"
#include "sha256_x2.hpp"

#include <amphora/error.hpp>
#include <amphora/parallel.hpp>

#include <algorithm>
#include <array>
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

namespace {

// The final block(s) of a message: its last `tail` bytes (fewer than 64),
// 0x80, zeros and the length in bits. Returns how many blocks (1 or 2).
std::size_t padding(const std::byte* tail, std::size_t n, std::uint64_t length, std::uint8_t out[128]) {
  std::memset(out, 0, 128);
  if (n) std::memcpy(out, tail, n);
  out[n] = 0x80;
  const std::size_t blocks = n + 1 + 8 <= 64 ? 1 : 2;
  const std::uint64_t bits = length * 8;
  for (int k = 0; k < 8; ++k) out[blocks * 64 - 1 - k] = static_cast<std::uint8_t>(bits >> (8 * k));
  return blocks;
}

Sha256Value value_of(const std::uint32_t h[8]) {
  Sha256Value v;
  for (int w = 0; w < 8; ++w)
    for (int k = 0; k < 4; ++k) v.bytes[4 * w + k] = static_cast<std::uint8_t>(h[w] >> (24 - 8 * k));
  return v;
}

}  // namespace

PieceAndBlockHasher::PieceAndBlockHasher(std::uint64_t piece_size, std::uint64_t file_size, std::uint64_t offset,
                                         bool whole_blocks, bool two_lanes)
    : piece_size_(piece_size),
      file_size_(file_size),
      offset_(offset),
      whole_blocks_(whole_blocks),
      // A second lane pays only for a second hash; lanes step 64 bytes at a time.
      two_lanes_(whole_blocks && two_lanes && piece_size % 64 == 0 && sha256_x2_available()) {
  if (piece_size == 0 || offset % piece_size != 0 || offset > file_size)
    throw InvalidArgument("piece hashing: pieces of " + std::to_string(piece_size) + " bytes from offset " +
                          std::to_string(offset) + " of a file of " + std::to_string(file_size));
  std::memcpy(lane_state_, Sha256x2State().h[0], sizeof lane_state_);
}

PieceAndBlockHasher::~PieceAndBlockHasher() = default;

std::vector<PieceAndBlockHasher::Segment> PieceAndBlockHasher::segments(std::uint64_t size) {
  if (size > file_size_ - offset_ || (two_lanes_ && size % 64 != 0 && offset_ + size != file_size_))
    throw InvalidArgument("piece hashing: a block of " + std::to_string(size) + " bytes at offset " +
                          std::to_string(offset_) + " of a file of " + std::to_string(file_size_));
  std::vector<Segment> out;
  std::uint64_t done = piece_done_bytes_;
  for (std::uint64_t at = 0; at < size;) {
    const std::uint64_t n = std::min(size - at, piece_size_ - done);
    const bool completes = done + n == piece_size_ || offset_ + at + n == file_size_;
    out.push_back({at, n, completes, (offset_ + at) / piece_size_, done + n});
    done = completes ? 0 : done + n;
    at += n;
  }
  return out;
}

std::optional<Sha256Value> PieceAndBlockHasher::update(ConstBytes block, const PieceDone& piece_done) {
  const std::vector<Segment> parts = segments(block.size());
  std::optional<Sha256Value> whole;
  if (two_lanes_) {
    whole = update_two_lanes(block, parts, piece_done);
  } else {
    for (const Segment& s : parts) {
      piece_hash_.update(block.data() + s.at, static_cast<std::size_t>(s.size));
      if (s.completes) piece_done(s.piece, piece_hash_.finish());
    }
    if (whole_blocks_) whole = Sha256::of(block.data(), block.size());
  }
  piece_done_bytes_ = parts.empty() || parts.back().completes ? 0 : parts.back().piece_length;
  offset_ += block.size();
  return whole;
}

// Lane 0 walks the pieces (restarting at each piece's end), lane 1 the
// block; each lane is a list of runs of 64-byte blocks, its padding among
// them, compressed two lanes at a time.
Sha256Value PieceAndBlockHasher::update_two_lanes(ConstBytes block, const std::vector<Segment>& parts,
                                                  const PieceDone& piece_done) {
  struct Run {
    const std::uint8_t* data;
    std::uint64_t blocks;
    bool finishes = false;
    std::uint64_t piece = 0;
  };
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(block.data());
  std::vector<std::array<std::uint8_t, 128>> pads(parts.size() + 1);
  std::vector<Run> lanes[2];
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const Segment& s = parts[k];
    const std::uint64_t full = s.size / 64;
    if (full) lanes[0].push_back({bytes + s.at, full});
    if (s.completes) {
      const std::size_t n = static_cast<std::size_t>(s.size % 64);
      const std::size_t blocks = padding(block.data() + s.at + full * 64, n, s.piece_length, pads[k].data());
      lanes[0].push_back({pads[k].data(), blocks, true, s.piece});
    }
  }
  if (block.size() >= 64) lanes[1].push_back({bytes, block.size() / 64});
  const std::size_t tail = block.size() % 64;
  lanes[1].push_back({pads.back().data(), padding(block.data() + block.size() - tail, tail, block.size(), pads.back().data()), true});

  Sha256x2State state;
  const Sha256x2State fresh;
  std::memcpy(state.h[0], lane_state_, sizeof lane_state_);
  std::size_t run[2] = {0, 0};
  std::uint64_t used[2] = {0, 0};  // blocks of the current run compressed
  std::uint32_t kept[8];           // lane 0's state once its runs are done
  std::memcpy(kept, lane_state_, sizeof kept);
  Sha256Value whole;
  while (run[0] < lanes[0].size() || run[1] < lanes[1].size()) {
    const bool live[2] = {run[0] < lanes[0].size(), run[1] < lanes[1].size()};
    std::uint64_t n = ~std::uint64_t{0};
    for (int l = 0; l < 2; ++l)
      if (live[l]) n = std::min(n, lanes[l][run[l]].blocks - used[l]);
    const std::uint8_t* data[2];
    for (int l = 0; l < 2; ++l)
      if (live[l]) data[l] = lanes[l][run[l]].data + used[l] * 64;
    // A lane with nothing left reads its partner's bytes; its result is unused.
    if (!live[0]) data[0] = data[1];
    if (!live[1]) data[1] = data[0];
    sha256_x2_compress(state, data, static_cast<std::size_t>(n));
    if (!live[0]) std::memcpy(state.h[0], kept, sizeof kept);
    for (int l = 0; l < 2; ++l) {
      if (!live[l] || (used[l] += n) < lanes[l][run[l]].blocks) continue;
      const Run& done = lanes[l][run[l]];
      ++run[l];
      used[l] = 0;
      if (done.finishes && l == 0) {
        piece_done(done.piece, value_of(state.h[0]));
        std::memcpy(state.h[0], fresh.h[0], sizeof state.h[0]);
      } else if (done.finishes) {
        whole = value_of(state.h[1]);
      }
      if (l == 0 && run[0] == lanes[0].size()) std::memcpy(kept, state.h[0], sizeof kept);
    }
  }
  std::memcpy(lane_state_, kept, sizeof lane_state_);
  return whole;
}

}  // namespace amphora::detail
