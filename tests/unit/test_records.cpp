// A std::vector of a declared struct is a record list stored column by column.

#include "support.hpp"

#include <amphora/record_list.hpp>
#include <catch2/catch.hpp>

#include <cstring>

using namespace amphora;

namespace detect {

struct Camera {
  std::string model;
  std::int32_t iso = 0;
};
AMPHORA_MATERIALIZE(Camera, "detect.camera", 1, model, iso)

struct Box {
  float x = 0, y = 0, w = 0, h = 0;
  bool operator==(const Box&) const = default;
};
AMPHORA_MATERIALIZE(Box, "detect.box", 1, x, y, w, h)

struct Record {
  std::string path;
  std::int32_t width = 0, height = 0;
  std::vector<float> boxes;  // 4 per box
  std::vector<std::string> labels;
  std::optional<double> score;
  Camera camera;
  std::vector<Box> regions;
  nlohmann::json extra;
  bool operator==(const Record& o) const {
    return path == o.path && width == o.width && height == o.height && boxes == o.boxes && labels == o.labels &&
           score == o.score && camera.model == o.camera.model && camera.iso == o.camera.iso && regions == o.regions &&
           extra == o.extra;
  }
};
AMPHORA_MATERIALIZE(Record, "detect.record", 1, path, width, height, boxes, labels, score, camera, regions, extra)

}  // namespace detect

namespace {

std::vector<detect::Record> make_records(std::size_t n) {
  std::vector<detect::Record> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto& r = out[i];
    r.path = "images/" + std::to_string(i) + ".jpg";
    r.width = static_cast<std::int32_t>(640 + i % 7);
    r.height = 480;
    for (std::size_t b = 0; b < i % 4; ++b) {
      r.boxes.insert(r.boxes.end(), {float(b), float(i), 10.5f, 20.25f});
      r.labels.push_back(b % 2 ? "cat" : "dog");
      r.regions.push_back({float(b), 1, 2, 3});
    }
    if (i % 3) r.score = 0.5 + static_cast<double>(i) / 1000;
    r.camera = {i % 2 ? "nikon" : "", static_cast<std::int32_t>(100 * i)};
    r.extra = i % 5 ? nlohmann::json{{"i", i}} : nlohmann::json();
  }
  return out;
}

}  // namespace

TEST_CASE("A vector of declared structs is stored column by column", "[records]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto records = make_records(1000);
  auto saved = store.save(records, {.name = "detections"});
  CHECK(store.artifacts().size() == 1);  // one artifact, not one per record
  ArtifactReader in = store.open_artifact("detections");
  CHECK(in.manifest().materializer == "amphora.record_list");
  CHECK(in.meta()["element"] == "detect.record");
  CHECK(in.meta()["count"] == 1000);
  for (const char* column : {"path.offsets.npy", "path.bytes", "width.npy", "boxes.offsets.npy", "boxes.values.npy",
                             "labels.offsets.npy", "labels.values.offsets.npy", "labels.values.bytes",
                             "score.valid.npy", "score.npy", "camera/model.bytes", "camera/iso.npy",
                             "regions.offsets.npy", "regions.values/x.npy", "extra.json.bytes"})
    CHECK(in.has_file(column));

  auto back = store.load<std::vector<detect::Record>>("detections");
  REQUIRE(back.size() == records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    INFO(i);
    CHECK(back[i] == records[i]);
  }
  // One record without the others.
  auto list = RecordList<detect::Record>::open(in);
  CHECK(list.size() == 1000);
  CHECK(list[777] == records[777]);
  CHECK(list.at(3) == records[3]);
  CHECK_THROWS_AS(list.at(1000), InvalidArgument);
  CHECK(store.verify("detections").ok());
  // An empty list round-trips too.
  CHECK(store.load<std::vector<detect::Record>>(store.save(std::vector<detect::Record>{}).digest).empty());
  (void)saved;
}

TEST_CASE("Damaged record columns are named", "[records][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto saved = store.save(make_records(20));
  auto art = test::object_dir(dir / "store", saved.digest);
  ArtifactReader in = store.open_artifact(saved.digest);
  auto open = [&] { return RecordList<detect::Record>::open(in); };

  SECTION("decreasing offsets") {
    auto offsets = art / "boxes.offsets.npy";
    std::int64_t big = 1000;
    std::fstream f(offsets, std::ios::in | std::ios::out | std::ios::binary);
    const auto data_start = std::filesystem::file_size(offsets) - 21 * 8;  // 20 records, 21 offsets
    f.seekp(static_cast<std::streamoff>(data_start + 8 * 3));
    f.write(reinterpret_cast<const char*>(&big), 8);
    f.close();
    CHECK_THROWS_AS(open(), CorruptData);
    CHECK_THROWS_WITH(open(), Catch::Contains("column 'boxes.offsets.npy'") && Catch::Contains("is below offset 3"));
    CHECK_FALSE(store.verify(saved.digest.str()).ok());
  }
  SECTION("a short column") {
    std::filesystem::resize_file(art / "width.npy", std::filesystem::file_size(art / "width.npy") - 4);
    CHECK_THROWS_AS(open(), CorruptData);
  }
  SECTION("records of another struct") {
    CHECK_THROWS_AS(RecordList<detect::Box>::open(in), TypeMismatch);
    CHECK_THROWS_WITH(RecordList<detect::Box>::open(in), Catch::Contains("holds records of 'detect.record', not of 'detect.box'"));
  }
}
