#pragma once
// Piece-wise SHA-256 of a file assembled from memory parts, on all cores,
// optionally handing each hashed range to a sink (the staging file) while it
// is still in cache. Internal to the framework.

#include <amphora/buffer.hpp>
#include <amphora/digest.hpp>

#include <cstdint>
#include <functional>
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

}  // namespace amphora::detail
