// RecordCollection::read_jsonl on arbitrary bytes (through a scratch file, as
// the CLI reads it): line splitting, simdjson parsing, schema inference and
// column building. It must either throw an amphora::Error or return records
// whose every text is JSON that reads back to the same collection, through
// write_jsonl and through from_json. The streaming import (Store::import_file)
// must agree: refuse the same files, and store what saving the collection
// stores.

#include <amphora/record_collection.hpp>
#include <amphora/store.hpp>

#include "scratch_store.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>

namespace {

std::filesystem::path scratch(const char* name) {
  static const std::filesystem::path dir = [] {
    char tmpl[] = "/tmp/amphora-fuzz-jsonl-XXXXXX";
    if (!mkdtemp(tmpl)) std::abort();
    return std::filesystem::path(tmpl);
  }();
  return dir / name;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = scratch("in.jsonl"), out = scratch("out.jsonl");
  std::ofstream(in, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  std::optional<amphora::Digest> streamed;
  try {
    streamed = scratch_store().import_file(in).digest;
  } catch (const amphora::Error&) {
  }
  amphora::RecordCollection records;
  try {
    records = amphora::RecordCollection::read_jsonl(in);
  } catch (const amphora::Error&) {
    if (streamed) std::abort();
    return 0;
  }
  if (!streamed || scratch_store().save(records).digest != *streamed) std::abort();
  std::vector<nlohmann::ordered_json> values;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string text = records.record_json(i);
    if (!nlohmann::ordered_json::accept(text)) std::abort();
    values.push_back(nlohmann::ordered_json::parse(text));
    if (values.back().dump() != text) std::abort();
  }
  records.write_jsonl(out);
  if (!amphora::RecordCollection::read_jsonl(out).equals(records)) std::abort();
  if (!amphora::RecordCollection::from_json(values).equals(records)) std::abort();
  return 0;
}
