// Every combination of the supported types nests with no code but
// AMPHORA_MATERIALIZE: fixed arrays, tensors, maps, pairs and tuples inside
// record lists (as columns), structs that have no column kind stored one
// artifact per element, and std::array, std::pair, std::tuple and
// std::variant as values of their own. Record lists evolve by the rules of
// single structs (docs/FORMAT.md §7.9, §7.10).

#include "support.hpp"

#include <amphora/describe.hpp>
#include <amphora/table.hpp>
#include <catch2/catch.hpp>

#include <array>
#include <complex>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <variant>

using namespace amphora;

namespace nest {

// IceVision's detection record, as its users write it: no wrapper struct.
struct Detection {
  std::string filepath;
  std::int64_t image_id = 0;
  std::array<std::int32_t, 2> size{};
  std::vector<std::array<float, 4>> bboxes;
  std::vector<std::string> labels;
  bool operator==(const Detection&) const = default;
};
AMPHORA_MATERIALIZE(Detection, "nest.detection", 1, filepath, image_id, size, bboxes, labels)

struct Sample {
  Tensor pixels;
  std::optional<Tensor> mask;
  std::map<std::string, double> scores;
  std::unordered_map<std::string, std::vector<std::int32_t>> groups;
  std::pair<std::string, std::int64_t> source;
  std::tuple<float, std::string, std::array<double, 2>> note;
  std::array<std::array<std::uint8_t, 3>, 2> palette{};
  std::vector<Tensor> crops;
  bool operator==(const Sample&) const = default;
};
AMPHORA_MATERIALIZE(Sample, "nest.sample", 1, pixels, mask, scores, groups, source, note, palette, crops)

// A member with no column kind: the list falls back to one artifact per element.
struct Experiment {
  std::string name;
  std::variant<std::int64_t, std::string> seed;
  bool operator==(const Experiment&) const = default;
};
AMPHORA_MATERIALIZE(Experiment, "nest.experiment", 1, name, seed)

// Small maps of scalars and short lists of strings go inline, as scalars do.
struct Tags {
  std::map<std::string, std::string> config;
  std::unordered_map<std::string, double> scores;
  std::vector<std::string> labels;
  bool operator==(const Tags&) const = default;
};
AMPHORA_MATERIALIZE(Tags, "nest.tags", 1, config, scores, labels)
struct TagsAsNumbers {
  std::map<std::string, std::int64_t> config;
};
AMPHORA_MATERIALIZE(TagsAsNumbers, "nest.tags", 1, config)

}  // namespace nest

namespace {

Tensor image(std::int64_t h, std::int64_t w, std::uint8_t fill) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(h * w));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(fill + i);
  return Tensor::from_values<std::uint8_t>({h, w}, v);
}

std::vector<std::string> file_paths(const ArtifactReader& in) {
  std::vector<std::string> out;
  for (const auto& f : in.manifest().files) out.push_back(f.path);
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

}  // namespace

TEST_CASE("A detection record with bounding boxes is stored columnar, boxes as one n x 4 array",
          "[nesting][records]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  std::vector<nest::Detection> records = {
      {"a.jpg", 1, {640, 480}, {{1, 2, 3, 4}, {5, 6, 7, 8}}, {"cat", "dog"}},
      {"b.jpg", 2, {320, 200}, {}, {}},
      {"c.jpg", 3, {10, 10}, {{0.5f, -0.0f, 1e30f, 9}}, {"bird"}},
  };
  auto digest = store.save(records).digest;
  auto reader = store.open_artifact(digest);
  CHECK(reader.manifest().materializer == "amphora.record_list");
  const auto files = file_paths(reader);
  CHECK(has(files, "bboxes.offsets.npy"));
  CHECK(has(files, "bboxes.values.npy"));
  CHECK(has(files, "size.npy"));
  CHECK(reader.children().empty());
  auto boxes = reader.read_array("bboxes.values.npy", DType::float32, 2);
  CHECK(boxes.shape() == std::vector<std::int64_t>{3, 4});
  CHECK(reader.read_array("size.npy", DType::int32, 2).shape() == std::vector<std::int64_t>{3, 2});
  CHECK(store.load<std::vector<nest::Detection>>(digest) == records);
  auto list = RecordList<nest::Detection>::open(reader);
  CHECK(list[2].bboxes == records[2].bboxes);
  CHECK(store.verify().ok());
}

