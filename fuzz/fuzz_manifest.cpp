// manifest.json bytes from a store: Manifest::parse must either throw
// CorruptData/Unsupported or return a manifest whose canonical form parses
// back to the same canonical form.

#include <amphora/error.hpp>
#include <amphora/manifest.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void finding(const char* what) {
  __builtin_fprintf(stderr, "fuzz_manifest: %s\n", what);
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  amphora::Manifest m;
  try {
    m = amphora::Manifest::parse(bytes, "fuzz input");
  } catch (const amphora::CorruptData&) {
    return 0;
  } catch (const amphora::Unsupported&) {
    return 0;
  }

  for (const auto& f : m.files)
    if (f.pieces.size() != amphora::piece_count(f.size, f.piece_size)) finding("piece count not checked");

  std::string canonical = m.canonical();
  (void)m.digest();
  amphora::Manifest again;
  try {
    again = amphora::Manifest::parse(canonical, "canonical form");
  } catch (const amphora::Error& e) {
    __builtin_fprintf(stderr, "canonical form rejected: %s\n%s\n", e.what(), canonical.c_str());
    finding("the canonical form of an accepted manifest does not parse");
  }
  if (again.canonical() != canonical) finding("canonical form is not stable");
  if (again.payload_bytes() != m.payload_bytes()) finding("payload size changed");
  return 0;
}
