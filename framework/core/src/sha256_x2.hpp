#pragma once
// Two SHA-256 computations interleaved with the SHA extensions (SHA-NI). One
// stream leaves the SHA units idle between dependent rounds; a second,
// independent stream fills those gaps, so two pieces hash in about the time
// of one. Elsewhere it is unavailable and callers use OpenSSL.

#include <cstddef>
#include <cstdint>

namespace amphora::detail {

/// True when the CPU has the SHA extensions and $AMPHORA_SHA256_X2 is not "0".
bool sha256_x2_available();

/// Lane states: h[lane][word], starting from the SHA-256 initial values.
struct Sha256x2State {
  std::uint32_t h[2][8];
  Sha256x2State();
};

/// Compresses `blocks` 64-byte blocks of each lane; lane l reads
/// data[l][0 .. 64*blocks). Requires sha256_x2_available().
void sha256_x2_compress(Sha256x2State& state, const std::uint8_t* const data[2], std::size_t blocks);

}  // namespace amphora::detail
