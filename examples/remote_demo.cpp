// Two machines sharing a remote, in one program: a "workstation" store saves
// a model and pushes it; a "laptop" store pulls it by name and loads it. The
// remote here is a directory (file://, as on NFS or Lustre); an S3 bucket
// is the same with `s3://BUCKET/PREFIX` and an endpoint.
//   amphora_remote_demo WORK_DIR

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/everyday.hpp>
#include <amphora/tensor.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: amphora_remote_demo WORK_DIR\n";
    return 2;
  }
  const std::filesystem::path dir = std::filesystem::absolute(argv[1]);
  const std::string shared = "file://" + (dir / "shared").string();
  try {
    // The workstation: a model of two weight tensors, saved and pushed.
    auto workstation = amphora::Store::open(dir / "workstation", {.create = true});
    workstation.add_remote({.name = "team", .url = shared});
    std::map<std::string, amphora::Tensor> model;
    model.emplace("encoder", amphora::Tensor::zeros(amphora::DType::float32, {256, 64}));
    model.emplace("decoder", amphora::Tensor::zeros(amphora::DType::float32, {64, 256}));
    auto w = model.at("encoder").mutable_values<float>();
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 97) / 97.0f;
    const auto saved = workstation.save(model, {.name = "model"});
    const auto pushed = workstation.push({"model"});
    std::cout << "pushed " << pushed.artifacts_copied << " artifacts (" << pushed.bytes_copied << " bytes) to "
              << pushed.location << "\n";

    // The laptop: pulls the model by name, then loads it from its own store.
    auto laptop = amphora::Store::open(dir / "laptop", {.create = true});
    laptop.add_remote({.name = "team", .url = shared});
    const auto pulled = laptop.pull({"model"}, {.jobs = 4});
    const auto loaded = laptop.load<std::map<std::string, amphora::Tensor>>("model");
    std::cout << "pulled " << pulled.artifacts_copied << " artifacts; model@" << pulled.named.at(0).version << " is "
              << laptop.resolve("model").short_str() << ", encoder[96] = " << loaded.at("encoder").values<float>()[96]
              << "\n";
    if (laptop.resolve("model") != saved.digest || loaded.at("encoder").values<float>()[96] != w[96]) {
      std::cerr << "the laptop's copy differs from the workstation's\n";
      return 1;
    }
    // Nothing is sent twice.
    std::cout << "pushed again: " << workstation.push().artifacts_copied << " artifacts copied\n";
    return laptop.verify().ok() ? 0 : 1;
  } catch (const amphora::Error& e) {
    std::cerr << "amphora_remote_demo: " << e.what() << "\n";
    return 1;
  }
}
