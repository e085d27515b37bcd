#pragma once
// Sixteen SHA-256 computations at once with AVX-512 (one message per 32-bit
// lane). On CPUs with AVX-512 this hashes independent pieces markedly faster
// than one-stream SHA-NI; elsewhere it is unavailable and callers use OpenSSL.

#include <cstddef>
#include <cstdint>

namespace amphora::detail {

/// True when the CPU has AVX-512F/BW and $AMPHORA_SHA256_X16 is not "0".
bool sha256_x16_available();

/// Lane states: state[word][lane], starting from the SHA-256 initial values.
struct Sha256x16State {
  alignas(64) std::uint32_t h[8][16];
  Sha256x16State();
};

/// Compresses `blocks` 64-byte blocks of each lane; lane l reads
/// data[l][0 .. 64*blocks). Requires sha256_x16_available().
void sha256_x16_compress(Sha256x16State& state, const std::uint8_t* const data[16], std::size_t blocks);

}  // namespace amphora::detail
