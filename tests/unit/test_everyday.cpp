// Everyday C++ types and declared structs save and load with no code.

#include "support.hpp"

#include <amphora/describe.hpp>
#include <amphora/pipeline.hpp>
#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <set>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

bool same(const Tensor& a, const Tensor& b) { return a.bit_equal(b); }

template <class T>
T round_trip(Store& store, const T& value) {
  auto saved = store.save(value);
  return store.load<T>(saved.digest);
}

std::size_t object_count(const fs::path& store) {
  std::size_t n = 0;
  for (const auto& fan : fs::directory_iterator(store / "objects/sha256"))
    for (const auto& e : fs::directory_iterator(fan.path())) {
      (void)e;
      ++n;
    }
  return n;
}

}  // namespace

namespace menpo {

struct Model {
  nlohmann::json config;
  std::map<std::string, Tensor> weights;
  std::string name;
  double learning_rate = 0;
  std::optional<std::int32_t> seed;
  std::optional<Tensor> mask;
};
AMPHORA_MATERIALIZE(Model, "menpo.model", 1, config, weights, name, learning_rate, seed, mask)

struct Entry {
  Model model;
  std::vector<Tensor> images;
  std::vector<std::string> labels;
};
AMPHORA_MATERIALIZE(Entry, "menpo.entry", 2, model, images, labels)

}  // namespace menpo

TEST_CASE("Numbers, strings and JSON round-trip with no code", "[everyday]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  CHECK(round_trip(store, 42) == 42);
  CHECK(round_trip(store, std::int64_t{-1} << 62) == std::int64_t{-1} << 62);
  CHECK(round_trip(store, std::numeric_limits<std::uint64_t>::max()) == std::numeric_limits<std::uint64_t>::max());
  CHECK(round_trip(store, true));
  CHECK(std::isnan(round_trip(store, std::nan(""))));
  CHECK(round_trip(store, -0.0f) == 0.0f);
  CHECK(std::signbit(round_trip(store, -0.0f)));
  CHECK(round_trip(store, std::complex<double>(1, -2)) == std::complex<double>(1, -2));
  // A number is a 0-d tensor, so numpy reads it and the tensor tools show it.
  auto n = store.save(2.5, {.name = "lr"});
  CHECK(store.open_artifact("lr").manifest().materializer == "amphora.tensor");
  CHECK(store.load<Tensor>("lr").ndim() == 0);
  CHECK_THROWS_AS(store.load<float>("lr"), TypeMismatch);
  CHECK_THROWS_WITH(store.load<float>("lr"), Catch::Contains("holds a 0-d float64 tensor, not a single float32 value"));
  CHECK_THROWS_WITH(store.load<std::vector<double>>("lr"), Catch::Contains("not a 1-d float64 vector"));

  const std::string text("any bytes\0\xff, even", 18);
  CHECK(round_trip(store, text) == text);
  CHECK(round_trip(store, std::string()) == "");
  auto s = store.save(std::string("héllo"), {.name = "greeting"});
  CHECK(store.open_artifact("greeting").meta()["utf8"] == true);

  nlohmann::json doc = {{"layers", {1, 2, 3}}, {"name", "résumé"}, {"nested", {{"x", nullptr}, {"y", 1.5}}}};
  CHECK(round_trip(store, doc) == doc);
  CHECK(round_trip(store, nlohmann::json(nullptr)).is_null());
  CHECK_THROWS_AS(store.save(nlohmann::json{{"bad", NAN}}), InvalidArgument);
  (void)n;
  (void)s;
}

