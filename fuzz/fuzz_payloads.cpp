// Hostile payload files behind a valid manifest: the first input byte picks
// what the rest becomes, and the matching reader must either load a value it
// can access in full or throw an amphora::Error (never crash or read out of
// bounds):
//   0  index.json of an amphora.tensor_list
//   1  the offsets of merged strings (ArtifactReader::read_strings)
//   2  a ragged column of an amphora.record_list
//   3  the keys of an amphora.map
// Each input is saved as an artifact in a scratch store (so the manifest and
// its hashes are right) and then loaded.

#include "scratch_store.hpp"

#include <amphora/npy_format.hpp>
#include <amphora/amphora.hpp>
#include <amphora/record_list.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace fuzz {

struct Row {
  std::vector<float> values;
  std::string label;
};
AMPHORA_MATERIALIZE(Row, "fuzz.row", 1, values, label)

}  // namespace fuzz

namespace {

struct Forged {
  std::string materializer;
  std::map<std::string, std::string> files;
  nlohmann::json meta;
};

amphora::Digest save(amphora::Store& store, const Forged& forged) {
  amphora::MaterializerEntry entry;
  entry.name = forged.materializer;
  entry.version = 1;
  entry.save = [](const void* v, amphora::ArtifactWriter& out) {
    const auto& f = *static_cast<const Forged*>(v);
    for (const auto& [path, bytes] : f.files) out.write_file(path, std::as_bytes(std::span<const char>(bytes)));
    out.meta() = f.meta;
  };
  entry.load = [](const amphora::ArtifactReader&) { return std::shared_ptr<void>(); };
  return store.save_erased(entry, &forged, {}).digest;
}

std::string floats(std::size_t n) { return std::string(n * sizeof(float), '\0'); }

std::string npy(amphora::DType dtype, std::int64_t n, const std::string& data) {
  return amphora::make_npy_header(dtype, std::span<const std::int64_t>(&n, 1), 64) + data;
}

std::size_t touch(std::string_view s) {
  std::size_t sum = 0;
  for (char c : s) sum += static_cast<unsigned char>(c);
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  amphora::Store store = scratch_store();
  volatile std::size_t sink = 0;
  try {
    switch (data[0] % 4) {
      case 0: {
        auto d = save(store, {"amphora.tensor_list", {{"index.json", rest}, {"data.bin", std::string(4096, '\1')}},
                       {{"count", 2}, {"data_bytes", 4096}}});
        for (const auto& t : store.load<std::vector<amphora::Tensor>>(d))
          for (std::size_t i = 0; i < t.nbytes(); ++i) sink = sink + static_cast<unsigned>(t.data()[i]);
        break;
      }
      case 1: {
        auto d = save(store, {"fuzz.strings", {{"s.offsets.npy", rest}, {"s.bytes", std::string(100, 'x')}}, {}});
        for (auto s : store.open_artifact(d).read_strings("s")) sink = sink + touch(s);
        break;
      }
      case 2: {
        std::int64_t label_offsets[] = {0, 1, 2};
        std::string labels(reinterpret_cast<const char*>(label_offsets), sizeof label_offsets);
        auto d = save(store, {"amphora.record_list",
                       {{"values.offsets.npy", rest},
                        {"values.values.npy", npy(amphora::DType::float32, 16, floats(16))},
                        {"label.offsets.npy", npy(amphora::DType::int64, 3, labels)},
                        {"label.bytes", "ab"}},
                       {{"element", "fuzz.row"}, {"element_version", 1}, {"count", 2}}});
        for (const auto& row : store.load<std::vector<fuzz::Row>>(d)) sink = sink + row.values.size() + touch(row.label);
        break;
      }
      default: {
        std::int64_t value_offsets[] = {0, 1, 2};
        std::string values(reinterpret_cast<const char*>(value_offsets), sizeof value_offsets);
        auto d = save(store, {"amphora.map",
                       {{"keys.offsets.npy", rest}, {"keys.bytes", "ab"},
                        {"values.offsets.npy", npy(amphora::DType::int64, 3, values)}, {"values.bytes", "xy"}},
                       {{"count", 2}, {"values", "strings"}}});
        for (const auto& [k, v] : store.load<std::map<std::string, std::string>>(d)) sink = sink + touch(k) + touch(v);
        break;
      }
    }
  } catch (const amphora::Error&) {
  }
  return 0;
}
