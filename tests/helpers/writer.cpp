// A separate writer process for the multi-process tests:
//   amphora_test_writer digest STORE SEED ROWS COLS   save once, print the digest
//   amphora_test_writer named STORE NAME SEED ROWS COLS  the same, under NAME
//   amphora_test_writer many STORE NAME COUNT SEED    save COUNT small tensors under NAME
//   amphora_test_writer loop STORE NAME MIB           save MIB-sized tensors until killed

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/tensor.hpp>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <string>

namespace {

amphora::Store open_store(const char* dir) {
  auto registry = std::make_shared<amphora::Registry>();
  amphora::register_builtins(*registry);
  return amphora::Store::open(dir, {.create = true, .registry = registry});
}

amphora::Tensor random_floats(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  auto t = amphora::Tensor::zeros(amphora::DType::float32, {rows, cols});
  std::mt19937_64 rng(seed);
  auto v = t.mutable_values<float>();
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : v) x = dist(rng);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "digest" && argc == 6) {
      auto store = open_store(argv[2]);
      auto t = random_floats(std::stoll(argv[4]), std::stoll(argv[5]), std::stoull(argv[3]));
      std::cout << store.save(t).digest.str() << std::endl;
      return 0;
    }
    if (mode == "named" && argc == 7) {
      auto store = open_store(argv[2]);
      auto t = random_floats(std::stoll(argv[5]), std::stoll(argv[6]), std::stoull(argv[4]));
      auto r = store.save(t, {.name = argv[3], .compression = amphora::Compression::none});
      std::cout << r.digest.str() << " " << (r.created ? "created" : "existing") << std::endl;
      return 0;
    }
    if (mode == "many" && argc == 6) {
      auto store = open_store(argv[2]);
      int count = std::stoi(argv[4]);
      std::uint64_t seed = std::stoull(argv[5]);
      for (int i = 0; i < count; ++i) {
        auto t = random_floats(8, 8, seed * 100000 + static_cast<std::uint64_t>(i));
        auto r = store.save(t, {.name = argv[3], .compression = i % 2 ? amphora::Compression::lz4
                                                                        : amphora::Compression::none});
        std::cout << r.version << " " << r.digest.str() << "\n";
      }
      return 0;
    }
    if (mode == "loop" && argc == 5) {
      auto store = open_store(argv[2]);
      std::int64_t mib = std::stoll(argv[4]);
      auto base = random_floats(mib * 1024, 256, 42);
      std::mt19937_64 rng(std::random_device{}());
      for (std::uint64_t i = 0;; ++i) {
        auto t = amphora::Tensor::zeros(base.dtype(), base.shape());
        std::memcpy(t.mutable_data(), base.data(), base.nbytes());
        t.mutable_values<float>()[rng() % t.num_elements()] = static_cast<float>(i);  // new content each time
        store.save(t, {.name = argv[3], .compression = i % 2 ? amphora::Compression::lz4 : amphora::Compression::none});
        std::cout << "saved " << i << std::endl;
      }
    }
    std::cerr << "usage: amphora_test_writer digest|many|loop ...\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "amphora_test_writer: " << e.what() << "\n";
    return 1;
  }
}
