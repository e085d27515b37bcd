// read_csv on arbitrary bytes (through a scratch file, as the CLI reads it):
// RFC 4180 parsing, UTF-8 checks and type inference. It must either return a
// table whose columns all have the header's length and whose text is UTF-8,
// or throw an amphora::Error; a table it returns must survive write_csv and
// read back with the same shape. The streaming import (Store::import_file)
// must agree: refuse the same files, and store what saving the table stores.

#include <amphora/manifest.hpp>
#include <amphora/store.hpp>
#include <amphora/table.hpp>

#include "scratch_store.hpp"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
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
  std::optional<amphora::Digest> streamed;
  try {
    streamed = scratch_store().import_file(in).digest;
  } catch (const amphora::Error&) {
  }
  std::optional<amphora::Table> read;
  try {
    read = amphora::read_csv(in);
  } catch (const amphora::Error&) {
  }
  if (read.has_value() != streamed.has_value()) std::abort();
  if (!read) return 0;
  const amphora::Table& t = *read;
  if (scratch_store().save(t).digest != *streamed) std::abort();
  for (std::size_t k = 0; k < t.num_columns(); ++k) {
    const auto& c = t.column(k);
    if (c.size() != t.rows()) std::abort();
    if (c.type() == amphora::ColumnType::string)
      for (std::size_t i = 0; i < c.size(); ++i)
        if (!amphora::is_valid_utf8(c.string(i))) std::abort();
  }
  try {
    amphora::write_csv(t, out);
    amphora::Table back = amphora::read_csv(out);
    // Blank lines vanish and all-null rows of one column are blank lines, so
    // only the column names are certain to survive.
    if (back.names() != t.names()) std::abort();
  } catch (const amphora::Error&) {
  }
  return 0;
}
