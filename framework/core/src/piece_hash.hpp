#pragma once
// Piece-wise SHA-256 of a file assembled from memory parts, on all cores,
// optionally handing each hashed range to a sink (the staging file) while it
// is still in cache. Internal to the framework.

#include <amphora/buffer.hpp>
#include <amphora/digest.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace amphora::detail {

/// A read-only byte sequence made of consecutive memory parts.
class PartList {
 public:
  explicit PartList(std::span<const ConstBytes> parts);
  std::uint64_t size() const { return starts_.back(); }
  /// Calls fn(offset, bytes) for consecutive segments covering [begin, end).
  void for_each(std::uint64_t begin, std::uint64_t end,
                const std::function<void(std::uint64_t, ConstBytes)>& fn) const;
  /// Bytes available contiguously at `offset` (0 at the end).
  ConstBytes contiguous_at(std::uint64_t offset) const;
  /// Appends the contiguous runs that make up [begin, end) to `out`.
  void runs(std::uint64_t begin, std::uint64_t end, std::vector<ConstBytes>& out) const;
  /// Copies [offset, offset + size) into dst.
  void copy(std::uint64_t offset, std::size_t size, std::byte* dst) const;

 private:
  std::vector<ConstBytes> parts_;
  std::vector<std::uint64_t> starts_;
};

/// Receives each hashed byte range exactly once, from any thread, as the run
/// of consecutive parts that covers it from `offset` on (at most one slice of
/// one piece), so a receiver can write many small parts in one call.
using SegmentSink = std::function<void(std::uint64_t offset, std::span<const ConstBytes> run)>;

/// SHA-256 of each `piece_size`-byte piece of `data` (one piece for empty
/// data), computed on all cores; with AVX-512, sixteen pieces at a time, and
/// with the SHA extensions, two.
std::vector<Sha256Value> hash_pieces(const PartList& data, std::uint64_t piece_size, const SegmentSink& sink);

/// Checks a file's consecutive blocks piece by piece (each piece's SHA-256
/// handed over as it completes; a piece may span blocks) and, when asked,
/// hashes each block whole (what an object store signs a part with). With
/// the SHA extensions and pieces of whole 64-byte blocks, the two run as the
/// lanes of one kernel, in about the time of one; elsewhere OpenSSL hashes
/// twice. Not thread-safe: one per sequence of blocks.
class PieceAndBlockHasher {
 public:
  /// A file of `file_size` bytes whose blocks start at `offset`, a piece
  /// boundary. `whole_blocks`: also hash each block whole. `two_lanes`
  /// false forces the OpenSSL path (for tests). Throws InvalidArgument for
  /// a piece size of 0 or an offset off a piece's edge or past the end.
  PieceAndBlockHasher(std::uint64_t piece_size, std::uint64_t file_size, std::uint64_t offset, bool whole_blocks,
                      bool two_lanes = true);
  ~PieceAndBlockHasher();
  using PieceDone = std::function<void(std::uint64_t piece, const Sha256Value& value)>;
  /// Hashes the next `block`, calling `piece_done` for each piece it
  /// completes, in order; returns the block's SHA-256 when whole blocks
  /// are hashed. Throws InvalidArgument for a block past the file's end, or
  /// (on the two-lane path) one that is not whole 64-byte blocks before it.
  std::optional<Sha256Value> update(ConstBytes block, const PieceDone& piece_done);

 private:
  struct Segment {
    std::uint64_t at, size;  // within the block
    bool completes;          // ends its piece
    std::uint64_t piece, piece_length;
  };
  std::vector<Segment> segments(std::uint64_t size);
  Sha256Value update_two_lanes(ConstBytes block, const std::vector<Segment>& parts, const PieceDone& piece_done);

  std::uint64_t piece_size_, file_size_, offset_;
  std::uint64_t piece_done_bytes_ = 0;  // of the current piece, before the next block
  bool whole_blocks_, two_lanes_;
  std::uint32_t lane_state_[8];  // the current piece's state between blocks (two lanes)
  Sha256 piece_hash_;             // the same, on the OpenSSL path
};

}  // namespace amphora::detail