TEST_CASE("Vectors, maps and optionals round-trip with no code", "[everyday]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::vector<float> floats = {1.5f, -2.0f, NAN, INFINITY};
  auto floats_back = round_trip(store, floats);
  REQUIRE(floats_back.size() == 4);
  CHECK(std::memcmp(floats_back.data(), floats.data(), 16) == 0);
  CHECK(round_trip(store, std::vector<bool>{true, false, true}) == std::vector<bool>{true, false, true});
  CHECK(round_trip(store, std::vector<std::int16_t>{}).empty());

  std::vector<std::string> words = {"alpha", "", std::string("\0nul", 4), "ωmega"};
  CHECK(round_trip(store, words) == words);
  CHECK(round_trip(store, std::vector<std::string>{}).empty());
  auto saved_words = store.save(words);
  CHECK(load_strings_view(store.open_artifact(saved_words.digest))[3] == "ωmega");

  std::map<std::string, int> counts = {{"b", 2}, {"a", 1}, {"", 0}};
  CHECK(round_trip(store, counts) == counts);
  std::unordered_map<std::string, std::string> names = {{"x", "ex"}, {"y", "why"}};
  CHECK(round_trip(store, names) == names);
  std::map<std::string, nlohmann::json> docs = {{"a", {1, 2}}, {"b", "text"}};
  CHECK(round_trip(store, docs) == docs);
  std::map<std::string, std::vector<double>> series = {{"loss", {0.5, 0.25}}, {"acc", {0.9}}};
  CHECK(round_trip(store, series) == series);
  // Equal maps get one digest whatever their insertion or bucket order.
  std::unordered_map<std::string, std::string> other_order;
  other_order.emplace("y", "why");
  other_order.emplace("x", "ex");
  CHECK(store.save(other_order).digest == store.save(names).digest);

  CHECK(round_trip(store, std::optional<int>()) == std::nullopt);
  CHECK(round_trip(store, std::optional<int>(7)) == 7);
  CHECK(round_trip(store, std::optional<std::string>("x")) == "x");

  std::vector<std::vector<int>> ragged = {{1, 2}, {}, {3}};
  CHECK(round_trip(store, ragged) == ragged);
  std::vector<std::map<std::string, int>> maps = {{{"a", 1}}, {}};
  CHECK(round_trip(store, maps) == maps);
}

TEST_CASE("A list of tensors is one artifact with aligned, mapped items", "[everyday][tensor_list]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::vector<Tensor> images;
  for (int i = 0; i < 50; ++i)
    images.push_back(test::random_tensor(i % 5 == 0 ? DType::float32 : DType::uint8, {8 + i, 5 + i % 3, 3},
                                         static_cast<std::uint64_t>(i)));
  images.push_back(test::random_tensor(DType::bool_, {7}, 3));
  images.push_back(test::random_tensor(DType::complex128, {}, 4));
  images.push_back(Tensor::zeros(DType::int16, {0, 4}));
  auto saved = store.save(images, {.name = "images"});
  CHECK(store.artifacts().size() == 1);
  auto back = store.load<std::vector<Tensor>>("images");
  REQUIRE(back.size() == images.size());
  for (std::size_t i = 0; i < images.size(); ++i) {
    INFO(i);
    CHECK(same(back[i], images[i]));
    CHECK(reinterpret_cast<std::uintptr_t>(back[i].data()) % 64 == 0);
  }
  CHECK_THROWS_AS(back[0].mutable_data(), InvalidArgument);  // a view of the stored file
  CHECK(store.verify("images").ok());

  // A damaged index is named, not followed.
  auto art = test::object_dir(dir / "store", saved.digest);
  auto index = nlohmann::json::parse(test::read_text(art / "index.json"));
  index[1][2] = index[1][2].get<std::uint64_t>() + 1;
  test::write_text(art / "index.json", index.dump());
  ArtifactReader in = store.open_artifact("images");
  // The manifest's hashes no longer match, which verify reports; a load that
  // trusts the file still checks the offset.
  CHECK_FALSE(store.verify("images").ok());
  CHECK_THROWS_WITH(materializer<std::vector<Tensor>>::load(in), Catch::Contains("not a multiple of 64"));
}

