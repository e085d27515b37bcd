#include "sha256_x16.hpp"
#include "sha256_constants.hpp"

#include <cstdlib>
#include <cstring>
#include <immintrin.h>

namespace amphora::detail {

namespace {

#define AMPHORA_X16 __attribute__((target("avx512f,avx512bw")))

// Turns 16 rows (one 64-byte block per lane) into 16 columns (word j of every lane).
AMPHORA_X16 inline void transpose(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    __m512i ab_lo = _mm512_shuffle_i32x4(r[i], r[4 + i], 0x88), ab_hi = _mm512_shuffle_i32x4(r[i], r[4 + i], 0xDD);
    __m512i cd_lo = _mm512_shuffle_i32x4(r[8 + i], r[12 + i], 0x88), cd_hi = _mm512_shuffle_i32x4(r[8 + i], r[12 + i], 0xDD);
    t[i] = _mm512_shuffle_i32x4(ab_lo, cd_lo, 0x88);
    t[8 + i] = _mm512_shuffle_i32x4(ab_lo, cd_lo, 0xDD);
    t[4 + i] = _mm512_shuffle_i32x4(ab_hi, cd_hi, 0x88);
    t[12 + i] = _mm512_shuffle_i32x4(ab_hi, cd_hi, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

AMPHORA_X16 inline void round(__m512i& a, __m512i& b, __m512i& c, __m512i& d, __m512i& e, __m512i& f, __m512i& g,
                              __m512i& h, std::uint32_t k, __m512i w) {
  __m512i s1 = _mm512_ternarylogic_epi32(_mm512_ror_epi32(e, 6), _mm512_ror_epi32(e, 11), _mm512_ror_epi32(e, 25), 0x96);
  __m512i ch = _mm512_ternarylogic_epi32(e, f, g, 0xCA);
  __m512i t1 = _mm512_add_epi32(_mm512_add_epi32(h, s1), _mm512_add_epi32(_mm512_add_epi32(ch, _mm512_set1_epi32(static_cast<int>(k))), w));
  __m512i s0 = _mm512_ternarylogic_epi32(_mm512_ror_epi32(a, 2), _mm512_ror_epi32(a, 13), _mm512_ror_epi32(a, 22), 0x96);
  __m512i maj = _mm512_ternarylogic_epi32(a, b, c, 0xE8);
  h = g;
  g = f;
  f = e;
  e = _mm512_add_epi32(d, t1);
  d = c;
  c = b;
  b = a;
  a = _mm512_add_epi32(t1, _mm512_add_epi32(s0, maj));
}

AMPHORA_X16 void compress(Sha256x16State& state, const std::uint8_t* const data[16], std::size_t blocks) {
  __m512i s[8];
  for (int i = 0; i < 8; ++i) s[i] = _mm512_load_si512(state.h[i]);
  const __m512i big_endian = _mm512_set4_epi32(0x0c0d0e0f, 0x08090a0b, 0x04050607, 0x00010203);
  for (std::size_t block = 0; block < blocks; ++block) {
    __m512i w[16];
    for (int lane = 0; lane < 16; ++lane) w[lane] = _mm512_loadu_si512(data[lane] + block * 64);
    transpose(w);
    for (auto& word : w) word = _mm512_shuffle_epi8(word, big_endian);
    __m512i a = s[0], b = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) round(a, b, c, d, e, f, g, h, kSha256Round[t], w[t]);
#pragma GCC unroll 48
    for (int t = 16; t < 64; ++t) {
      __m512i w15 = w[(t - 15) & 15], w2 = w[(t - 2) & 15];
      __m512i s0 = _mm512_ternarylogic_epi32(_mm512_ror_epi32(w15, 7), _mm512_ror_epi32(w15, 18), _mm512_srli_epi32(w15, 3), 0x96);
      __m512i s1 = _mm512_ternarylogic_epi32(_mm512_ror_epi32(w2, 17), _mm512_ror_epi32(w2, 19), _mm512_srli_epi32(w2, 10), 0x96);
      w[t & 15] = _mm512_add_epi32(_mm512_add_epi32(w[t & 15], s0), _mm512_add_epi32(w[(t - 7) & 15], s1));
      round(a, b, c, d, e, f, g, h, kSha256Round[t], w[t & 15]);
    }
    s[0] = _mm512_add_epi32(s[0], a);
    s[1] = _mm512_add_epi32(s[1], b);
    s[2] = _mm512_add_epi32(s[2], c);
    s[3] = _mm512_add_epi32(s[3], d);
    s[4] = _mm512_add_epi32(s[4], e);
    s[5] = _mm512_add_epi32(s[5], f);
    s[6] = _mm512_add_epi32(s[6], g);
    s[7] = _mm512_add_epi32(s[7], h);
  }
  for (int i = 0; i < 8; ++i) _mm512_store_si512(state.h[i], s[i]);
}

}  // namespace

Sha256x16State::Sha256x16State() {
  for (int i = 0; i < 8; ++i)
    for (int lane = 0; lane < 16; ++lane) h[i][lane] = kSha256Initial[i];
}

bool sha256_x16_available() {
  static const bool available = [] {
    const char* env = std::getenv("AMPHORA_SHA256_X16");
    if (env && std::strcmp(env, "0") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  return available;
}

void sha256_x16_compress(Sha256x16State& state, const std::uint8_t* const data[16], std::size_t blocks) {
  compress(state, data, blocks);
}

}  // namespace amphora::detail
