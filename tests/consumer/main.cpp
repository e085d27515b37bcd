// Uses an installed Amphora as the README shows: the API tour and a
// materializer of the user's own, built with -Wall -Wextra -Werror.

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/tensor.hpp>
#include <amphora/version.hpp>

#include <iostream>
#include <string_view>
#include <vector>

struct BBoxes {
  std::vector<float> xyxy;
};

template <>
struct amphora::materializer<BBoxes> {
  static constexpr std::string_view name = "myorg.bboxes";
  static constexpr int version = 1;
  static void save(const BBoxes& b, amphora::ArtifactWriter& out) {
    out.write_file("boxes.f32", amphora::ConstBytes(reinterpret_cast<const std::byte*>(b.xyxy.data()),
                                                    b.xyxy.size() * sizeof(float)));
    out.meta()["count"] = b.xyxy.size() / 4;
  }
  static BBoxes load(const amphora::ArtifactReader& in) {
    auto bytes = in.map("boxes.f32");
    auto* f = reinterpret_cast<const float*>(bytes->data());
    return {std::vector<float>(f, f + bytes->size() / sizeof(float))};
  }
};

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  if (std::string_view(AMPHORA_VERSION_STRING) != EXPECTED_VERSION) {
    std::cerr << "version.hpp says " << AMPHORA_VERSION_STRING << ", the package " << EXPECTED_VERSION << "\n";
    return 1;
  }
  auto registry = std::make_shared<amphora::Registry>();
  amphora::register_builtins(*registry);
  registry->add<BBoxes>();
  auto store = amphora::Store::open(argv[1], {.create = true, .registry = registry});

  auto emb = amphora::Tensor::zeros(amphora::DType::float32, {100, 8});
  emb.mutable_values<float>()[0] = 1.5f;
  amphora::SaveResult saved = store.save(emb, {.name = "consumer"});
  store.save(emb, {.name = "consumer", .options = amphora::TensorOptions{.compression = amphora::Compression::lz4}});
  store.save(BBoxes{{0, 0, 1, 1, 2, 2, 3, 3}}, {.name = "boxes"});

  amphora::Tensor back = store.load<amphora::Tensor>("consumer@1");
  amphora::Tensor rows = amphora::load_tensor_rows(store.open_artifact("consumer@2"), 10, 20);
  BBoxes boxes = store.load<BBoxes>("boxes");
  store.remove("consumer", 2);
  amphora::GcReport gc = store.gc();
  amphora::VerifyReport report = store.verify();
  if (!back.bit_equal(emb) || rows.shape()[0] != 10 || boxes.xyxy.size() != 8 || !report.ok()) return 1;

  auto durable = amphora::Store::open(argv[1], {.durable = true});
  if (durable.names().size() != 2) return 1;
  std::cout << "consumer ok " << saved.digest.str() << " (gc removed " << gc.removed.size() << ")\n";
  return 0;
}
