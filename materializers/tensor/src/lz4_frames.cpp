#include "lz4_frames.hpp"

#include <amphora/error.hpp>

#include <lz4.h>

#include <cstring>
#include <string>

namespace amphora::detail {

namespace {
constexpr std::uint32_t kPrime1 = 0x9E3779B1u, kPrime2 = 0x85EBCA77u, kPrime3 = 0xC2B2AE3Du, kPrime4 = 0x27D4EB2Fu,
                        kPrime5 = 0x165667B1u;
constexpr std::uint32_t rotl(std::uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
constexpr std::uint32_t kStoredBlock = 0x80000000u;

void put_le32(std::byte* p, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) p[k] = static_cast<std::byte>(v >> (8 * k));
}
std::uint32_t get_le32(const std::byte* p) {
  std::uint32_t v = 0;
  for (int k = 0; k < 4; ++k) v |= static_cast<std::uint32_t>(p[k]) << (8 * k);
  return v;
}
}  // namespace

std::uint32_t xxh32_short(const std::uint8_t* p, std::size_t size, std::uint32_t seed) {
  std::uint32_t h = seed + kPrime5 + static_cast<std::uint32_t>(size);
  std::size_t i = 0;
  for (; i + 4 <= size; i += 4) {
    std::uint32_t word = p[i] | p[i + 1] << 8 | p[i + 2] << 16 | static_cast<std::uint32_t>(p[i + 3]) << 24;
    h = rotl(h + word * kPrime3, 17) * kPrime4;
  }
  for (; i < size; ++i) h = rotl(h + p[i] * kPrime5, 11) * kPrime1;
  h ^= h >> 15;
  h *= kPrime2;
  h ^= h >> 13;
  h *= kPrime3;
  h ^= h >> 16;
  return h;
}

std::array<std::byte, 15> frame_header(std::uint64_t content_size) {
  std::array<std::uint8_t, 15> h{};
  h[0] = 0x04, h[1] = 0x22, h[2] = 0x4D, h[3] = 0x18;  // magic 0x184D2204
  h[4] = 0x68;  // version 01, independent blocks, content size present, no checksums
  h[5] = 0x60;  // block maximum 1 MiB
  for (int k = 0; k < 8; ++k) h[6 + k] = static_cast<std::uint8_t>(content_size >> (8 * k));
  h[14] = static_cast<std::uint8_t>(xxh32_short(h.data() + 4, 10, 0) >> 8);
  std::array<std::byte, 15> out;
  std::memcpy(out.data(), h.data(), 15);
  return out;
}

bool encode_frame(ConstBytes raw, bool compress, std::vector<std::byte>& out) {
  const int n = static_cast<int>(raw.size());
  out.resize(kFrameOverhead + static_cast<std::size_t>(LZ4_compressBound(n)));
  auto header = frame_header(raw.size());
  std::memcpy(out.data(), header.data(), header.size());
  int packed = 0;
  if (compress)
    packed = LZ4_compress_default(reinterpret_cast<const char*>(raw.data()), reinterpret_cast<char*>(out.data() + 19),
                                  n, LZ4_compressBound(n));
  bool compressed = packed > 0 && packed < n;
  if (compressed) {
    put_le32(out.data() + 15, static_cast<std::uint32_t>(packed));
  } else {
    packed = n;
    put_le32(out.data() + 15, kStoredBlock | static_cast<std::uint32_t>(n));
    std::memcpy(out.data() + 19, raw.data(), raw.size());
  }
  put_le32(out.data() + 19 + packed, 0);  // end mark
  out.resize(kFrameOverhead + static_cast<std::size_t>(packed));
  return compressed;
}

std::size_t lz4_block_size(ConstBytes raw) {
  const int n = static_cast<int>(raw.size());
  thread_local std::vector<char> scratch;
  scratch.resize(static_cast<std::size_t>(LZ4_compressBound(n)));
  int packed = LZ4_compress_default(reinterpret_cast<const char*>(raw.data()), scratch.data(), n, n);
  return packed > 0 ? static_cast<std::size_t>(packed) : raw.size();
}

bool lz4_worth_trying(ConstBytes raw, double min_saving) {
  constexpr std::size_t kSample = 16u << 10, kSamples = 4;
  if (raw.size() < 16 * kSample) return true;
  std::size_t packed = 0;
  for (std::size_t k = 0; k < kSamples; ++k)
    packed += lz4_block_size(raw.subspan(k * (raw.size() - kSample) / (kSamples - 1), kSample));
  return static_cast<double>(packed) < (1.0 - min_saving) * static_cast<double>(kSamples * kSample);
}

void decode_frame(ConstBytes frame, MutableBytes dst, std::string_view where) {
  auto bad = [&](const std::string& why) { throw CorruptData(std::string(where) + ": " + why); };
  if (dst.empty() || dst.size() > kMaxFrameContent) bad("chunk of " + std::to_string(dst.size()) + " bytes");
  if (frame.size() < kFrameOverhead) bad("LZ4 frame of " + std::to_string(frame.size()) + " bytes is truncated");
  auto header = frame_header(dst.size());
  if (std::memcmp(frame.data(), header.data(), header.size()) != 0)
    bad("LZ4 frame header is damaged or does not announce " + std::to_string(dst.size()) + " bytes");
  std::uint32_t word = get_le32(frame.data() + 15);
  std::uint32_t size = word & ~kStoredBlock;
  if (frame.size() != kFrameOverhead + size)
    bad("LZ4 block claims " + std::to_string(size) + " bytes but its frame holds " +
        std::to_string(frame.size() - kFrameOverhead));
  if (get_le32(frame.data() + 19 + size) != 0) bad("LZ4 frame has no end mark");
  const std::byte* block = frame.data() + 19;
  if (word & kStoredBlock) {
    if (size != dst.size()) bad("stored LZ4 block holds " + std::to_string(size) + " bytes, expected " + std::to_string(dst.size()));
    std::memcpy(dst.data(), block, size);
    return;
  }
  if (size == 0) bad("empty LZ4 block");
  int got = LZ4_decompress_safe(reinterpret_cast<const char*>(block), reinterpret_cast<char*>(dst.data()),
                                static_cast<int>(size), static_cast<int>(dst.size()));
  if (got != static_cast<int>(dst.size()))
    bad(got < 0 ? "LZ4 block is corrupt" : "LZ4 block decodes to " + std::to_string(got) + " bytes, expected " +
                                               std::to_string(dst.size()));
}

}  // namespace amphora::detail
