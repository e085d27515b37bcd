// The detection plugin: a dataset round-trips through the C++ API; through
// the `amphora` command with the plugin it is shown, verified by the
// plugin's own checks (a count that disagrees with the records is found)
// and exported; without the plugin it is shown and refused by name.

#define CATCH_CONFIG_MAIN
#include <amphora/amphora.hpp>
#include <amphora/json.hpp>
#include <amphora/plugin.hpp>
#include <amphora_detection/detection.hpp>
#include <catch2/catch.hpp>

#include "plugin_test.hpp"

#include <fstream>

namespace fs = std::filesystem;
using plugin_test::object_dir;
using plugin_test::kPlugin;
using plugin_test::run_cli;
using plugin_test::Scratch;

namespace {

detection::Dataset sample() {
  detection::Dataset d;
  d.label_names = {"person", "car", "dog"};
  d.records.push_back({"images/0001.jpg", 640, 480, {{10, 20, 100, 200}, {300, 40, 50, 60}}, {0, 1}, {15000.5f, 2400}, {0, 0}});
  d.records.push_back({"images/0002.jpg", 800, 600, {}, {}, {}, {}});
  d.records.push_back({"images/0003.jpg", 1024, 768, {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}}, {0, 2, 0}, {10, 40, 99}, {1, 0, 0}});
  return d;
}

}  // namespace

TEST_CASE("A detection dataset round-trips and counts its boxes per label") {
  Scratch dir;
  auto store = amphora::Store::open(dir.path / "store", {.create = true});
  const detection::Dataset d = sample();
  auto saved = store.save(d, {.name = "coco-mini"});
  CHECK(store.load<detection::Dataset>("coco-mini") == d);
  auto reader = store.open_artifact(saved.digest.str());
  CHECK(reader.meta()["boxes_per_label"] == nlohmann::json({{"person", 3}, {"car", 1}, {"dog", 1}}));
  CHECK(reader.meta()["records"] == 3);
  CHECK(reader.open_child("records").manifest().materializer == "amphora.record_list");
  // Equal datasets are one artifact.
  CHECK(store.save(sample()).digest == saved.digest);

  detection::Dataset bad = sample();
  bad.records[2].labels[1] = 7;
  CHECK_THROWS_WITH(store.save(bad), Catch::Contains("record 2 (images/0003.jpg), object 1: label 7 is not one of the 3"));
  bad = sample();
  bad.records[0].areas.pop_back();
  CHECK_THROWS_AS(store.save(bad), amphora::InvalidArgument);
}

TEST_CASE("The plugin lets the command line verify and export a dataset; without it the dataset is shown, not loaded") {
  Scratch dir;
  const fs::path store_dir = dir.path / "store";
  auto store = amphora::Store::open(store_dir, {.create = true});
  auto saved = store.save(sample(), {.name = "coco-mini"});

  auto registry = amphora::Registry::with_defaults();
  auto info = registry->load_plugin(kPlugin);
  CHECK(info.name == "amphora.detection");
  CHECK(info.materializers == std::vector<std::string>{"detection.dataset"});

  const std::string with = "--plugin '" + kPlugin + "' ";
  auto shown = run_cli(store_dir, with + "show coco-mini --json");
  REQUIRE(shown.status == 0);
  auto json = nlohmann::json::parse(shown.output);
  CHECK(json["registered"] == true);
  CHECK(json["meta"]["boxes_per_label"]["person"] == 3);
  CHECK(run_cli(store_dir, with + "verify").status == 0);
  auto exported = run_cli(store_dir, with + "export coco-mini '" + (dir.path / "out").string() + "'");
  CHECK(exported.status == 0);
  CHECK(fs::exists(dir.path / "out" / "records"));

  // An artifact whose counts disagree with its records: intact bytes, wrong
  // meaning, found only by the plugin's check.
  auto manifest = nlohmann::json::parse(std::ifstream(object_dir(store_dir, saved.digest) / "manifest.json"));
  manifest["meta"]["boxes_per_label"]["dog"] = 5;
  const std::string text = amphora::canonical_json(manifest);
  const amphora::Digest lie = amphora::json_digest(manifest);
  fs::create_directories(object_dir(store_dir, lie));
  std::ofstream(object_dir(store_dir, lie) / "manifest.json", std::ios::binary) << text;
  auto checked = run_cli(store_dir, with + "verify " + lie.str());
  CHECK(checked.status == 4);
  CHECK(checked.output.find("boxes_per_label does not count the boxes the records hold") != std::string::npos);

  auto bare = run_cli(store_dir, "show coco-mini");
  CHECK(bare.status == 0);
  CHECK(bare.output.find("detection.dataset (format 1)  [not registered") != std::string::npos);
  CHECK_THROWS_WITH(amphora::Store::open(store_dir).load_erased("coco-mini"),
                    Catch::Contains("materializer 'detection.dataset'"));
}
