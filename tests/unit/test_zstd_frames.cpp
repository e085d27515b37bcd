// zstd chunk frames (zstd_frames.hpp): round trips of every size a chunk can
// have, the standard tool reading what we write, and each way a hostile
// frame can lie refused as CorruptData before it costs more than its chunk.

#include "support.hpp"
#include "zstd_frames.hpp"

#include <amphora/error.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

using namespace amphora;
using amphora::detail::decode_zstd_frame;
using amphora::detail::encode_zstd_frame;

namespace {

std::vector<std::byte> sample(std::size_t size, std::uint64_t seed, int kind) {
  std::vector<std::byte> v(size);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < size; ++i) {
    std::uint64_t x = kind == 0 ? rng() : kind == 1 ? i / 64 : (i % 4096) * 7 + (rng() & 3);
    v[i] = static_cast<std::byte>(x);
  }
  return v;
}

std::vector<std::byte> frame_of(const std::vector<std::byte>& raw, int level = kDefaultZstdLevel) {
  std::vector<std::byte> out;
  encode_zstd_frame(raw, level, out);
  return out;
}

}  // namespace

TEST_CASE("zstd frames: every chunk size and kind of content round-trips", "[zstd]") {
  for (std::size_t size : {std::size_t{1}, std::size_t{2}, std::size_t{255}, std::size_t{256}, std::size_t{65535},
                           std::size_t{65536}, std::size_t{1000003}, detail::kMaxFrameContent})
    for (int kind : {0, 1, 2})
      for (int level : {1, 3, 19}) {
        if (level == 19 && size > 65536) continue;  // slow, and no other path
        const auto raw = sample(size, size * 3 + static_cast<std::uint64_t>(kind), kind);
        const auto frame = frame_of(raw, level);
        CHECK(frame.size() >= detail::kMinZstdFrame);
        std::vector<std::byte> back(size);
        decode_zstd_frame(frame, back, "chunk");
        CHECK(back == raw);
        if (kind == 1 && size > 4096) CHECK(frame.size() < size / 8);  // runs shrink
      }
}

TEST_CASE("zstd frames of byte planes: one frame, a block per plane, smaller for shuffled floats", "[zstd]") {
  // Shuffled float32 at float16's precision, as the weights of the bench:
  // plane 0 of the chunk is all zero, 2 is noise, 1 and 3 take a few bits.
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (std::size_t size : {std::size_t{64} << 10, std::size_t{256} << 10, std::size_t{1} << 20}) {
    std::vector<float> values(size / 4);
    for (float& v : values) {
      v = normal(rng);
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      bits &= 0xffffe000u;  // 10 mantissa bits
      std::memcpy(&v, &bits, 4);
    }
    std::vector<std::byte> planes(size);
    const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
    for (std::size_t i = 0; i < values.size(); ++i)
      for (std::size_t b = 0; b < 4; ++b) planes[b * values.size() + i] = bytes[4 * i + b];
    std::size_t at_level_1 = 0;
    for (int level : {1, 3}) {
      INFO(size << " bytes at level " << level);
      std::vector<std::byte> whole, by_plane;
      encode_zstd_frame(planes, level, whole);
      encode_zstd_frame(planes, level, by_plane, 4);
      std::vector<std::byte> back(size);
      decode_zstd_frame(by_plane, back, "chunk");
      CHECK(back == planes);
      // Never larger; at 256 KiB a block of 128 KiB spans two planes and
      // the frame made of whole blocks is larger by 8% or more at level 1,
      // by 3% or more at level 3.
      CHECK(by_plane.size() <= whole.size() + 16);
      if (size == (std::size_t{256} << 10)) CHECK(by_plane.size() * 100 < whole.size() * (level == 1 ? 93 : 97));
      // Level 1 takes only long matches in planes (docs/FORMAT.md §5.7):
      // smaller than level 3, whose matches are mostly chance repeats.
      if (level == 1) at_level_1 = by_plane.size();
      else CHECK(at_level_1 < by_plane.size());
    }
  }
  // Incompressible planes of every width down to a byte each: a block
  // header per plane on top of the raw bytes, whatever the room it takes.
  for (std::size_t planes : {std::size_t{2}, std::size_t{4}, std::size_t{8}, std::size_t{16}})
    for (std::size_t size : {planes, 3 * planes, 4096 - 4096 % planes, std::size_t{256} << 10}) {
      INFO(planes << " planes of " << size / planes << " bytes");
      const auto raw = sample(size, size + planes, 0);
      std::vector<std::byte> frame, back(size);
      encode_zstd_frame(raw, 1, frame, planes);
      decode_zstd_frame(frame, back, "chunk");
      CHECK(back == raw);
    }
  std::vector<std::byte> out;
  for (std::size_t planes : {std::size_t{0}, std::size_t{3}})
    CHECK_THROWS_MATCHES(encode_zstd_frame(sample(4096, 2, 0), 1, out, planes), InvalidArgument,
                         Catch::Matchers::Message("a zstd chunk of 4096 bytes is not " + std::to_string(planes) +
                                                  " planes of equal size"));
}

