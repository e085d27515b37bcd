// Menpo's bundle: a model (name, config, a 256x256 float32 weights tensor)
// and 50 images, each a uint8 tensor with its landmarks, the weights
// referenced twice. Saved and loaded with only AMPHORA_MATERIALIZE lines.
//
//   menpo_bundle save STORE   saves it as "menpo"
//   menpo_bundle load STORE   loads "menpo" (in a fresh process) and compares every value
#include <amphora/amphora.hpp>
#include <amphora/describe.hpp>

#include <array>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace menpo {

struct Model {
  std::string name;
  std::map<std::string, std::string> config;
  amphora::Tensor weights;
  bool operator==(const Model&) const = default;
};
AMPHORA_MATERIALIZE(Model, "menpo.model", 1, name, config, weights)

struct Image {
  amphora::Tensor pixels;
  std::vector<std::array<float, 2>> landmarks;
  bool operator==(const Image&) const = default;
};
AMPHORA_MATERIALIZE(Image, "menpo.image", 1, pixels, landmarks)

struct Bundle {
  Model model;
  std::vector<Image> images;
  amphora::Tensor initial_weights;  // the same weights, referenced a second time
  bool operator==(const Bundle&) const = default;
};
AMPHORA_MATERIALIZE(Bundle, "menpo.bundle", 1, model, images, initial_weights)

}  // namespace menpo

namespace {

// The values check.py expects: keep the two in step.
menpo::Bundle make_bundle() {
  std::vector<float> w(256 * 256);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 1000) - 500) / 8.0f;
  menpo::Bundle bundle;
  bundle.model = {"aam", {{"optimizer", "adam"}, {"scales", "0.5,1.0"}}, amphora::Tensor::from_values<float>({256, 256}, w)};
  bundle.initial_weights = bundle.model.weights;
  for (int k = 0; k < 50; ++k) {
    std::vector<std::uint8_t> px(128 * 128);
    for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>((k * 37 + static_cast<int>(i) * 11) % 256);
    menpo::Image image{amphora::Tensor::from_values<std::uint8_t>({128, 128}, px), {}};
    for (int j = 0; j < 68; ++j)
      image.landmarks.push_back({static_cast<float>(k) + 0.5f * static_cast<float>(j),
                                 2.0f * static_cast<float>(k) - 0.25f * static_cast<float>(j)});
    bundle.images.push_back(std::move(image));
  }
  return bundle;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: menpo_bundle save|load STORE\n";
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "save") {
      auto store = amphora::Store::open(argv[2], {.create = true});
      const auto saved = store.save(make_bundle(), {.name = "menpo"});
      std::cout << "saved menpo as " << saved.digest.str() << "\n";
      return 0;
    }
    if (mode == "load") {
      auto store = amphora::Store::open(argv[2]);
      const auto loaded = store.load<menpo::Bundle>("menpo");
      if (!(loaded == make_bundle())) {
        std::cerr << "the loaded bundle differs from the saved one\n";
        return 1;
      }
      // The weights are one artifact wherever they appear.
      auto bundle = store.open_artifact("menpo");
      const auto once = bundle.open_child("model").open_child("weights").digest();
      if (!(bundle.open_child("initial_weights").digest() == once)) {
        std::cerr << "the shared weights are stored twice\n";
        return 1;
      }
      if (bundle.open_child("images").manifest().materializer != "amphora.record_list") {
        std::cerr << "the images are not one record list\n";
        return 1;
      }
      std::cout << "menpo loads equal: " << loaded.images.size() << " images, weights stored once\n";
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "menpo_bundle: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: menpo_bundle save|load STORE\n";
  return 2;
}