TEST_CASE("A list of thousands of small tensors is written in gathered runs and reads back exactly",
          "[everyday][tensor_list]") {
  // Items of 1 to 300 bytes, each padded to 64: tens of thousands of parts,
  // more than one gathered write (pwritev) takes, many per hashed slice.
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::vector<Tensor> items;
  const int count = 12000;
  for (int i = 0; i < count; ++i)
    items.push_back(test::random_tensor(DType::uint8, {1 + (i * 37) % 300}, static_cast<std::uint64_t>(i)));
  auto saved = store.save(items, {.name = "small"});
  auto back = store.load<std::vector<Tensor>>("small", {.eager = true});
  REQUIRE(back.size() == items.size());
  for (int i = 0; i < count; ++i) {
    INFO(i);
    REQUIRE(same(back[static_cast<std::size_t>(i)], items[static_cast<std::size_t>(i)]));
  }
  CHECK(store.verify("small").ok());
  // The data file holds exactly the items at their aligned offsets, zeros between.
  auto data = test::read_text(test::object_dir(dir / "store", saved.digest) / "data.bin");
  std::size_t at = 0;
  bool layout_ok = true;
  for (const auto& t : items) {
    layout_ok = layout_ok && std::memcmp(data.data() + at, t.data(), t.nbytes()) == 0;
    std::size_t end = (at + t.nbytes() + 63) / 64 * 64;
    for (std::size_t k = at + t.nbytes(); k < end; ++k) layout_ok = layout_ok && data[k] == 0;
    at = end;
  }
  CHECK(layout_ok);
  CHECK(at == data.size());
}

TEST_CASE("A declared struct keeps small members inline and the rest as children", "[everyday][describe]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  menpo::Model model;
  model.config = {{"layers", 3}, {"activation", "relu"}};
  model.weights = {{"w1", test::random_tensor(DType::float32, {4, 4}, 1)}, {"b1", test::random_tensor(DType::float32, {4}, 2)}};
  model.name = "tiny";
  model.learning_rate = 0.001;
  model.seed = 17;
  auto saved = store.save(model, {.name = "model"});
  ArtifactReader in = store.open_artifact("model");
  CHECK(in.manifest().materializer == "menpo.model");
  const auto& fields = in.meta()["fields"];
  CHECK(fields["name"] == "tiny");
  CHECK(fields["learning_rate"] == 0.001);
  CHECK(fields["seed"] == 17);
  CHECK(fields["mask"].is_null());
  CHECK(fields["config"] == model.config);
  REQUIRE(in.children().size() == 1);
  CHECK(in.children()[0].role == "weights");

  menpo::Model back = store.load<menpo::Model>("model");
  CHECK(back.config == model.config);
  CHECK(back.name == "tiny");
  CHECK(back.learning_rate == 0.001);
  CHECK(back.seed == 17);
  CHECK_FALSE(back.mask.has_value());
  REQUIRE(back.weights.size() == 2);
  CHECK(same(back.weights.at("w1"), model.weights.at("w1")));

  // What JSON cannot hold exactly is stored otherwise: a NaN as the
  // struct's own 0-d array file, a string that is not UTF-8 as a child.
  model.learning_rate = NAN;
  model.name = std::string("\xff\xfe", 2);
  model.mask = test::random_tensor(DType::bool_, {4}, 5);
  auto odd = store.save(model);
  ArtifactReader odd_in = store.open_artifact(odd.digest);
  CHECK(odd_in.has_file("learning_rate.npy"));
  CHECK(odd_in.has_child("name"));
  CHECK(odd_in.has_child("mask"));
  menpo::Model odd_back = store.load<menpo::Model>(odd.digest);
  CHECK(std::isnan(odd_back.learning_rate));
  CHECK(odd_back.name == model.name);
  CHECK(same(*odd_back.mask, *model.mask));
  CHECK(store.verify().ok());
  (void)saved;
}

