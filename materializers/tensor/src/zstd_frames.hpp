#pragma once
// One zstd frame per chunk (the standard frame format, so `zstd -d` restores
// a payload of concatenated frames), encoded and decoded with strict
// validation: what a reader accepts is exactly what encode_zstd_frame makes,
// and decoding never allocates beyond the chunk the caller expects.
// Internal to the materializers.

#include <amphora/buffer.hpp>
#include <amphora/tensor.hpp>  // the levels a save accepts

#include "lz4_frames.hpp"  // kMaxFrameContent: the chunk bound both codecs share

#include <cstdint>
#include <string_view>
#include <vector>

namespace amphora::detail {

/// The fewest bytes a frame encode_zstd_frame makes can take: a 6-byte
/// header, one 3-byte block header, a byte of block and the 4-byte checksum.
/// A chunk index's claims are bounded by it: N frames in F bytes hold at most
/// (F / kMinZstdFrame) chunks.
inline constexpr std::size_t kMinZstdFrame = 14;

/// The most bytes encode_zstd_frame can make of `content` bytes.
std::size_t zstd_frame_bound(std::size_t content);

/// Replaces `out` with one zstd frame holding `raw` (1 byte to 1 MiB): the
/// content size and a checksum recorded, no dictionary, at `level`. With
/// `planes` > 1, raw is that many byte planes of equal size (a shuffled
/// chunk) and each ends a zstd block. Throws InvalidArgument for a level
/// outside kMinZstdLevel..kMaxZstdLevel or planes that do not divide raw.
void encode_zstd_frame(ConstBytes raw, int level, std::vector<std::byte>& out, std::size_t planes = 1);

/// Decodes one frame made by encode_zstd_frame into `dst`, whose size must
/// be the frame's content size (1 byte to 1 MiB). Throws CorruptData
/// prefixed with `where` for anything else: not exactly one whole frame, a
/// content size absent or other than dst's, a dictionary, a window larger
/// than the chunk needs, damaged blocks or a checksum that does not match.
void decode_zstd_frame(ConstBytes frame, MutableBytes dst, std::string_view where);

}  // namespace amphora::detail
