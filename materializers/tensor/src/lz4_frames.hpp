#pragma once
// One-block LZ4 frames (the standard frame format, so `lz4 -d` reads them),
// encoded and decoded with strict validation. Internal to the materializers.

#include <amphora/buffer.hpp>

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace amphora::detail {

/// Largest content one frame holds: the LZ4 frame's 1 MiB block maximum.
inline constexpr std::size_t kMaxFrameContent = 1u << 20;
/// Frame header (15) + block size word (4) + end mark (4).
inline constexpr std::size_t kFrameOverhead = 23;

/// XXH32 of an input shorter than 16 bytes (all a frame descriptor needs).
std::uint32_t xxh32_short(const std::uint8_t* data, std::size_t size, std::uint32_t seed);

/// The 15-byte header of a frame with independent blocks, 1 MiB block
/// maximum, no checksums, and the content size recorded.
std::array<std::byte, 15> frame_header(std::uint64_t content_size);

/// Replaces `out` with one frame holding `raw` (1 to kMaxFrameContent bytes):
/// an LZ4 block when `compress` and it shrinks, a stored block otherwise.
/// Returns whether the block is compressed.
bool encode_frame(ConstBytes raw, bool compress, std::vector<std::byte>& out);

/// Bytes `raw` takes as an LZ4 block, or raw.size() when it does not shrink:
/// a cheap probe of compressibility, writing nothing the caller sees.
std::size_t lz4_block_size(ConstBytes raw);

/// Whether compressing `raw` with LZ4 is worth its time: false when four
/// evenly spaced 16 KiB samples of it shrink by less than `min_saving`
/// (a fraction) together. Chunks under 256 KiB are always tried. The
/// samples run from the chunk's first bytes to its last, so each byte plane
/// of a shuffled chunk of 4-byte elements is sampled once.
bool lz4_worth_trying(ConstBytes raw, double min_saving);

/// Decodes a frame made by encode_frame into `dst`, whose size must be the
/// frame's content size. Throws CorruptData prefixed with `where`.
void decode_frame(ConstBytes frame, MutableBytes dst, std::string_view where);

}  // namespace amphora::detail