TEST_CASE("The Menpo case: a map of model and images saves and loads equal, shared tensors once", "[everyday][menpo]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor shared = test::random_tensor(DType::float32, {64, 64}, 99);
  auto make_entry = [&](std::uint64_t seed) {
    menpo::Entry e;
    e.model.config = {{"seed", seed}, {"kind", "aam"}};
    e.model.weights = {{"shared", shared}, {"own", test::random_tensor(DType::float64, {16}, seed)}};
    e.model.name = "model-" + std::to_string(seed);
    e.model.learning_rate = 0.5;
    for (int i = 0; i < 5; ++i)
      e.images.push_back(test::random_tensor(DType::uint8, {10 + i, 12, 3}, seed * 10 + static_cast<std::uint64_t>(i)));
    e.labels = {"face", "profile"};
    return e;
  };
  std::map<std::string, menpo::Entry> dataset = {{"train", make_entry(1)}, {"test", make_entry(2)}};
  auto saved = store.save(dataset, {.name = "menpo"});
  auto back = store.load<std::map<std::string, menpo::Entry>>("menpo");
  REQUIRE(back.size() == 2);
  for (const auto& [key, entry] : dataset) {
    INFO(key);
    const auto& b = back.at(key);
    CHECK(b.model.config == entry.model.config);
    CHECK(b.model.name == entry.model.name);
    CHECK(b.labels == entry.labels);
    REQUIRE(b.images.size() == entry.images.size());
    for (std::size_t i = 0; i < entry.images.size(); ++i) CHECK(same(b.images[i], entry.images[i]));
    for (const auto& [w, t] : entry.model.weights) CHECK(same(b.model.weights.at(w), t));
  }
  // The shared tensor is one artifact on disk, listed by both models' weights.
  Digest shared_digest = store.save(shared).digest;
  std::size_t listing = 0;
  for (const auto& d : store.artifacts()) {
    ArtifactReader reader = store.open_artifact(d);
    for (const auto& c : reader.children()) listing += c.digest == shared_digest;
  }
  CHECK(listing == 2);
  // The map, 2 entries, per entry a model, its weights map, its own tensor
  // and its image list, then the shared tensor: nothing stored twice. The
  // two labels are inline in each entry's fields (a short list of strings).
  const std::size_t expected = 1 + 2 + 2 * 4 + 1;
  CHECK(store.open_artifact("menpo").open_child("values/0").meta()["fields"]["labels"] ==
        nlohmann::json::array({"face", "profile"}));
  CHECK(object_count(dir / "store") == expected);
  CHECK(store.verify().ok());
  store.gc(false, std::chrono::seconds(0));
  CHECK(object_count(dir / "store") == expected);
  (void)saved;
}

TEST_CASE("A declared struct missing a field loads its default; a field of another type is named", "[everyday][describe]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  // An artifact under the struct's name whose "fields" lack `model` and
  // which lists no such child: as an older version of the struct saved it
  // (docs/FORMAT.md §7.9; tests/unit/test_evolution.cpp has every rule).
  MaterializerEntry forged;
  forged.name = "menpo.entry";
  forged.version = 2;
  forged.save = [](const void*, ArtifactWriter& out) {
    out.meta()["fields"] = nlohmann::json::object();
    out.save_child("images", std::vector<Tensor>{});
    out.save_child("labels", std::vector<std::string>{"x"});
  };
  forged.load = [](const ArtifactReader&) { return std::shared_ptr<void>(); };
  int nothing = 0;
  auto saved = store.save_erased(forged, &nothing, {});
  auto entry = store.load<menpo::Entry>(saved.digest);
  CHECK(entry.model.name.empty());
  CHECK(entry.labels == std::vector<std::string>{"x"});
  CHECK_NOTHROW(materializer<menpo::Entry>::validate(store.open_artifact(saved.digest)));
  // A field stored inline with another type is named, with both types.
  forged.save = [](const void*, ArtifactWriter& out) {
    out.meta()["fields"] = {{"name", 5}, {"learning_rate", "fast"}, {"config", {{"a", 1}}}};
    out.save_child("weights", std::map<std::string, Tensor>{});
  };
  forged.name = "menpo.model";
  forged.version = 1;
  auto typed = store.save_erased(forged, &nothing, {});
  CHECK_THROWS_AS(store.load<menpo::Model>(typed.digest), TypeMismatch);
  CHECK_THROWS_WITH(store.load<menpo::Model>(typed.digest),
                    Catch::Contains("field 'name' holds an integer 5, which the declared member type std::string "
                                    "cannot hold"));
  // Loading one declared struct as another is refused by name.
  CHECK_THROWS_AS(store.load<menpo::Model>(saved.digest), TypeMismatch);
}

