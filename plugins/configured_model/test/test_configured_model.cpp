// The configured-model plugin: a model (configuration, weights, training
// log) round-trips through the C++ API as one composite; its digest follows
// the configuration's meaning, not its formatting; through the `amphora`
// command with the plugin it is shown, verified (a damaged configuration is
// found), exported, and a .yaml file imports as a configuration; without
// the plugin it is shown and refused by name, and the Python reader loads
// it with a reader registered for the configuration.

#define CATCH_CONFIG_MAIN
#include <amphora/amphora.hpp>
#include <amphora/plugin.hpp>
#include <amphora_configured_model/configured_model.hpp>
#include <catch2/catch.hpp>

#include "plugin_test.hpp"

#include <fstream>

namespace fs = std::filesystem;
using configured_model::Model;
using plugin_test::kPlugin;
using plugin_test::run_cli;
using plugin_test::Scratch;

namespace {

constexpr const char* kConfig = R"(# a small classifier
model:
  architecture: mlp
  hidden: [128, 64]
  activation: relu
optimizer: {name: adam, lr: 0.001}
seed: 7
note: "null"
)";

// The same tree: keys in another order, other styles, comments elsewhere.
constexpr const char* kSameConfig = R"(seed: 7
note: "null"
optimizer:
  lr: 0.001   # the default
  name: adam
model: {activation: relu, hidden: [128, 64], architecture: mlp}
)";

Model sample(const char* config = kConfig) {
  Model m;
  m.config = configured_model::parse_config(config, "the test configuration");
  m.weights["layer1.weight"] = amphora::Tensor::from_values<float>({3, 2}, {0.5f, -1, 2, 0.25f, 8, -3});
  m.weights["layer1.bias"] = amphora::Tensor::from_values<float>({3}, {0, 1, -1});
  m.weights["head.weight"] = amphora::Tensor::from_values<double>({1, 3}, {1e-3, 2e300, -0.0});
  m.training_log = {{0, 2.5, 1e-3}, {100, 0.75, 1e-3}, {200, 0.5, 5e-4}};
  return m;
}

void check_same(const Model& a, const Model& b) {
  CHECK(configured_model::canonical_yaml(a.config.root) == configured_model::canonical_yaml(b.config.root));
  REQUIRE(a.weights.size() == b.weights.size());
  for (const auto& [name, tensor] : a.weights) {
    INFO(name);
    const auto& other = b.weights.at(name);
    CHECK(other.dtype() == tensor.dtype());
    CHECK(other.shape() == tensor.shape());
    REQUIRE(other.nbytes() == tensor.nbytes());
    CHECK(std::memcmp(other.data(), tensor.data(), tensor.nbytes()) == 0);
  }
  CHECK(a.training_log == b.training_log);
}

}  // namespace

TEST_CASE("A configured model round-trips as one composite, loaded back by type") {
  Scratch dir;
  auto store = amphora::Store::open(dir.path / "store", {.create = true});
  const Model m = sample();
  const auto saved = store.save(m, {.name = "classifier"});
  const Model back = store.load<Model>("classifier");
  check_same(m, back);
  CHECK(back.config.root["model"]["hidden"][1].as<int>() == 64);
  CHECK(back.config.root["note"].as<std::string>() == "null");  // quoted: a string, not a null
  CHECK(back.config.root["note"].Type() == YAML::NodeType::Scalar);

  const auto reader = store.open_artifact("classifier");
  CHECK(reader.manifest().materializer == "configured_model.model");
  const auto config = reader.open_child("config");
  CHECK(config.meta()["keys"] == nlohmann::json({"model", "note", "optimizer", "seed"}));
  CHECK(reader.open_child("weights").manifest().materializer == "amphora.map");
  CHECK(reader.open_child("training_log").manifest().materializer == "amphora.record_list");
  // The stored configuration is canonical YAML any YAML reader opens.
  const auto text = config.read_file("config.yaml");
  const std::string yaml(reinterpret_cast<const char*>(text->data()), text->size());
  CHECK(yaml.find("hidden:\n") != std::string::npos);
  CHECK(yaml.find("#") == std::string::npos);
  CHECK(yaml.find("lr: 0.001") < yaml.find("name: adam"));
}

