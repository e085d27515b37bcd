// read_csv on arbitrary bytes (through a scratch file, as the CLI reads it):
// RFC 4180 parsing, UTF-8 checks and type inference. It must either return a
// table whose columns all have the header's length and whose text is UTF-8,
// or throw an amphora::Error; a table it returns must survive write_csv and
// read back with the same shape.

#include <amphora/manifest.hpp>
#include <amphora/table.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace {

std::filesystem::path scratch(const char* name) {
  static const std::filesystem::path dir = [] {
    char tmpl[] = "/tmp/amphora-fuzz-csv-XXXXXX";
    if (!mkdtemp(tmpl)) std::abort();
    return std::filesystem::path(tmpl);
  }();
  return dir / name;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = scratch("in.csv"), out = scratch("out.csv");
  std::ofstream(in, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    amphora::Table t = amphora::read_csv(in);
    for (std::size_t k = 0; k < t.num_columns(); ++k) {
      const auto& c = t.column(k);
      if (c.size() != t.rows()) std::abort();
      if (c.type() == amphora::ColumnType::string)
        for (std::size_t i = 0; i < c.size(); ++i)
          if (!amphora::is_valid_utf8(c.string(i))) std::abort();
    }
    amphora::write_csv(t, out);
    amphora::Table back = amphora::read_csv(out);
    // Blank lines vanish and all-null rows of one column are blank lines, so
    // only the column names are certain to survive.
    if (back.names() != t.names()) std::abort();
  } catch (const amphora::Error&) {
  }
  return 0;
}