TEST_CASE("zstd frames: levels and sizes outside the codec's are refused when saving", "[zstd]") {
  std::vector<std::byte> out;
  const auto raw = sample(100, 1, 0);
  CHECK_THROWS_AS(encode_zstd_frame(raw, 0, out), InvalidArgument);
  CHECK_THROWS_WITH(encode_zstd_frame(raw, 20, out), Catch::Contains("zstd level 20 is outside 1..19"));
  CHECK_THROWS_AS(encode_zstd_frame({}, 1, out), InvalidArgument);
  CHECK_THROWS_AS(encode_zstd_frame(sample(detail::kMaxFrameContent + 1, 1, 1), 1, out), InvalidArgument);
}

TEST_CASE("zstd frames: the zstd tool restores concatenated frames", "[zstd]") {
  test::TempDir dir;
  const auto a = sample(detail::kMaxFrameContent, 5, 2), b = sample(12345, 6, 0);
  {
    std::ofstream out(dir / "chunks.zst", std::ios::binary);
    for (const auto* raw : {&a, &b}) {
      const auto f = frame_of(*raw);
      out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
    }
  }
  const std::string command = "zstd -q -d -f -o '" + (dir / "chunks").string() + "' '" + (dir / "chunks.zst").string() + "'";
  REQUIRE(std::system(command.c_str()) == 0);
  const std::string restored = test::read_text(dir / "chunks");
  REQUIRE(restored.size() == a.size() + b.size());
  CHECK(std::memcmp(restored.data(), a.data(), a.size()) == 0);
  CHECK(std::memcmp(restored.data() + a.size(), b.data(), b.size()) == 0);
}

TEST_CASE("zstd frames: hostile frames are refused with what is wrong", "[zstd]") {
  const auto raw = sample(70000, 9, 2);
  const auto frame = frame_of(raw);
  std::vector<std::byte> dst(raw.size());
  auto refused = [&](const std::vector<std::byte>& f, std::size_t expect, const std::string& why) {
    std::vector<std::byte> out(expect);
    try {
      decode_zstd_frame(f, out, "tensor.npy.zst chunk 3");
      FAIL("accepted a frame that should fail with: " << why);
    } catch (const CorruptData& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("tensor.npy.zst chunk 3: ") && Catch::Contains(why));
    }
  };
  // A frame that claims more (or less) than the chunk index says its chunk holds.
  refused(frame, raw.size() - 1, "announces 70000 bytes, expected 69999");
  refused(frame, raw.size() + 1, "announces 70000 bytes, expected 70001");
  // A decompression bomb: 1 MiB of zeros announced where the index says 100 bytes.
  refused(frame_of(std::vector<std::byte>(detail::kMaxFrameContent)), 100, "announces 1048576 bytes, expected 100");
  // More than a chunk can hold is refused before any decoding.
  refused(frame, detail::kMaxFrameContent + 1, "chunk of 1048577 bytes");
  // Truncated anywhere.
  for (std::size_t keep : {std::size_t{0}, std::size_t{5}, std::size_t{13}, std::size_t{20}, frame.size() / 2, frame.size() - 1})
    refused(std::vector<std::byte>(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(keep)), raw.size(),
            keep < detail::kMinZstdFrame ? "truncated" : "zstd frame");
  // Trailing bytes, or a second frame, after the first.
  auto two = frame;
  two.insert(two.end(), frame.begin(), frame.end());
  refused(two, raw.size(), "ends after");
  // A flipped bit in the compressed blocks: the checksum (or the block structure) catches it.
  auto flipped = frame;
  flipped[flipped.size() / 2] ^= std::byte{0x10};
  refused(flipped, raw.size(), "corrupt");
  // A frame that needs a dictionary: the same frame with dictionary id 7 in its header.
  const auto descriptor = std::to_integer<unsigned>(frame[4]);
  REQUIRE((descriptor & 3u) == 0);
  auto with_dict = frame;
  with_dict[4] = static_cast<std::byte>(descriptor | 1u);
  const std::size_t dict_at = 5 + ((descriptor & 0x20u) ? 0 : 1);
  with_dict.insert(with_dict.begin() + static_cast<std::ptrdiff_t>(dict_at), std::byte{7});
  refused(with_dict, raw.size(), "needs dictionary 7");
  // No content size, or no checksum: not a frame this codec writes.
  auto no_checksum = frame;
  no_checksum[4] = static_cast<std::byte>(descriptor & ~4u);
  no_checksum.resize(no_checksum.size() - 4);
  refused(no_checksum, raw.size(), "has no checksum");
  // Not zstd at all.
  refused(std::vector<std::byte>(64, std::byte{0x41}), raw.size(), "not a zstd frame");
  // And the genuine one still decodes into the right buffer.
  decode_zstd_frame(frame, dst, "chunk");
  CHECK(dst == raw);
}
