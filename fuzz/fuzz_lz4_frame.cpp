// LZ4 frames from a payload file: decode_frame must either throw CorruptData
// or fill exactly the expected bytes. The input is also used as chunk
// content, which must survive encode_frame/decode_frame unchanged.

#include "lz4_frames.hpp"

#include <amphora/error.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

[[noreturn]] void finding(const char* what) {
  __builtin_fprintf(stderr, "fuzz_lz4_frame: %s\n", what);
  __builtin_trap();
}

// The content size a reader expects comes from the chunk index, not the frame;
// take it from where a frame announces it so that well-formed frames are
// reachable, else from the input length.
std::size_t expected_size(const std::uint8_t* data, std::size_t size) {
  if (size >= 14) {
    std::uint64_t announced = 0;
    for (int k = 0; k < 8; ++k) announced |= static_cast<std::uint64_t>(data[6 + k]) << (8 * k);
    if (announced >= 1 && announced <= amphora::detail::kMaxFrameContent) return static_cast<std::size_t>(announced);
  }
  return size % 65536 + 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  amphora::ConstBytes frame(reinterpret_cast<const std::byte*>(data), size);
  std::vector<std::byte> out(expected_size(data, size));
  try {
    amphora::detail::decode_frame(frame, out, "fuzz input");
  } catch (const amphora::CorruptData&) {
  }

  if (size == 0 || size > amphora::detail::kMaxFrameContent) return 0;
  for (bool compress : {false, true}) {
    std::vector<std::byte> encoded;
    bool compressed = amphora::detail::encode_frame(frame, compress, encoded);
    if (compressed && !compress) finding("compressed although asked not to");
    if (encoded.size() > size + amphora::detail::kFrameOverhead) finding("frame larger than a stored block");
    std::vector<std::byte> back(size);
    try {
      amphora::detail::decode_frame(encoded, back, "round trip");
    } catch (const amphora::CorruptData& e) {
      __builtin_fprintf(stderr, "%s\n", e.what());
      finding("a frame encode_frame made does not decode");
    }
    if (std::memcmp(back.data(), data, size) != 0) finding("round trip changed the content");
  }
  return 0;
}