TEST_CASE("Tensors, maps, pairs, tuples and nested fixed arrays are record-list columns", "[nesting][records]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  std::vector<nest::Sample> samples;
  for (int i = 0; i < 5; ++i) {
    nest::Sample s;
    s.pixels = image(2 + i, 3, static_cast<std::uint8_t>(i));
    if (i % 2) s.mask = Tensor::from_values<bool>({2}, std::vector<bool>{true, false});
    s.scores = {{"iou", 0.5 * i}, {"conf", 1.0}};
    s.groups = {{"b", {i, i + 1}}, {"a", {}}};
    s.source = {"cam" + std::to_string(i), i * 100};
    s.note = {0.25f * static_cast<float>(i), std::string(static_cast<std::size_t>(i), 'x'), {1.0 * i, -2.0}};
    s.palette = {{{1, 2, 3}, {4, 5, static_cast<std::uint8_t>(i)}}};
    for (int k = 0; k < i; ++k) s.crops.push_back(Tensor::from_values<double>({k}, std::vector<double>(k, 0.5)));
    samples.push_back(std::move(s));
  }
  samples[3].pixels = Tensor::from_values<float>({}, std::vector<float>{7.0f});  // rows may differ in dtype and shape
  auto digest = store.save(samples).digest;
  auto reader = store.open_artifact(digest);
  CHECK(reader.manifest().materializer == "amphora.record_list");
  CHECK(reader.children().empty());
  const auto files = file_paths(reader);
  for (const char* f : {"pixels.data.bin", "pixels.index.json", "mask.valid.npy", "scores.keys.bytes",
                        "scores.values.npy", "groups.values.values.npy", "source/0.bytes", "source/1.npy",
                        "note/2.npy", "palette.npy", "crops.values.index.json"})
    CHECK(has(files, f));
  CHECK(reader.read_array("palette.npy", DType::uint8, 3).shape() == std::vector<std::int64_t>{5, 2, 3});
  const auto back = store.load<std::vector<nest::Sample>>(digest);
  REQUIRE(back.size() == samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    INFO("record " << i);
    CHECK(back[i] == samples[i]);
    CHECK(back[i].pixels.dtype() == samples[i].pixels.dtype());
    CHECK(back[i].pixels.shape() == samples[i].pixels.shape());
  }
  // Eager loads read the same values.
  CHECK(store.load<std::vector<nest::Sample>>(digest, {.eager = true}) == samples);
  CHECK(store.verify().ok());
}

TEST_CASE("A struct with a member of no column kind is stored one artifact per element", "[nesting][records]") {
  static_assert(!Columnar<nest::Experiment>);
  static_assert(Columnar<nest::Detection> && Columnar<nest::Sample>);
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  std::vector<nest::Experiment> runs = {{"a", std::int64_t{42}}, {"b", std::string("random")}, {"a", std::int64_t{42}}};
  auto digest = store.save(runs).digest;
  auto reader = store.open_artifact(digest);
  CHECK(reader.manifest().materializer == "amphora.list");
  REQUIRE(reader.children().size() == 3);
  // Equal elements are one artifact.
  CHECK(reader.children()[0].digest == reader.children()[2].digest);
  CHECK(reader.open_child("items/1").manifest().materializer == "nest.experiment");
  CHECK(store.load<std::vector<nest::Experiment>>(digest) == runs);
}

