// The multi-buffer SHA-256 kernels (sixteen lanes with AVX-512, two with the
// SHA extensions) and piece hashing, checked against OpenSSL's libcrypto.
// hash_pieces picks a kernel by CPU and piece count, so ordinary saves
// exercise a kernel only where the machine has it; these tests drive each
// kernel directly (skipping, with a warning, on CPUs without it), and size the
// piece-hashing inputs so that the grouped paths are taken.

#include "piece_hash.hpp"
#include "sha256_x16.hpp"
#include "sha256_x2.hpp"

#include <amphora/digest.hpp>
#include <amphora/error.hpp>
#include <amphora/parallel.hpp>

#include <catch2/catch.hpp>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

using amphora::ConstBytes;
using amphora::detail::hash_pieces;
using amphora::detail::PartList;

namespace {

using Digest32 = std::array<std::uint8_t, 32>;

// Each kernel as the tests see it.
struct SixteenLanes {
  static constexpr int kLanes = 16;
  using State = amphora::detail::Sha256x16State;
  static bool available() { return amphora::detail::sha256_x16_available(); }
  static const char* missing() { return "this CPU has no AVX-512F/BW (or AMPHORA_SHA256_X16=0)"; }
  static void compress(State& s, const std::uint8_t* const* data, std::size_t blocks) {
    amphora::detail::sha256_x16_compress(s, data, blocks);
  }
  static std::uint32_t word(const State& s, int lane, int w) { return s.h[w][lane]; }
};
struct TwoLanes {
  static constexpr int kLanes = 2;
  using State = amphora::detail::Sha256x2State;
  static bool available() { return amphora::detail::sha256_x2_available(); }
  static const char* missing() { return "this CPU has no SHA extensions (or AMPHORA_SHA256_X2=0)"; }
  static void compress(State& s, const std::uint8_t* const* data, std::size_t blocks) {
    amphora::detail::sha256_x2_compress(s, data, blocks);
  }
  static std::uint32_t word(const State& s, int lane, int w) { return s.h[lane][w]; }
};

Digest32 libcrypto_sha256(const std::uint8_t* data, std::size_t size) {
  Digest32 out{};
  SHA256(data, size, out.data());
  return out;
}

std::string hex(const Digest32& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (auto b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

template <class Kernel>
Digest32 lane_digest(const typename Kernel::State& state, int lane) {
  Digest32 out{};
  for (int w = 0; w < 8; ++w)
    for (int k = 0; k < 4; ++k) out[4 * w + k] = static_cast<std::uint8_t>(Kernel::word(state, lane, w) >> (24 - 8 * k));
  return out;
}

// FIPS 180-4 §5.1.1: append 0x80, zeros up to 56 mod 64, then the message
// length in bits as a 64-bit big-endian integer.
std::vector<std::uint8_t> fips_padded(const std::vector<std::uint8_t>& message) {
  std::size_t total = (message.size() + 9 + 63) / 64 * 64;
  std::vector<std::uint8_t> out(total, 0);
  std::copy(message.begin(), message.end(), out.begin());
  out[message.size()] = 0x80;
  std::uint64_t bits = static_cast<std::uint64_t>(message.size()) * 8;
  for (int k = 0; k < 8; ++k) out[total - 1 - k] = static_cast<std::uint8_t>(bits >> (8 * k));
  return out;
}

std::vector<std::uint8_t> random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

// Lanes hold padded messages at deliberately misaligned addresses (the kernels
// load unaligned), each in its own allocation so a read past a lane's end
// cannot silently land in the next lane's bytes.
struct Lanes {
  std::vector<std::vector<std::uint8_t>> messages;
  std::vector<std::vector<std::uint8_t>> storage;
  std::vector<const std::uint8_t*> ptr;
  std::size_t blocks = 0;

  void set(int lane, std::vector<std::uint8_t> message, std::size_t misalign) {
    auto padded = fips_padded(message);
    if (blocks == 0) blocks = padded.size() / 64;
    REQUIRE(padded.size() / 64 == blocks);  // one compress call covers all lanes alike
    storage[lane].assign(misalign, 0xEE);
    storage[lane].insert(storage[lane].end(), padded.begin(), padded.end());
    ptr[lane] = storage[lane].data() + misalign;
    messages[lane] = std::move(message);
  }
  explicit Lanes(int lanes) : messages(lanes), storage(lanes), ptr(lanes, nullptr) {}
};

// Every lane's digest is libcrypto's digest of that lane's message.
template <class Kernel>
void check_lanes(const typename Kernel::State& state, const Lanes& lanes, const std::string& context) {
  for (int l = 0; l < Kernel::kLanes; ++l) {
    INFO(context << ", lane " << l << ", message of " << lanes.messages[l].size() << " bytes");
    CHECK(hex(lane_digest<Kernel>(state, l)) ==
          hex(libcrypto_sha256(lanes.messages[l].data(), lanes.messages[l].size())));
  }
}

template <class Kernel>
bool kernel_or_skip() {
  if (Kernel::available()) return true;
  WARN("skipped: " << Kernel::missing() << ", so the " << Kernel::kLanes << "-lane kernel cannot run");
  return false;
}

}  // namespace

TEMPLATE_TEST_CASE("SHA-256 lane kernels: known answer for 'abc' in every lane (may skip)", "[sha256_lanes]",
                   SixteenLanes, TwoLanes) {
  using Kernel = TestType;
  if (!kernel_or_skip<Kernel>()) return;
  auto block = fips_padded({'a', 'b', 'c'});
  REQUIRE(block.size() == 64);
  std::vector<const std::uint8_t*> lanes(Kernel::kLanes, block.data());
  typename Kernel::State state;
  Kernel::compress(state, lanes.data(), 1);
  for (int l = 0; l < Kernel::kLanes; ++l) {
    INFO("lane " << l);
    CHECK(hex(lane_digest<Kernel>(state, l)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  }
}

TEMPLATE_TEST_CASE("SHA-256 lane kernels: different messages match libcrypto (may skip)", "[sha256_lanes]",
                   SixteenLanes, TwoLanes) {
  using Kernel = TestType;
  if (!kernel_or_skip<Kernel>()) return;
  std::mt19937_64 rng(0x5a256);
  // N padded blocks fit messages of 64N-72 .. 64N-9 bytes (0 .. 55 for one
  // block); the lanes spread over that window, so its edges are covered:
  // a message that just fits beside its length field and one that spills.
  for (std::size_t n : {1, 2, 3, 4, 5, 8, 15, 16, 17, 31, 33, 64, 100, 257, 1000, 4096}) {
    std::size_t lo = n == 1 ? 0 : 64 * n - 72, hi = 64 * n - 9;
    Lanes lanes(Kernel::kLanes);
    for (int l = 0; l < Kernel::kLanes; ++l) {
      std::size_t len = l == 0 ? lo : l == Kernel::kLanes - 1 ? hi : lo + rng() % (hi - lo + 1);
      lanes.set(l, random_bytes(rng, len), static_cast<std::size_t>(l * 7 % 64));
    }
    typename Kernel::State state;
    Kernel::compress(state, lanes.ptr.data(), lanes.blocks);
    check_lanes<Kernel>(state, lanes, "blocks " + std::to_string(n));
  }
}

TEMPLATE_TEST_CASE("SHA-256 lane kernels: state carries across calls of any block count (may skip)", "[sha256_lanes]",
                   SixteenLanes, TwoLanes) {
  using Kernel = TestType;
  if (!kernel_or_skip<Kernel>()) return;
  std::mt19937_64 rng(77);
  const std::size_t n = 300;
  Lanes lanes(Kernel::kLanes);
  for (int l = 0; l < Kernel::kLanes; ++l)
    lanes.set(l, random_bytes(rng, 64 * n - 9 - static_cast<std::size_t>(l)), static_cast<std::size_t>(l));
  for (int split = 0; split < 6; ++split) {
    typename Kernel::State state;
    std::vector<const std::uint8_t*> at = lanes.ptr;
    std::size_t done = 0;
    while (done < n) {
      std::size_t step = std::min<std::size_t>(n - done, split == 0 ? 1 : 1 + rng() % (split * 40));
      if (rng() % 5 == 0) Kernel::compress(state, at.data(), 0);  // no blocks: no change
      Kernel::compress(state, at.data(), step);
      for (auto& p : at) p += 64 * step;
      done += step;
    }
    check_lanes<Kernel>(state, lanes, "split pattern " + std::to_string(split));
  }
}

TEMPLATE_TEST_CASE("SHA-256 lane kernels: lanes do not leak into each other (may skip)", "[sha256_lanes]",
                   SixteenLanes, TwoLanes) {
  using Kernel = TestType;
  if (!kernel_or_skip<Kernel>()) return;
  std::mt19937_64 rng(3);
  auto base = random_bytes(rng, 64 * 9 - 20);
  // Every lane differs from the others in one bit, at a different word and
  // block, so a lane or word-order slip changes some lane's digest.
  for (int variant = 0; variant < 4; ++variant) {
    Lanes lanes(Kernel::kLanes);
    for (int l = 0; l < Kernel::kLanes; ++l) {
      auto m = base;
      std::size_t at = (static_cast<std::size_t>(l) * 37 + static_cast<std::size_t>(variant) * 131) % m.size();
      m[at] ^= static_cast<std::uint8_t>(1u << (l % 8));
      lanes.set(l, std::move(m), 0);
    }
    typename Kernel::State state;
    Kernel::compress(state, lanes.ptr.data(), lanes.blocks);
    check_lanes<Kernel>(state, lanes, "variant " + std::to_string(variant));
  }
  typename Kernel::State untouched, fresh;
  std::vector<const std::uint8_t*> none(Kernel::kLanes, nullptr);
  Kernel::compress(untouched, none.data(), 0);
  for (int l = 0; l < Kernel::kLanes; ++l)
    for (int w = 0; w < 8; ++w) CHECK(Kernel::word(untouched, l, w) == Kernel::word(fresh, l, w));
  CHECK(Kernel::word(fresh, 0, 0) == 0x6a09e667u);
  CHECK(Kernel::word(fresh, Kernel::kLanes - 1, 7) == 0x5be0cd19u);
}

namespace {

// A PartList over `size` random bytes, cut where `cut` says, each part a
// separate allocation so a read that runs past a part's end is caught (by
// ASan, or by the wrong digest) instead of reading the next part's bytes.
struct Parts {
  std::vector<std::uint8_t> whole;  // the reference, contiguous
  std::vector<std::unique_ptr<std::uint8_t[]>> storage;
  std::vector<ConstBytes> spans;

  void add(std::size_t from, std::size_t to) {
    auto p = std::make_unique<std::uint8_t[]>(std::max<std::size_t>(1, to - from));
    std::copy(whole.begin() + static_cast<std::ptrdiff_t>(from), whole.begin() + static_cast<std::ptrdiff_t>(to), p.get());
    spans.emplace_back(reinterpret_cast<const std::byte*>(p.get()), to - from);
    storage.push_back(std::move(p));
  }
};

enum class Cut { whole, piece_edges_off_by_one, mid_block, tiny_then_rest, random_small, with_empty_parts };

const char* cut_name(Cut c) {
  switch (c) {
    case Cut::whole: return "one part";
    case Cut::piece_edges_off_by_one: return "cut one byte either side of every piece edge";
    case Cut::mid_block: return "cut at 64k+1 and 64k+63";
    case Cut::tiny_then_rest: return "one-byte parts, then the rest";
    case Cut::random_small: return "random parts of 1..200 bytes";
    case Cut::with_empty_parts: return "empty parts between cuts";
  }
  return "?";
}

Parts make_parts(std::uint64_t size, std::uint64_t piece, Cut cut, std::mt19937_64& rng) {
  Parts p;
  p.whole = random_bytes(rng, static_cast<std::size_t>(size));
  std::vector<std::size_t> cuts;
  switch (cut) {
    case Cut::whole: break;
    case Cut::piece_edges_off_by_one:
      for (std::uint64_t e = piece; e < size; e += piece) cuts.insert(cuts.end(), {std::size_t(e - 1), std::size_t(e + 1)});
      break;
    case Cut::mid_block:
      for (std::uint64_t b = 0; b + 64 < size && cuts.size() < 4000; b += 64 * (1 + rng() % 37))
        cuts.insert(cuts.end(), {std::size_t(b + 1), std::size_t(b + 63)});
      break;
    case Cut::tiny_then_rest:
      for (std::size_t b = 1; b < std::min<std::uint64_t>(size, 300); ++b) cuts.push_back(b);
      break;
    case Cut::random_small:
      for (std::size_t b = 1 + rng() % 200; b < size && cuts.size() < 20000; b += 1 + rng() % 200) cuts.push_back(b);
      break;
    case Cut::with_empty_parts:
      for (std::uint64_t b = 0; b < size; b += 1 + rng() % (piece * 3)) cuts.insert(cuts.end(), {std::size_t(b), std::size_t(b)});
      break;
  }
  cuts.push_back(static_cast<std::size_t>(size));
  std::sort(cuts.begin(), cuts.end());
  std::size_t from = 0;
  for (std::size_t c : cuts) {
    if (c > size) continue;
    p.add(from, c);  // zero-length when cuts repeat: PartList must skip it
    from = c;
  }
  return p;
}

void check_hash_pieces(std::uint64_t size, std::uint64_t piece, Cut cut, std::mt19937_64& rng) {
  INFO("size " << size << ", piece " << piece << ", " << cut_name(cut) << ", " << amphora::parallel_threads()
               << " threads, x16 " << (amphora::detail::sha256_x16_available() ? "on" : "off") << ", x2 "
               << (amphora::detail::sha256_x2_available() ? "on" : "off"));
  Parts parts = make_parts(size, piece, cut, rng);
  PartList list(parts.spans);
  REQUIRE(list.size() == size);

  std::mutex mutex;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> seen;
  bool bytes_ok = true;
  auto sink = [&](std::uint64_t offset, std::span<const ConstBytes> run) {
    for (ConstBytes bytes : run) {
      bool same = offset + bytes.size() <= size &&
                  std::memcmp(bytes.data(), parts.whole.data() + offset, bytes.size()) == 0;
      std::lock_guard lock(mutex);
      seen.emplace_back(offset, bytes.size());
      bytes_ok = bytes_ok && same;
      offset += bytes.size();
    }
  };
  auto got = hash_pieces(list, piece, sink);

  std::size_t count = size == 0 ? 1 : static_cast<std::size_t>((size - 1) / piece + 1);
  REQUIRE(got.size() == count);
  for (std::size_t k = 0; k < count; ++k) {
    std::uint64_t begin = k * piece, end = std::min(size, begin + piece);
    Digest32 want = libcrypto_sha256(parts.whole.data() + begin, static_cast<std::size_t>(end - begin));
    INFO("piece " << k);
    CHECK(got[k].hex() == hex(want));
  }

  // The sink sees every byte exactly once, with the right contents.
  CHECK(bytes_ok);
  std::sort(seen.begin(), seen.end());
  std::uint64_t covered = 0;
  bool contiguous = true;
  for (auto [offset, n] : seen) {
    contiguous = contiguous && offset == covered && n > 0;
    covered = offset + n;
  }
  CHECK(contiguous);
  CHECK(covered == size);

  // Without a sink the digests are the same.
  CHECK(hash_pieces(list, piece, {}) == got);
}

}  // namespace

TEST_CASE("hash_pieces matches libcrypto at awkward sizes, pieces and part boundaries", "[sha256_lanes][pieces]") {
  std::mt19937_64 rng(1234);
  // Groups of sixteen pieces are only used when every thread gets one, so the
  // large sizes hold a few more groups than there are threads.
  const std::uint64_t groups = amphora::parallel_threads() + 1;
  const std::uint64_t budget = 48u << 20;  // bytes per input, to bound run time on many-core machines
  // Multiples of 64 (eligible for sixteen lanes), one just over the kernel's
  // 256 KiB sink slice, and sizes that are not (always one lane at a time).
  for (std::uint64_t piece : {64ull, 192ull, 4096ull, 4160ull, (256ull << 10) + 64, 100ull, 4097ull}) {
    std::uint64_t g = 16 * groups * piece;
    std::vector<std::uint64_t> sizes = {0, 1, piece - 1, piece, piece + 1, 2 * piece + 63};
    if (g + 16 * piece <= budget)
      sizes.insert(sizes.end(), {g - 1, g, g + 1, g + piece / 2, g + 16 * piece - 64, g + 15 * piece});
    for (std::uint64_t size : sizes) {
      for (Cut cut : {Cut::whole, Cut::piece_edges_off_by_one, Cut::mid_block, Cut::tiny_then_rest,
                      Cut::random_small, Cut::with_empty_parts}) {
        // Many tiny parts over megabytes only re-test PartList, slowly.
        if (size > (4u << 20) && (cut == Cut::random_small || cut == Cut::with_empty_parts)) continue;
        check_hash_pieces(size, piece, cut, rng);
      }
    }
  }
}

TEST_CASE("hash_pieces of sixteen identical pieces gives sixteen equal digests", "[sha256_lanes][pieces]") {
  // Lanes reading the same bytes must agree; a lane-index slip would break this
  // even where libcrypto and the kernel agree on single messages.
  const std::uint64_t piece = 4096, pieces = 16 * (amphora::parallel_threads() + 1);
  std::vector<std::uint8_t> one(piece);
  std::mt19937_64 rng(99);
  for (auto& b : one) b = static_cast<std::uint8_t>(rng());
  std::vector<ConstBytes> spans(pieces, ConstBytes(reinterpret_cast<const std::byte*>(one.data()), one.size()));
  PartList list(spans);
  auto got = hash_pieces(list, piece, {});
  REQUIRE(got.size() == pieces);
  auto want = hex(libcrypto_sha256(one.data(), one.size()));
  for (std::size_t k = 0; k < got.size(); ++k) {
    INFO("piece " << k);
    CHECK(got[k].hex() == want);
  }
}

TEST_CASE("Pieces and blocks hashed in one pass match libcrypto", "[sha256_lanes][pieces]") {
  // What push does: a file read in blocks, each checked piece by piece and
  // hashed whole for the part that carries it. Pieces larger and smaller
  // than blocks, files ending mid-block, mid-piece and on an edge, blocks
  // starting at later pieces, with both lanes and with OpenSSL alone.
  std::mt19937_64 rng(7);
  std::vector<std::uint8_t> data(3u << 20);
  for (auto& b : data) b = static_cast<std::uint8_t>(rng());
  struct Case {
    std::uint64_t piece, block, size, start;
  };
  const std::vector<Case> cases = {
      {4096, 16384, 16384 * 5, 0},       {4096, 16384, 16384 * 5 - 1, 0}, {4096, 16384, 16384 * 5 - 64, 0},
      {4096, 16384, 16384 * 4 + 55, 4096}, {65536, 16384, 65536 * 3 + 100, 65536}, {65536, 16384, 65536 * 2, 0},
      {64, 192, 640, 0},                 {64, 64, 65, 0},                 {1u << 20, 8192, 3u << 20, 1u << 20},
      {4096, 4096 * 3, 4096 * 3, 0},     {128, 1024, 1000, 0},            {4096, 16384, 10, 0}};
  for (bool two_lanes : {true, false}) {
    if (two_lanes && !amphora::detail::sha256_x2_available()) {
      WARN("this CPU has no SHA extensions (or AMPHORA_SHA256_X2=0): the two-lane path is not tested here");
      continue;
    }
    for (const Case& c : cases) {
      INFO("piece " << c.piece << " block " << c.block << " size " << c.size << " start " << c.start << " two lanes "
                    << two_lanes);
      amphora::detail::PieceAndBlockHasher hasher(c.piece, c.size, c.start, true, two_lanes);
      std::vector<std::pair<std::uint64_t, std::string>> pieces;
      for (std::uint64_t at = c.start; at < c.size; at += c.block) {
        const std::uint64_t n = std::min(c.block, c.size - at);
        const ConstBytes block(reinterpret_cast<const std::byte*>(data.data() + at), n);
        const auto whole = hasher.update(block, [&](std::uint64_t k, const amphora::Sha256Value& v) { pieces.emplace_back(k, v.hex()); });
        REQUIRE(whole);
        CHECK(whole->hex() == hex(libcrypto_sha256(data.data() + at, n)));
      }
      const std::uint64_t first = c.start / c.piece, count = (c.size - 1) / c.piece + 1 - first;
      REQUIRE(pieces.size() == count);
      for (std::uint64_t k = 0; k < count; ++k) {
        const std::uint64_t begin = (first + k) * c.piece, end = std::min(c.size, begin + c.piece);
        CHECK(pieces[k].first == first + k);
        CHECK(pieces[k].second == hex(libcrypto_sha256(data.data() + begin, end - begin)));
      }
    }
  }
  // Pieces of any size another writer chose (not whole 64-byte blocks, so
  // never two lanes), with and without the blocks hashed whole.
  for (bool whole_blocks : {true, false}) {
    INFO("pieces of 4100 bytes, whole blocks " << whole_blocks);
    const std::uint64_t size = 3 * 4100 + 7, block = 5000;
    amphora::detail::PieceAndBlockHasher hasher(4100, size, 0, whole_blocks);
    std::vector<std::string> pieces;
    for (std::uint64_t at = 0; at < size; at += block) {
      const std::uint64_t n = std::min(block, size - at);
      const auto whole = hasher.update(ConstBytes(reinterpret_cast<const std::byte*>(data.data() + at), n),
                                       [&](std::uint64_t, const amphora::Sha256Value& v) { pieces.push_back(v.hex()); });
      CHECK(whole.has_value() == whole_blocks);
      if (whole) CHECK(whole->hex() == hex(libcrypto_sha256(data.data() + at, n)));
    }
    REQUIRE(pieces.size() == 4);
    for (std::uint64_t k = 0; k < 4; ++k)
      CHECK(pieces[k] == hex(libcrypto_sha256(data.data() + k * 4100, std::min<std::uint64_t>(4100, size - k * 4100))));
  }
  // Blocks that do not fit the file are refused, not hashed.
  amphora::detail::PieceAndBlockHasher hasher(4096, 10000, 0, true);
  const ConstBytes past(reinterpret_cast<const std::byte*>(data.data()), 20000);
  CHECK_THROWS_AS(hasher.update(past, [](std::uint64_t, const amphora::Sha256Value&) {}), amphora::InvalidArgument);
  if (amphora::detail::sha256_x2_available()) {  // two lanes step 64 bytes at a time
    const ConstBytes odd(reinterpret_cast<const std::byte*>(data.data()), 100);
    CHECK_THROWS_AS(hasher.update(odd, [](std::uint64_t, const amphora::Sha256Value&) {}), amphora::InvalidArgument);
  }
  CHECK_THROWS_AS(amphora::detail::PieceAndBlockHasher(0, 1000, 0, true), amphora::InvalidArgument);
  CHECK_THROWS_AS(amphora::detail::PieceAndBlockHasher(4096, 10000, 100, true), amphora::InvalidArgument);
}
