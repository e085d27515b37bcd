// The README's composite and custom-materializer examples, compiled and run:
//   amphora_composite_demo STORE_DIR

#include <amphora/amphora.hpp>
#include <amphora/describe.hpp>
#include <amphora/record_list.hpp>
#include <amphora/tensor.hpp>

#include <array>
#include <iostream>

namespace demo {

struct Model {
  nlohmann::json config;
  std::map<std::string, amphora::Tensor> weights;
  std::vector<std::string> vocab;
  double learning_rate = 0;
};
AMPHORA_MATERIALIZE(Model, "demo.model", 1, config, weights, vocab, learning_rate)

struct Detection {
  std::string path;
  std::int32_t width = 0, height = 0;
  std::vector<float> boxes;  // x, y, w, h per box
  std::vector<std::string> labels;
};
AMPHORA_MATERIALIZE(Detection, "demo.detection", 1, path, width, height, boxes, labels)

struct BoxedDetection {
  std::string filepath;
  std::vector<std::array<float, 4>> bboxes;  // one boxes x 4 float32 column for the whole list
  std::vector<std::string> labels;
};
AMPHORA_MATERIALIZE(BoxedDetection, "demo.boxed_detection", 1, filepath, bboxes, labels)

struct Image {
  amphora::Tensor pixels;  // a tensor column: per-row dtype and shape
  std::vector<std::array<float, 2>> landmarks;
};
AMPHORA_MATERIALIZE(Image, "demo.image", 1, pixels, landmarks)

struct Bundle {
  Model model;
  std::vector<Image> images;
};
AMPHORA_MATERIALIZE(Bundle, "demo.bundle", 1, model, images)

}  // namespace demo

struct Detections {
  std::vector<std::string> paths;
  std::vector<float> scores;
};

template <>
struct amphora::materializer<Detections> {
  static constexpr std::string_view name = "demo.detections";
  static constexpr int version = 1;
  static void save(const Detections& d, amphora::ArtifactWriter& out) {
    out.write_strings("paths", d.paths);
    out.write_array<float>("scores.npy", d.scores);
    out.meta()["count"] = d.paths.size();
  }
  static Detections load(const amphora::ArtifactReader& in) {
    auto count = in.meta<std::size_t>("count");
    amphora::StringsView paths = in.read_strings("paths");
    amphora::ArrayView scores = in.read_array("scores.npy", amphora::DType::float32, 1);
    if (paths.size() != count || scores.size() != count) throw amphora::CorruptData(in.label() + ": columns disagree");
    auto s = scores.values<float>();
    return {paths.to_vector(), {s.begin(), s.end()}};
  }
};

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: amphora_composite_demo STORE_DIR\n";
    return 2;
  }
  try {
    auto store = amphora::Store::open(argv[1], {.create = true});
    store.registry().add<Detections>();

    amphora::Tensor shared = amphora::Tensor::zeros(amphora::DType::float32, {256, 256});
    std::map<std::string, demo::Model> models;
    for (const char* which : {"small", "large"}) {
      demo::Model& m = models[which];
      m.config = {{"name", which}, {"layers", 4}};
      m.weights = {{"embedding", shared}, {"head", amphora::Tensor::zeros(amphora::DType::float32, {64})}};
      m.vocab = {"<pad>", "the", "a"};
      m.learning_rate = 3e-4;
    }
    auto saved = store.save(models, {.name = "models"});
    auto back = store.load<std::map<std::string, demo::Model>>("models");
    std::cout << "models@" << saved.version << " " << saved.digest.str() << ": " << back.size()
              << " models, the shared embedding stored once\n";

    std::vector<demo::Detection> records;
    for (int i = 0; i < 1000; ++i)
      records.push_back({"images/" + std::to_string(i) + ".jpg", 640, 480, {1, 2, 30, 40}, {"cat"}});
    store.save(records, {.name = "detections"});
    auto list = amphora::RecordList<demo::Detection>::open(store.open_artifact("detections"));
    std::cout << "detections: " << list.size() << " records; record 123 is " << list[123].path << "\n";

    std::vector<demo::BoxedDetection> boxed{{"a.jpg", {{1, 2, 3, 4}, {5, 6, 7, 8}}, {"cat", "dog"}}};
    store.save(boxed, {.name = "boxed"});
    std::cout << "boxed: " << store.load<std::vector<demo::BoxedDetection>>("boxed")[0].bboxes.size() << " boxes\n";

    demo::Bundle bundle{models["small"], {}};
    for (int i = 0; i < 3; ++i)
      bundle.images.push_back({amphora::Tensor::zeros(amphora::DType::uint8, {32, 32 + i}), {{1.5f, 2.5f}, {3.5f, 4.5f}}});
    store.save(bundle, {.name = "bundle"});
    std::cout << "bundle: " << store.load<demo::Bundle>("bundle").images.size() << " images\n";

    store.save(Detections{{"a.jpg", "b.jpg"}, {0.5f, 0.9f}}, {.name = "scores"});
    std::cout << "scores: " << store.load<Detections>("scores").paths.size() << " paths\n";
    return store.verify().ok() ? 0 : 1;
  } catch (const amphora::Error& e) {
    std::cerr << "amphora_composite_demo: " << e.what() << "\n";
    return 1;
  }
}
