// read_csv on arbitrary bytes (through a scratch file, as the CLI reads it):
// RFC 4180 parsing, UTF-8 checks and type inference. It must either throw an
// amphora::Error or return a table whose columns all have the header's length
// and whose text is UTF-8, and then:
//   - exact round trip: the table written by write_csv reads back, and
//     writing that gives the same text (the first export is already a fixed
//     point: read_csv never makes an empty string, and every value is
//     written in a form that reads back as itself, same type). The one loss
//     CSV has: in a table of one column a null row is a blank line, which
//     reading skips; then the second export is the fixed point;
//   - the streaming import (Store::import_file) refuses the same files and
//     stores what saving the table stores, digest for digest;
//   - bounded memory: each of the two (import, read_csv plus its round trip)
//     holds at its peak at most kConstant + kPerByte x the input's size.
//
// The memory bound. Held whatever the input: the reader's 4 MiB block
// (CsvReader's kBlock; a record longer than a block grows it, which inputs
// of a few KiB never reach), one more for the import's second pass, the
// artifact writer's buffers and the store's copy of what it wrote (the
// scratch store is in memory), and a save's fixed costs. Then each column:
// a CSV header of N commas has N + 1 columns, and each has its column
// writers, files and manifest entries. Measured (clang 16, ASan) on the seeds,
// the corpus of earlier runs and 4 KiB inputs of every shape (a header of
// 4,096 empty columns, 2 x 2,048, 800 named columns, 2,047 rows of one
// column, long quoted fields, floats): the import peaked at 4.0 to 8.5 MiB
// for small inputs and at 26 MiB for the 4,096 empty columns (about 4.4
// KiB per column above the blocks; the peak varies by a few MiB between
// runs with the worker threads' timing and whether the store already holds
// the artifact, which a save then re-hashes); read_csv with its round trip
// at most 9.9 MiB (about 1.4 KiB per column). Bound: 24 MiB + 8 KiB per
// input byte, 56 MiB at 4 KiB. The reader before issue 21 item 8's fix
// reserved about 18 KiB per column up front (60 KB of commas peaked at 1.17
// GB): past 8 KiB per column, a wide header fails here.

#include <amphora/manifest.hpp>
#include <amphora/store.hpp>
#include <amphora/table.hpp>

#include "alloc_bound.hpp"
#include "scratch_store.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <unistd.h>

namespace {

constexpr std::uint64_t kConstant = 24u << 20;
constexpr std::uint64_t kPerByte = 8u << 10;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_csv: %s\n", what);
  __builtin_trap();
}

std::filesystem::path scratch(const char* name) {
  static const std::filesystem::path dir = [] {
    // Under $TMPDIR when set (fuzz/run.sh points it into the build directory).
    std::string tmpl = (std::filesystem::temp_directory_path() / "amphora-fuzz-csv-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    return std::filesystem::path(tmpl);
  }();
  return dir / name;
}

std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// What write_csv makes of `t`, and the table read_csv reads back from it.
std::string exported(const amphora::Table& t, std::optional<amphora::Table>& back, const char* round) {
  const auto out = scratch("out.csv");
  amphora::write_csv(t, out);
  try {
    back = amphora::read_csv(out);
  } catch (const amphora::Error& e) {
    std::fprintf(stderr, "%s: %s\n", round, e.what());
    finding("what write_csv wrote does not read back");
  }
  return slurp(out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = scratch("in.csv");
  std::ofstream(in, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  amphora::Store store = scratch_store();

  std::optional<amphora::Digest> streamed;
  {
    fuzz::PeakAllocation memory;
    try {
      streamed = store.import_file(in).digest;
    } catch (const amphora::Error&) {
    }
    fuzz::require_peak_within("fuzz_csv", "Store::import_file", memory, size, kConstant, kPerByte);
  }

  fuzz::PeakAllocation memory;
  std::optional<amphora::Table> read;
  try {
    read = amphora::read_csv(in);
  } catch (const amphora::Error&) {
  }
  if (read.has_value() != streamed.has_value()) finding("read_csv and the streaming import disagree on accepting the file");
  if (!read) {
    fuzz::require_peak_within("fuzz_csv", "read_csv", memory, size, kConstant, kPerByte);
    return 0;
  }
  const amphora::Table& t = *read;
  for (std::size_t k = 0; k < t.num_columns(); ++k) {
    const auto& c = t.column(k);
    if (c.size() != t.rows()) finding("a column's length differs from the table's");
    if (c.type() == amphora::ColumnType::string)
      for (std::size_t i = 0; i < c.size(); ++i) {
        if (!amphora::is_valid_utf8(c.string(i))) finding("a string that is not UTF-8");
        if (c.string(i).empty() && !c.is_null(i)) finding("an empty field read as an empty string, not a null");
      }
  }

  std::optional<amphora::Table> once, twice;
  const std::string first = exported(t, once, "first export");
  const std::string second = exported(*once, twice, "second export");
  bool blank_rows = t.num_columns() == 1 && t.column(std::size_t{0}).null_count() > 0;
  if (once->names() != t.names()) finding("the column names changed in the round trip");
  if (!blank_rows && first != second) {
    std::fprintf(stderr, "first export:\n%s\nsecond export:\n%s\n", first.c_str(), second.c_str());
    finding("a table read back from write_csv's text writes other text (a value or type changed)");
  }
  if (blank_rows) {
    std::optional<amphora::Table> thrice;
    if (exported(*twice, thrice, "third export") != second) finding("write_csv is not a fixed point after one round");
  }
  fuzz::require_peak_within("fuzz_csv", "read_csv and its round trip", memory, size, kConstant, kPerByte);

  if (store.save(t).digest != *streamed) finding("the streaming import stored another artifact than saving read_csv's table");
  return 0;
}