TEST_CASE("A model's digest follows its configuration's meaning, not its formatting") {
  Scratch dir;
  auto store = amphora::Store::open(dir.path / "store", {.create = true});
  const auto first = store.save(sample()).digest;
  CHECK(store.save(sample(kSameConfig)).digest == first);

  Model changed = sample();
  changed.config.root["optimizer"]["lr"] = "0.002";
  CHECK(store.save(changed).digest != first);
  // "7" quoted is a string, not the number 7.
  std::string quoted_seed = kConfig;
  quoted_seed.replace(quoted_seed.find("seed: 7"), 7, "seed: \"7\"");
  CHECK(store.save(sample(quoted_seed.c_str())).digest != first);
  Model retrained = sample();
  retrained.training_log.back().loss = 0.49;
  CHECK(store.save(retrained).digest != first);

  CHECK_THROWS_WITH(configured_model::parse_config("a: [1, 2", "broken.yaml"), Catch::Contains("broken.yaml is not YAML"));
  CHECK_THROWS_WITH(configured_model::parse_config("a: 1\n---\nb: 2\n", "two.yaml"),
                    Catch::Contains("two.yaml holds 2 YAML documents"));
  CHECK_THROWS_WITH(store.save(configured_model::Config{configured_model::parse_config("a: 1\na: 2\n", "x").root}),
                    Catch::Contains("repeats the key 'a'"));
}

TEST_CASE("Canonical YAML keeps what a reader would see and refuses what it cannot bound") {
  using configured_model::canonical_yaml;
  using configured_model::parse_config;
  // Quoting style is not meaning: `a` and "a" are one key.
  CHECK_THROWS_WITH(canonical_yaml(parse_config("a: 1\n\"a\": 2\n", "x").root), Catch::Contains("repeats the key 'a'"));
  // Explicit tags are meaning: kept, and they survive a round trip.
  const std::string tagged = canonical_yaml(parse_config("zip: !!str 007\nref: !Ref x\n", "x").root);
  CHECK(tagged.find("!<tag:yaml.org,2002:str> 007") != std::string::npos);
  CHECK(tagged != canonical_yaml(parse_config("zip: 007\nref: !Ref x\n", "x").root));
  CHECK(canonical_yaml(parse_config(tagged, "x").root) == tagged);
  // Aliases are expanded; one inside its own anchor, or a few that expand
  // to billions of nodes, are refused rather than followed.
  CHECK(canonical_yaml(parse_config("base: &b {lr: 1}\nrun: *b\n", "x").root) == "base:\n  lr: 1\nrun:\n  lr: 1\n");
  CHECK_THROWS_WITH(canonical_yaml(parse_config("a: &x [*x]\n", "x").root), Catch::Contains("deeper than 128 levels"));
  std::string laughs = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string previous = "*l" + std::to_string(i - 1);
    laughs += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [" + previous;
    for (int k = 1; k < 10; ++k) laughs += ", " + previous;
    laughs += "]\n";
  }
  CHECK(laughs.size() < 1024);
  CHECK_THROWS_WITH(canonical_yaml(parse_config(laughs, "x").root), Catch::Contains("more than 1000000 nodes"));
  // Nesting: past yaml-cpp's own limit the parse refuses it; below that,
  // past 128 levels, the canonical form does; neither recurses unbounded.
  const auto nested = [](int levels) { return "a: " + std::string(levels, '[') + std::string(levels, ']') + "\n"; };
  CHECK_THROWS_AS(parse_config(nested(100000), "deep.yaml"), amphora::InvalidArgument);
  CHECK_THROWS_WITH(canonical_yaml(parse_config(nested(300), "x").root), Catch::Contains("deeper than 128 levels"));
  CHECK(canonical_yaml(parse_config(nested(100), "x").root).size() > 100);
  // A Config is a value: a copy changed leaves the original alone.
  const Model a = sample();
  Model b = a;
  b.config.root["seed"] = 8;
  CHECK(a.config.root["seed"].as<int>() == 7);
  b = a;
  CHECK(b.config.root["seed"].as<int>() == 7);
  b.config.root["seed"] = 9;
  CHECK(a.config.root["seed"].as<int>() == 7);
}

