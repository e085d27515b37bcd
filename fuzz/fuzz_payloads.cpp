// Hostile payload files behind a valid manifest: the first input byte picks
// what the rest becomes, and the matching reader must either load a value it
// can access in full or throw an amphora::Error (never crash or read out of
// bounds):
//   0  index.json of an amphora.tensor_list
//   1  the offsets of merged strings (ArtifactReader::read_strings)
//   2  a ragged column of an amphora.record_list
//   3  the keys of an amphora.map
//   4  the index of a record list's tensor column
//   5  the keys' offsets of a record list's map column
//   6  a record list's fixed-width column (std::array<float, 4>)
//   7  a declared struct's member array file (MEMBER.npy)
// Each input is saved as an artifact in a scratch store (so the manifest and
// its hashes are right) and then loaded.

#include "scratch_store.hpp"

#include <amphora/npy_format.hpp>
#include <amphora/amphora.hpp>
#include <amphora/record_list.hpp>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

namespace fuzz {

struct Row {
  std::vector<float> values;
  std::string label;
};
AMPHORA_MATERIALIZE(Row, "fuzz.row", 1, values, label)

struct Picture {
  amphora::Tensor pixels;
};
AMPHORA_MATERIALIZE(Picture, "fuzz.picture", 1, pixels)

struct Tagged {
  std::map<std::string, std::int64_t> tags;
};
AMPHORA_MATERIALIZE(Tagged, "fuzz.tagged", 1, tags)

struct Boxed {
  std::array<float, 4> box{};
};
AMPHORA_MATERIALIZE(Boxed, "fuzz.boxed", 1, box)

struct Arrays {
  std::vector<float> small;
  std::array<std::int16_t, 3> fixed{};
};
AMPHORA_MATERIALIZE(Arrays, "fuzz.arrays", 1, small, fixed)

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
    switch (data[0] % 8) {
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
      case 4: {
        auto d = save(store, {"amphora.record_list", {{"pixels.index.json", rest}, {"pixels.data.bin", std::string(4096, '\1')}},
                              {{"element", "fuzz.picture"}, {"element_version", 1}, {"count", 2}}});
        for (const auto& p : store.load<std::vector<fuzz::Picture>>(d))
          for (std::size_t i = 0; i < p.pixels.nbytes(); ++i) sink = sink + static_cast<unsigned>(p.pixels.data()[i]);
        break;
      }
      case 5: {
        std::int64_t entry_offsets[] = {0, 1, 2};
        std::int64_t values[] = {7, 8};
        auto d = save(store, {"amphora.record_list",
                              {{"tags.offsets.npy", npy(amphora::DType::int64, 3, std::string(reinterpret_cast<const char*>(entry_offsets), sizeof entry_offsets))},
                               {"tags.keys.offsets.npy", rest}, {"tags.keys.bytes", "abc"},
                               {"tags.values.npy", npy(amphora::DType::int64, 2, std::string(reinterpret_cast<const char*>(values), sizeof values))}},
                              {{"element", "fuzz.tagged"}, {"element_version", 1}, {"count", 2}}});
        for (const auto& t : store.load<std::vector<fuzz::Tagged>>(d))
          for (const auto& [k, v] : t.tags) sink = sink + touch(k) + static_cast<std::size_t>(v);
        break;
      }
      case 6: {
        auto d = save(store, {"amphora.record_list", {{"box.npy", rest}},
                              {{"element", "fuzz.boxed"}, {"element_version", 1}, {"count", 2}}});
        for (const auto& b : store.load<std::vector<fuzz::Boxed>>(d)) sink = sink + static_cast<std::size_t>(b.box[3] > 0);
        break;
      }
      case 7: {
        auto d = save(store, {"fuzz.arrays", {{"small.npy", rest}}, {{"fields", nlohmann::json::object()}}});
        const auto a = store.load<fuzz::Arrays>(d);
        sink = sink + a.small.size() + static_cast<std::size_t>(a.fixed[0]);
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