TEST_CASE("Fixed arrays, pairs, tuples and variants are values of their own", "[nesting]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());

  const std::array<float, 3> point{1.5f, -2.0f, 3.25f};
  auto p = store.save(point).digest;
  CHECK(store.open_artifact(p).manifest().materializer == "amphora.tensor");
  CHECK(store.load<std::array<float, 3>>(p) == point);
  CHECK(store.load<std::vector<float>>(p) == std::vector<float>(point.begin(), point.end()));
  CHECK_THROWS_AS((store.load<std::array<float, 4>>(p)), TypeMismatch);
  CHECK_THROWS_WITH((store.load<std::array<double, 3>>(p)), Catch::Contains("float32 tensor of shape 3") &&
                                                              Catch::Contains("float64 elements in shape 3"));

  const std::vector<std::array<double, 2>> landmarks{{0.5, 1.5}, {2.5, 3.5}, {4.5, 5.5}};
  auto l = store.save(landmarks).digest;
  CHECK(store.open_artifact(l).meta()["shape"] == nlohmann::json::array({3, 2}));
  CHECK(store.load<std::vector<std::array<double, 2>>>(l) == landmarks);
  CHECK(store.load<std::vector<std::array<double, 2>>>(store.save(std::vector<std::array<double, 2>>{}).digest).empty());
  CHECK_THROWS_AS((store.load<std::vector<std::array<double, 3>>>(l)), TypeMismatch);

  const std::array<std::string, 2> names{"left", "right"};
  auto n = store.save(names).digest;
  CHECK(store.open_artifact(n).manifest().materializer == "amphora.list");
  CHECK(store.load<std::array<std::string, 2>>(n) == names);
  CHECK_THROWS_AS((store.load<std::array<std::string, 3>>(n)), TypeMismatch);

  const std::pair<std::string, Tensor> pair{"weights", image(4, 4, 1)};
  auto pd = store.save(pair).digest;
  auto pr = store.open_artifact(pd);
  CHECK(pr.manifest().materializer == "amphora.tuple");
  CHECK(pr.meta()["fields"]["0"] == "weights");  // small values inline
  CHECK(pr.has_child("1"));
  CHECK(store.load<std::pair<std::string, Tensor>>(pd) == pair);
  CHECK_THROWS_AS((store.load<std::tuple<std::string, Tensor, int>>(pd)), TypeMismatch);
  CHECK_THROWS_AS((store.load<std::pair<std::int64_t, Tensor>>(pd)), TypeMismatch);

  const std::tuple<int, std::optional<std::string>, std::vector<std::string>, double> tuple{
      3, std::nullopt, {"x", "y"}, std::numeric_limits<double>::infinity()};
  auto td = store.save(tuple).digest;
  CHECK(store.load<std::remove_const_t<decltype(tuple)>>(td) == tuple);

  using V = std::variant<std::monostate, std::int64_t, std::string, Tensor>;
  for (const V& v : {V{}, V{std::int64_t{-7}}, V{std::string("text")}, V{image(2, 2, 9)}}) {
    auto d = store.save(v).digest;
    CHECK(store.open_artifact(d).manifest().materializer == "amphora.variant");
    CHECK(store.load<V>(d) == v);
  }
  auto tensor_variant = store.save(V{image(2, 2, 9)}).digest;
  CHECK(store.open_artifact(tensor_variant).has_child("value"));
  using Narrow = std::variant<std::monostate, std::int64_t>;
  CHECK_THROWS_WITH(store.load<Narrow>(tensor_variant), Catch::Contains("holds alternative 3 of a variant"));
  // Alternative 0 of another variant type is monostate here: a stored value is damage, not dropped.
  using Other = std::variant<std::string, std::int64_t>;
  const auto text = store.save(Other{std::string("x")}).digest;
  CHECK_THROWS_AS(store.load<V>(text), CorruptData);
  CHECK_THROWS_WITH(store.load<V>(text), Catch::Contains("std::monostate") && Catch::Contains("stores a value"));
  CHECK(store.verify().ok());
}

// ---------------------------------------------------------------- evolution

namespace rec1 {
struct Row {
  std::string name;
  std::int32_t count = 0;
  double legacy = 0;
  std::vector<std::array<float, 2>> points;
};
AMPHORA_MATERIALIZE(Row, "nest.row", 1, name, count, legacy, points)
}  // namespace rec1

namespace rec2 {
// `count` renamed `total`, `legacy` removed, `weight`, `tag` and `inner` added.
struct Inner {
  std::int64_t id = 5;
  std::string label = "none";
};
AMPHORA_MATERIALIZE(Inner, "nest.inner", 1, id, label)
struct Row {
  std::string name;
  std::int32_t total = 0;
  std::vector<std::array<float, 2>> points;
  double weight = 1.5;
  std::optional<std::string> tag;
  Inner inner;
};
AMPHORA_MATERIALIZE(Row, "nest.row", 2, name, total, points, weight, tag, inner)
AMPHORA_RENAMED(Row, "count", "total")
}  // namespace rec2

namespace rec3 {
// `count` now a string, `points` now 3-wide: type changes, refused by name.
struct Count {
  std::string count;
};
AMPHORA_MATERIALIZE(Count, "nest.row", 3, count)
struct Points {
  std::vector<std::array<float, 3>> points;
};
AMPHORA_MATERIALIZE(Points, "nest.row", 3, points)
struct Wider {
  std::int64_t count = 0;
};
AMPHORA_MATERIALIZE(Wider, "nest.row", 3, count)
}  // namespace rec3