TEST_CASE("With the plugin the command line shows, verifies, exports and imports; without it the model is refused by name") {
  Scratch dir;
  const fs::path store_dir = dir.path / "store";
  auto store = amphora::Store::open(store_dir, {.create = true});
  const auto saved = store.save(sample(), {.name = "classifier"});

  auto registry = amphora::Registry::with_defaults();
  const auto info = registry->load_plugin(kPlugin);
  CHECK(info.name == "amphora.configured_model");
  CHECK(info.materializers ==
        std::vector<std::string>{"configured_model.config", "configured_model.log_entry", "configured_model.model"});
  CHECK(info.formats == std::vector<std::string>{".yaml"});

  const std::string with = "--plugin '" + kPlugin + "' ";
  const auto shown = run_cli(store_dir, with + "show classifier --json");
  REQUIRE(shown.status == 0);
  const auto json = nlohmann::json::parse(shown.output);
  CHECK(json["registered"] == true);
  CHECK(json["children"].size() == 3);
  CHECK(run_cli(store_dir, with + "verify classifier").status == 0);
  const auto exported = run_cli(store_dir, with + "export classifier '" + (dir.path / "out").string() + "'");
  CHECK(exported.status == 0);
  CHECK(fs::exists(dir.path / "out" / "config.yaml"));
  CHECK(fs::exists(dir.path / "out" / "weights"));

  // A .yaml file imports as a configuration and exports canonical.
  std::ofstream(dir.path / "run.yaml") << kSameConfig;
  const auto imported = run_cli(store_dir, with + "import '" + (dir.path / "run.yaml").string() + "' --name run");
  CHECK(imported.status == 0);
  CHECK(store.load<configured_model::Config>("run") == sample().config);
  CHECK(store.resolve("run") == store.open_artifact("classifier").open_child("config").digest());
  std::ofstream(dir.path / "bad.yaml") << "a: [1, 2\n";
  const auto refused = run_cli(store_dir, with + "import '" + (dir.path / "bad.yaml").string() + "' --name bad");
  CHECK(refused.status != 0);
  CHECK(refused.output.find("bad.yaml is not YAML") != std::string::npos);

  // Python, without the plugin: the model is a declared struct and loads as
  // a dict; its configuration needs a reader registered for its name.
  const std::string python =
      "import sys; sys.path.insert(0, '" AMPHORA_PYTHON_DIR "'); import amphora_reader as r, numpy as np\n"
      "r.register_reader('configured_model.config', lambda a, _: a.read('config.yaml').decode())\n"
      "m = r.load(sys.argv[1], sys.argv[2])\n"
      "assert list(m) == ['config', 'weights', 'training_log'], list(m)\n"
      "assert m['config'].startswith('model:\\n'), m['config']\n"
      "assert m['weights']['layer1.weight'].tolist() == [[0.5, -1], [2, 0.25], [8, -3]]\n"
      "assert m['weights']['head.weight'].dtype == np.float64\n"
      "assert [e['step'] for e in m['training_log']] == [0, 100, 200], m['training_log']\n"
      "assert m['training_log'][2]['learning_rate'] == 5e-4\n"
      "r.unregister_reader('configured_model.config')\n"
      "try:\n    r.load(sys.argv[1], sys.argv[2]); sys.exit('loaded without a reader')\n"
      "except r.Unsupported as e:\n    assert 'configured_model.config' in str(e), e\n";
  const auto read_back = plugin_test::run_python(dir.path, python, "'" + store_dir.string() + "' " + saved.digest.str());
  CHECK(read_back.output == "");
  CHECK(read_back.status == 0);

  // Intact bytes that are not YAML (saved by a forged writer, so every hash
  // matches): only the plugin's own check finds them.
  amphora::MaterializerEntry forged;
  forged.name = "configured_model.config";
  forged.version = 1;
  forged.save = [](const void*, amphora::ArtifactWriter& out) {
    const std::string unclosed = "a: [1, 2\n";
    out.write_file("config.yaml", std::as_bytes(std::span(unclosed)));
    out.meta()["keys"] = nlohmann::json::array({"a"});
  };
  forged.load = [](const amphora::ArtifactReader&) { return std::shared_ptr<void>(); };
  const auto lie = store.save_erased(forged, &forged, {}).digest;
  CHECK(run_cli(store_dir, "verify " + lie.str()).status == 0);  // hashes alone: intact
  const auto damaged = run_cli(store_dir, with + "verify " + lie.str());
  CHECK(damaged.status == 4);
  CHECK(damaged.output.find("'config.yaml' is not YAML") != std::string::npos);

  const auto bare = run_cli(store_dir, "show classifier");
  CHECK(bare.status == 0);
  CHECK(bare.output.find("configured_model.model (format 1)  [not registered") != std::string::npos);
  CHECK_THROWS_WITH(amphora::Store::open(store_dir).load_erased(saved.digest), Catch::Contains("materializer 'configured_model.model'"));
}
