// IceVision's detection records, bounding boxes as std::array<float, 4>,
// stored columnar with no wrapper struct.
//
//   icevision_records save STORE   saves 200 records as "detections"
//   icevision_records load STORE   loads them (in a fresh process) and compares every value
#include <amphora/amphora.hpp>
#include <amphora/describe.hpp>

#include <array>
#include <iostream>
#include <string>
#include <vector>

namespace icevision {

struct Record {
  std::string filepath;
  std::int64_t image_id = 0;
  std::int32_t width = 0, height = 0;
  std::vector<std::array<float, 4>> bboxes;
  std::vector<std::string> labels;
  std::vector<bool> iscrowd;
  bool operator==(const Record&) const = default;
};
AMPHORA_MATERIALIZE(Record, "icevision.record", 1, filepath, image_id, width, height, bboxes, labels, iscrowd)

}  // namespace icevision

namespace {

// The values check.py expects: keep the two in step.
std::vector<icevision::Record> make_records() {
  std::vector<icevision::Record> records;
  for (int i = 0; i < 200; ++i) {
    std::string name = std::to_string(i);
    icevision::Record r{"images/" + std::string(5 - name.size(), '0') + name + ".jpg", 1000 + i, 640 - i % 7, 480 + i % 5,
                        {}, {}, {}};
    for (int j = 0; j < i % 4; ++j) {
      const float x = static_cast<float>(i), y = static_cast<float>(j);
      r.bboxes.push_back({x, y, x + 10.5f, y + 20.25f});
      r.labels.push_back("cls" + std::to_string((i + j) % 3));
      r.iscrowd.push_back((i + j) % 2 == 0);
    }
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: icevision_records save|load STORE\n";
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "save") {
      auto store = amphora::Store::open(argv[2], {.create = true});
      std::cout << "saved detections as " << store.save(make_records(), {.name = "detections"}).digest.str() << "\n";
      return 0;
    }
    if (mode == "load") {
      auto store = amphora::Store::open(argv[2]);
      if (store.load<std::vector<icevision::Record>>("detections") != make_records()) {
        std::cerr << "the loaded records differ from the saved ones\n";
        return 1;
      }
      auto reader = store.open_artifact("detections");
      if (reader.manifest().materializer != "amphora.record_list" || !reader.children().empty()) {
        std::cerr << "the records are not stored columnar\n";
        return 1;
      }
      auto boxes = reader.read_array("bboxes.values.npy", amphora::DType::float32, 2);
      std::cout << "detections load equal: " << boxes.shape()[0] << " boxes in one " << boxes.shape()[0] << "x"
                << boxes.shape()[1] << " column\n";
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "icevision_records: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: icevision_records save|load STORE\n";
  return 2;
}
