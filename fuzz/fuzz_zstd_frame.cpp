// zstd chunk frames from a payload file: decode_zstd_frame must either throw
// CorruptData or fill exactly the expected bytes, never allocating for more
// than the chunk (ASan's allocator reports what it does). The input is also
// used as chunk content, which must survive encode/decode unchanged.

#include "zstd_frames.hpp"

#include <amphora/error.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

[[noreturn]] void finding(const char* what) {
  __builtin_fprintf(stderr, "fuzz_zstd_frame: %s\n", what);
  __builtin_trap();
}

// The content size a reader expects comes from the chunk index, not the
// frame: the input's first two bytes choose it, so that frames announcing the
// right size and frames lying about it are both reached.
std::size_t expected_size(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 1;
  return (static_cast<std::size_t>(data[0]) << 8 | data[1]) % 70000 + 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::size_t skip = size < 2 ? size : 2;
  amphora::ConstBytes frame(reinterpret_cast<const std::byte*>(data + skip), size - skip);
  std::vector<std::byte> out(expected_size(data, size));
  try {
    amphora::detail::decode_zstd_frame(frame, out, "fuzz input");
  } catch (const amphora::CorruptData&) {
  }

  if (frame.empty() || frame.size() > amphora::detail::kMaxFrameContent) return 0;
  std::vector<std::byte> encoded;
  amphora::detail::encode_zstd_frame(frame, 1 + static_cast<int>(size % 3), encoded);
  std::vector<std::byte> back(frame.size());
  try {
    amphora::detail::decode_zstd_frame(encoded, back, "round trip");
  } catch (const amphora::CorruptData& e) {
    __builtin_fprintf(stderr, "%s\n", e.what());
    finding("a frame encode_zstd_frame made does not decode");
  }
  if (std::memcmp(back.data(), frame.data(), frame.size()) != 0) finding("round trip changed the content");
  return 0;
}
