#include "sha256_x2.hpp"
#include "sha256_constants.hpp"

#include <cpuid.h>
#include <cstdlib>
#include <cstring>
#include <immintrin.h>

namespace amphora::detail {

namespace {

#define AMPHORA_SHA_NI __attribute__((target("sha,sse4.1,ssse3")))

constexpr int kLanes = 2;

// The SHA instructions keep the eight working words as two vectors, ABEF and
// CDGH; these convert from and to the usual A..H order.
AMPHORA_SHA_NI inline void to_rounds_order(const std::uint32_t h[8], __m128i& abef, __m128i& cdgh) {
  __m128i cdab = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)), 0xB1);
  __m128i hgfe = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 4)), 0x1B);
  abef = _mm_alignr_epi8(cdab, hgfe, 8);
  cdgh = _mm_blend_epi16(hgfe, cdab, 0xF0);
}

AMPHORA_SHA_NI inline void from_rounds_order(__m128i abef, __m128i cdgh, std::uint32_t h[8]) {
  __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h + 4), _mm_alignr_epi8(dchg, feba, 8));
}

// Sixteen groups of four rounds per block. Group g uses message words
// 4g..4g+3: loaded (big-endian) for g < 4, otherwise expanded from the four
// previous groups' words, kept in a ring of four vectors per lane. The lanes
// are independent; unrolled, the compiler interleaves their instructions.
AMPHORA_SHA_NI void compress(Sha256x2State& state, const std::uint8_t* const data[kLanes], std::size_t blocks) {
  const __m128i big_endian = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
  __m128i abef[kLanes], cdgh[kLanes];
  for (int l = 0; l < kLanes; ++l) to_rounds_order(state.h[l], abef[l], cdgh[l]);
  for (std::size_t block = 0; block < blocks; ++block) {
    __m128i w[kLanes][4], abef_in[kLanes], cdgh_in[kLanes];
    for (int l = 0; l < kLanes; ++l) abef_in[l] = abef[l], cdgh_in[l] = cdgh[l];
#pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) {
      const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(kSha256Round + 4 * g));
#pragma GCC unroll 2
      for (int l = 0; l < kLanes; ++l) {
        __m128i& words = w[l][g & 3];  // holds group g-4's words until replaced
        if (g < 4) {
          words = _mm_shuffle_epi8(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(data[l] + block * 64 + 16 * g)), big_endian);
        } else {
          __m128i t = _mm_sha256msg1_epu32(words, w[l][(g - 3) & 3]);
          t = _mm_add_epi32(t, _mm_alignr_epi8(w[l][(g - 1) & 3], w[l][(g - 2) & 3], 4));
          words = _mm_sha256msg2_epu32(t, w[l][(g - 1) & 3]);
        }
        __m128i m = _mm_add_epi32(words, k);
        cdgh[l] = _mm_sha256rnds2_epu32(cdgh[l], abef[l], m);
        abef[l] = _mm_sha256rnds2_epu32(abef[l], cdgh[l], _mm_shuffle_epi32(m, 0x0E));
      }
    }
    for (int l = 0; l < kLanes; ++l) {
      abef[l] = _mm_add_epi32(abef[l], abef_in[l]);
      cdgh[l] = _mm_add_epi32(cdgh[l], cdgh_in[l]);
    }
  }
  for (int l = 0; l < kLanes; ++l) from_rounds_order(abef[l], cdgh[l], state.h[l]);
}

bool cpu_has_sha_extensions() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool ssse3 = ecx & bit_SSSE3, sse41 = ecx & bit_SSE4_1;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return ssse3 && sse41 && (ebx & bit_SHA);
}

}  // namespace

Sha256x2State::Sha256x2State() {
  for (auto& lane : h) std::memcpy(lane, kSha256Initial, sizeof kSha256Initial);
}

bool sha256_x2_available() {
  static const bool available = [] {
    const char* env = std::getenv("AMPHORA_SHA256_X2");
    if (env && std::strcmp(env, "0") == 0) return false;
    return cpu_has_sha_extensions();
  }();
  return available;
}

void sha256_x2_compress(Sha256x2State& state, const std::uint8_t* const data[kLanes], std::size_t blocks) {
  compress(state, data, blocks);
}

}  // namespace amphora::detail