namespace rec4 {
// `count` (int32) became `total` (int64, ten times as large) and `legacy`
// moved into a note: only a migration knows how.
struct Row {
  std::string name;
  std::int64_t total = 0;
  std::string note;
  int migrated_from = 0;
};
AMPHORA_MATERIALIZE(Row, "nest.row", 4, name, total, note)
void amphora_migrate(Row& row, const StoredStruct& stored) {
  row.migrated_from = stored.version();
  if (stored.version() < 2) {
    row.total = 10 * static_cast<std::int64_t>(stored.get<std::int32_t>("count"));
    row.note = "legacy " + std::to_string(stored.get<double>("legacy")) + (stored.has("points") ? " with points" : "");
  }
}
}  // namespace rec4

namespace rec5 {
// A struct nested in records, migrated on its own version.
struct InnerV1 {
  std::int32_t x = 0;
};
AMPHORA_MATERIALIZE(InnerV1, "nest.minner", 1, x)
struct OuterV1 {
  std::string id;
  InnerV1 inner;
};
AMPHORA_MATERIALIZE(OuterV1, "nest.mouter", 1, id, inner)
struct InnerV2 {
  std::int64_t y = 0;
};
AMPHORA_MATERIALIZE(InnerV2, "nest.minner", 2, y)
void amphora_migrate(InnerV2& inner, const StoredStruct& stored) {
  if (stored.version() == 1) inner.y = 2 * stored.get<std::int32_t>("x");
}
struct OuterV2 {
  std::string id;
  InnerV2 inner;
};
AMPHORA_MATERIALIZE(OuterV2, "nest.mouter", 1, id, inner)
}  // namespace rec5

TEST_CASE("amphora_migrate upgrades each record of a record list saved by an older version",
          "[nesting][records][evolution]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  std::vector<rec1::Row> old = {{"a", 3, 0.5, {{1, 2}}}, {"b", 4, 1.5, {}}, {"c", -1, 0, {}}};
  const auto now = store.load<std::vector<rec4::Row>>(store.save(old).digest);
  REQUIRE(now.size() == 3);
  for (std::size_t i = 0; i < old.size(); ++i) {
    INFO(i);
    CHECK(now[i].name == old[i].name);
    CHECK(now[i].migrated_from == 1);
    CHECK(now[i].total == 10 * old[i].count);
    CHECK(now[i].note == "legacy " + std::to_string(old[i].legacy) + " with points");
  }
  // Records of the current version are not migrated.
  const auto again = store.load<std::vector<rec4::Row>>(store.save(now).digest);
  CHECK(again[0].migrated_from == 0);
  CHECK(again[0].total == 30);

  // A nested struct's own version decides, per struct column.
  std::vector<rec5::OuterV1> nested = {{"p", {7}}, {"q", {-4}}};
  const auto up = store.load<std::vector<rec5::OuterV2>>(store.save(nested).digest);
  REQUIRE(up.size() == 2);
  CHECK(up[0].inner.y == 14);
  CHECK(up[1].inner.y == -8);
  // ... and a newer nested struct is refused by an older build.
  CHECK_THROWS_WITH(store.load<std::vector<rec5::OuterV1>>(store.save(up).digest),
                    Catch::Contains("column 'inner'") && Catch::Contains("version 2, newer than the version 1"));
}

TEST_CASE("Record lists evolve: added members default, removed are ignored, renames followed, type changes named",
          "[nesting][records][evolution]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  std::vector<rec1::Row> old = {{"a", 3, 0.5, {{1, 2}}}, {"b", 4, 1.5, {}}};
  auto saved = store.save(old).digest;

  const auto now = store.load<std::vector<rec2::Row>>(saved);
  REQUIRE(now.size() == 2);
  CHECK(now[0].name == "a");
  CHECK(now[0].total == 3);  // stored as `count`
  CHECK(now[1].total == 4);
  CHECK(now[0].points == old[0].points);
  CHECK(now[0].weight == 1.5);
  CHECK_FALSE(now[1].tag.has_value());
  CHECK(now[1].inner.id == 5);
  CHECK(now[1].inner.label == "none");
  // A newer version's records are refused by an older build.
  auto newer = store.save(now).digest;
  CHECK_THROWS_AS(store.load<std::vector<rec1::Row>>(newer), Unsupported);

  CHECK_THROWS_WITH(store.load<std::vector<rec3::Count>>(saved),
                    Catch::Contains("column 'count'") && Catch::Contains("std::string"));
  CHECK_THROWS_AS(store.load<std::vector<rec3::Count>>(saved), TypeMismatch);
  CHECK_THROWS_WITH(store.load<std::vector<rec3::Points>>(saved),
                    Catch::Contains("points.values.npy") && Catch::Contains("shape 1x2") &&
                        Catch::Contains("std::array<float, 3>"));
  CHECK_THROWS_WITH(store.load<std::vector<rec3::Wider>>(saved),
                    Catch::Contains("'count.npy' holds int32") && Catch::Contains("int64"));
}

