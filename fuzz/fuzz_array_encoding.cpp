// decode_array on an untrusted recipe and stored bytes: the input is the
// recipe's JSON text, a NUL byte, then the stored bytes. Decoding must either
// return exactly count x itemsize(dtype) bytes or throw an amphora::Error,
// never crash or read outside the stored bytes.

#include <amphora/array_encoding.hpp>
#include <amphora/error.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* nul = static_cast<const std::uint8_t*>(std::memchr(data, 0, size));
  if (!nul) return 0;
  nlohmann::json recipe = nlohmann::json::parse(data, nul, nullptr, false);
  if (recipe.is_discarded()) return 0;
  const amphora::ConstBytes stored(reinterpret_cast<const std::byte*>(nul + 1), size - static_cast<std::size_t>(nul + 1 - data));
  try {
    auto bytes = amphora::decode_array(recipe, stored, "fuzz");
    const auto dtype = amphora::dtype_from_name(recipe["dtype"].get<std::string>());
    if (bytes.size() != recipe["count"].get<std::uint64_t>() * amphora::dtype_size(dtype)) std::abort();
  } catch (const amphora::Error&) {
  }
  return 0;
}
