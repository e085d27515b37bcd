// .npy bytes from anywhere: parse_npy_header, then read_npy, must either
// throw amphora::Error or return a tensor whose bytes can all be read and
// which survives a write/read round trip unchanged.

#include <amphora/error.hpp>
#include <amphora/npy.hpp>

#include <cstdint>
#include <cstring>
#include <string>

namespace {

[[noreturn]] void finding(const char* what) {
  __builtin_fprintf(stderr, "fuzz_npy: %s\n", what);
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  amphora::ConstBytes bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    auto header = amphora::parse_npy_header(bytes, "fuzz input");
    if (header.data_offset > size) finding("data_offset beyond the input");
  } catch (const amphora::Error&) {
  }

  amphora::Tensor t;
  try {
    // No owner: the input lives for this call, and so does every tensor below.
    t = amphora::read_npy(amphora::Buffer::wrap(data, size, nullptr), "fuzz input");
  } catch (const amphora::Error&) {
    return 0;
  }

  // Touch every byte, so a view past the input's end shows up under ASan.
  unsigned sum = 0;
  for (std::size_t i = 0; i < t.nbytes(); ++i) sum += static_cast<unsigned>(t.data()[i]);
  if (t.nbytes() != t.num_elements() * amphora::dtype_size(t.dtype())) finding("nbytes disagrees with the shape");
  if (t.nbytes() > size) finding("tensor larger than its file");

  // What Amphora writes for this tensor reads back as the same tensor.
  std::string again = amphora::make_npy_header(t.dtype(), t.shape());
  again.append(reinterpret_cast<const char*>(t.data()), t.nbytes());
  amphora::Tensor u;
  try {
    u = amphora::read_npy(amphora::Buffer::wrap(again.data(), again.size(), nullptr), "round trip");
  } catch (const amphora::Error& e) {
    __builtin_fprintf(stderr, "round trip: %s\n", e.what());
    finding("a tensor read_npy returned does not read back");
  }
  if (u.shape() != t.shape() || u.nbytes() != t.nbytes() ||
      (t.nbytes() && std::memcmp(u.data(), t.data(), t.nbytes()) != 0))
    finding("round trip changed the tensor");
  // bfloat16 is written as <u2, so only that pair may differ.
  if (u.dtype() != t.dtype() && !(t.dtype() == amphora::DType::bfloat16 && u.dtype() == amphora::DType::uint16))
    finding("round trip changed the dtype");
  [[maybe_unused]] static volatile unsigned keep;  // so the reads above are not optimised away
  keep = sum;
  return 0;
}