namespace nest {
// Small arrays of numbers, and numbers JSON cannot hold, live in the struct's own payload.
struct Arrays {
  double nan = 0;
  std::vector<float> small;
  std::vector<float> large;
  std::array<std::int16_t, 3> fixed{};
  std::vector<std::array<double, 2>> points;
  std::optional<std::vector<std::uint8_t>> maybe;
  std::complex<double> z;
};
AMPHORA_MATERIALIZE(Arrays, "nest.arrays", 1, nan, small, large, fixed, points, maybe, z)
struct ArraysWider {
  std::vector<double> small;
};
AMPHORA_MATERIALIZE(ArraysWider, "nest.arrays", 1, small)
}  // namespace nest

TEST_CASE("Small arrays of numbers are files of the struct itself; large ones are children", "[nesting][describe]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  nest::Arrays a;
  a.nan = std::numeric_limits<double>::quiet_NaN();
  a.small = {1.5f, -2.5f};
  a.large.assign(20000, 0.25f);  // 80,000 bytes: past the 64 KiB kept in the struct
  a.fixed = {1, -2, 3};
  a.points = {{0.5, 1.5}, {2.5, 3.5}};
  a.maybe = std::vector<std::uint8_t>{7, 8, 9};
  a.z = {1.0, -1.0};
  auto in = store.open_artifact(store.save(a).digest);
  for (const char* f : {"nan.npy", "small.npy", "fixed.npy", "points.npy", "maybe.npy", "z.npy"}) CHECK(in.has_file(f));
  REQUIRE(in.children().size() == 1);
  CHECK(in.has_child("large"));
  CHECK(in.read_array("points.npy", DType::float64, 2).shape() == std::vector<std::int64_t>{2, 2});
  const auto back = store.load<nest::Arrays>(in.digest());
  CHECK(std::isnan(back.nan));
  CHECK(back.small == a.small);
  CHECK(back.large == a.large);
  CHECK(back.fixed == a.fixed);
  CHECK(back.points == a.points);
  CHECK(back.maybe == a.maybe);
  CHECK(back.z == a.z);
  // Each file is 64-byte aligned, not a page: the struct's payload is small.
  CHECK(in.file_size("small.npy") <= 128 + 2 * sizeof(float));
  CHECK_THROWS_WITH(store.load<nest::ArraysWider>(in.digest()),
                    Catch::Contains("field 'small' is stored in 'small.npy' as float32") &&
                        Catch::Contains("std::vector<double>"));
  CHECK(store.verify().ok());
}

TEST_CASE("Small maps of scalars and short string lists are stored inline; larger ones as children",
          "[nesting][describe]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  const nest::Tags small{{{"optimizer", "adam"}, {"act", "relu"}}, {{"iou", 0.5}, {"f1", 0.25}}, {"cat", "dog"}};
  auto s = store.open_artifact(store.save(small).digest);
  CHECK(s.children().empty());
  CHECK(s.meta()["fields"]["config"] == nlohmann::json{{"act", "relu"}, {"optimizer", "adam"}});
  CHECK(s.meta()["fields"]["labels"] == nlohmann::json::array({"cat", "dog"}));
  CHECK(store.load<nest::Tags>(s.digest()) == small);
  CHECK_THROWS_WITH(store.load<nest::TagsAsNumbers>(s.digest()),
                    Catch::Contains("field 'config'") && Catch::Contains("std::map<std::string, long>"));

  // Past the limits, or holding what JSON cannot (a NaN, bytes that are not
  // UTF-8), they are children as before, and load the same.
  nest::Tags large = small;
  for (int i = 0; i < 300; ++i) large.labels.push_back("label-" + std::to_string(i));
  large.scores["nan"] = std::numeric_limits<double>::quiet_NaN();
  large.config["bytes"] = std::string("\xff\xfe");
  auto l = store.open_artifact(store.save(large).digest);
  CHECK(l.has_child("labels"));
  CHECK(l.has_child("scores"));
  CHECK(l.has_child("config"));
  const auto back = store.load<nest::Tags>(l.digest());
  CHECK(back.labels == large.labels);
  CHECK(back.config == large.config);
  CHECK(std::isnan(back.scores.at("nan")));
  CHECK(back.scores.at("iou") == 0.5);
  CHECK(store.verify().ok());
}