namespace cfg {
struct Config {
  std::string model;
  int layers = 0;
  std::vector<double> rates;
};
void to_json(nlohmann::json& j, const Config& c) { j = {{"model", c.model}, {"layers", c.layers}, {"rates", c.rates}}; }
void from_json(const nlohmann::json& j, Config& c) {
  j.at("model").get_to(c.model);
  j.at("layers").get_to(c.layers);
  j.at("rates").get_to(c.rates);
}
struct Wrapper {
  Config config;
  std::vector<Config> history;
  amphora::Tensor weights;
};
}  // namespace cfg

AMPHORA_JSON_MATERIALIZER(cfg::Config, "test.config", 1);

namespace cfg {
AMPHORA_MATERIALIZE(Wrapper, "test.wrapper", 1, config, history, weights)
}  // namespace cfg

TEST_CASE("A type with to_json/from_json is taught in one line", "[everyday][json]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  store.registry().add<cfg::Config>();
  cfg::Config c{"resnet", 50, {0.1, 0.01}};
  auto saved = store.save(c, {.name = "cfg"});
  CHECK(store.open_artifact("cfg").manifest().materializer == "test.config");
  auto back = store.load<cfg::Config>("cfg");
  CHECK(back.model == "resnet");
  CHECK(back.layers == 50);
  CHECK(back.rates == c.rates);
  CHECK(store.verify("cfg").ok());
  // Stored as canonical JSON that any tool reads.
  CHECK(test::read_text(test::object_dir(dir / "store", saved.digest) / "value.json") ==
        R"({"layers":50,"model":"resnet","rates":[0.1,0.01]})");
  // A document that no longer has the fields is damage, named as such.
  MaterializerEntry forged;
  forged.name = "test.config";
  forged.version = 1;
  forged.save = [](const void*, ArtifactWriter& out) { out.write_json("value.json", {{"model", 5}}); };
  forged.load = [](const ArtifactReader&) { return std::shared_ptr<void>(); };
  int nothing = 0;
  auto bad = store.save_erased(forged, &nothing, {});
  CHECK_THROWS_AS(store.load<cfg::Config>(bad.digest), CorruptData);
  CHECK_THROWS_WITH(store.load<cfg::Config>(bad.digest), Catch::Contains("does not convert back"));
  CHECK_FALSE(store.verify(bad.digest.str()).ok());
}

TEST_CASE("A JSON-backed type composes: a child, a struct field, a list item, a map value, a pipeline output",
          "[everyday][json]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  cfg::Config a{"a", 1, {0.5}}, b{"b", 2, {}};
  cfg::Wrapper w{a, {a, b}, test::random_tensor(DType::float32, {4}, 1)};
  auto saved = store.save(w, {.name = "w"});
  auto back = store.load<cfg::Wrapper>("w");
  CHECK(back.config.model == "a");
  REQUIRE(back.history.size() == 2);
  CHECK(back.history[1].layers == 2);
  CHECK(back.weights.values<float>()[3] == w.weights.values<float>()[3]);
  // The same Config appears three times in the tree and is stored once.
  std::set<Digest> children;
  std::vector<ArtifactReader> pending{store.open_artifact(saved.digest)};
  while (!pending.empty()) {
    auto r = pending.back();
    pending.pop_back();
    for (const auto& c : r.children()) {
      children.insert(c.digest);
      pending.push_back(store.open_artifact(c.digest));
    }
  }
  CHECK(children.count(store.save(a).digest) == 1);
  std::map<std::string, cfg::Config> by_name{{"a", a}, {"b", b}};
  store.save(by_name, {.name = "m"});
  CHECK(store.load<std::map<std::string, cfg::Config>>("m").at("b").model == "b");
  CHECK(store.verify().ok());

  Pipeline p("json");
  auto made = p.step({.name = "make"}, [] { return cfg::Config{"piped", 3, {1.0}}; });
  p.step({.name = "use"}, [](const cfg::Config& c) { return c.layers * 2; }, made);
  REQUIRE(p.run(store).ok);
  CHECK(store.load<cfg::Config>("json.make.out").model == "piped");
  CHECK(store.load<int>("json.use.out") == 6);
}
