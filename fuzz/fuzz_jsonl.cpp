// RecordCollection::read_jsonl on arbitrary bytes (through a scratch file, as
// the CLI reads it): line splitting, simdjson parsing, schema inference and
// column building. It must either throw an amphora::Error or return records
// that are exactly the input's lines:
//   - one record per non-blank line (a line holding only spaces, tabs or a
//     CR is blank; a byte order mark before the first line is skipped), and
//     record i's JSON text (record_json) parsed by nlohmann equals line i
//     parsed by nlohmann: same types (an integer stays an integer of the
//     same value, a float the same double, bit for bit but for NaN, which
//     JSON has not), same strings, same keys in the same order;
//   - the collection survives write_jsonl/read_jsonl and from_json unchanged;
//   - the streaming import (Store::import_file) refuses the same files and
//     stores what saving the collection stores;
//   - bounded memory, for the import and for read_jsonl with the checks
//     above each: at most kConstant + kPerByte x the input's size.
//
// The memory bound. Held whatever the input: the line reader's 8 MiB block
// (each_line's kBlock; a longer line grows it), the import's 4 MiB chunks,
// the artifact writer's buffers and the in-memory store's copy of what it
// wrote. Then each distinct field or list ("place": nested ones count, 2
// bytes of "[]" make one) has its column builders and files. Measured (clang
// 16, ASan) on the seeds, the corpus of earlier runs and 4 KiB inputs (500
// keys in one record, 400 records of a key each, 255 nested lists, 200
// nested objects, 2,000 one-number lines, mixed records): import and
// read_jsonl with its checks peaked at 8.0 to 8.5 MiB for small inputs and
// at 12.5 MiB for the 400 keys (about 1 KiB per input byte above the
// block). Bound: 24 MiB + 8 KiB per input byte, 56 MiB at 4 KiB, the same as
// the CSV target's (the README gives JSON lines the CSV's bound, a place
// counting as a column). Before issue 21 item 8's fix, 200 KB of JSON lines
// with 20,000 keys peaked at 5.9 GB (30 KB per input byte).

#include <amphora/error.hpp>
#include <amphora/json.hpp>
#include <amphora/record_collection.hpp>
#include <amphora/store.hpp>

#include "alloc_bound.hpp"
#include "same_json.hpp"
#include "scratch_store.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>

namespace {

constexpr std::uint64_t kConstant = 24u << 20;
constexpr std::uint64_t kPerByte = 8u << 10;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_jsonl: %s\n", what);
  __builtin_trap();
}

std::filesystem::path scratch(const char* name) {
  static const std::filesystem::path dir = [] {
    // Under $TMPDIR when set (fuzz/run.sh points it into the build directory).
    std::string tmpl = (std::filesystem::temp_directory_path() / "amphora-fuzz-jsonl-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    return std::filesystem::path(tmpl);
  }();
  return dir / name;
}

// The lines read_jsonl reads records from, as it splits them.
std::vector<std::string_view> record_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0, number = 1; start <= text.size(); ++number) {
    std::size_t nl = text.find('\n', start);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) lines.push_back(line);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = scratch("in.jsonl"), out = scratch("out.jsonl");
  std::ofstream(in, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  amphora::Store store = scratch_store();

  std::optional<amphora::Digest> streamed;
  {
    fuzz::PeakAllocation memory;
    try {
      streamed = store.import_file(in).digest;
    } catch (const amphora::Error&) {
    }
    fuzz::require_peak_within("fuzz_jsonl", "Store::import_file", memory, size, kConstant, kPerByte);
  }

  fuzz::PeakAllocation memory;
  amphora::RecordCollection records;
  try {
    records = amphora::RecordCollection::read_jsonl(in);
  } catch (const amphora::Error&) {
    if (streamed) finding("the streaming import accepted a file read_jsonl refuses");
    fuzz::require_peak_within("fuzz_jsonl", "read_jsonl", memory, size, kConstant, kPerByte);
    return 0;
  }
  if (!streamed) finding("the streaming import refused a file read_jsonl accepts");

  const auto lines = record_lines(std::string_view(reinterpret_cast<const char*>(data), size));
  if (lines.size() != records.size()) finding("not one record per non-blank line");
  std::vector<nlohmann::ordered_json> values;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string text = records.record_json(i);
    const auto value = nlohmann::ordered_json::parse(text, nullptr, false);
    if (value.is_discarded()) finding("record_json is not JSON text");
    if (value.dump() != text) finding("record_json is not compact JSON text");
    const auto input = nlohmann::ordered_json::parse(lines[i], nullptr, false);
    if (input.is_discarded()) {
      std::fprintf(stderr, "line: %.*s\n", static_cast<int>(lines[i].size()), lines[i].data());
      finding("read_jsonl accepted a line that is not JSON to nlohmann");
    }
    if (!fuzz::same_json(value, input)) {
      std::fprintf(stderr, "line:   %.*s\nrecord: %s\n", static_cast<int>(lines[i].size()), lines[i].data(), text.c_str());
      finding("a record differs from its line (a value, a type or the key order changed)");
    }
    values.push_back(value);
  }
  records.write_jsonl(out);
  try {
    if (!amphora::RecordCollection::read_jsonl(out).equals(records)) finding("write_jsonl does not read back the same");
  } catch (const amphora::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    finding("what write_jsonl wrote does not read back");
  }
  if (!amphora::RecordCollection::from_json(values).equals(records)) finding("from_json of the records differs");
  fuzz::require_peak_within("fuzz_jsonl", "read_jsonl and its round trips", memory, size, kConstant, kPerByte);

  if (store.save(records).digest != *streamed) finding("the streaming import stored another artifact than saving read_jsonl's records");
  return 0;
}
