// A separate writer process for the multi-process tests:
//   amphora_test_writer digest STORE SEED ROWS COLS   save once, print the digest
//   amphora_test_writer named STORE NAME SEED ROWS COLS  the same, under NAME
//   amphora_test_writer many STORE NAME COUNT SEED    save COUNT small tensors under NAME
//   amphora_test_writer loop STORE NAME MIB           save MIB-sized tensors until killed
//   amphora_test_writer example STORE     save docs/FORMAT.md's worked composite, print its digest
//   amphora_test_writer composites STORE NAME COUNT SEED  save COUNT composites (three tensor
//       children, one shared by every save) under NAME; prints "VERSION DIGEST" per save, or
//       "collected" when gc took a child before its parent was published

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/everyday.hpp>
#include <amphora/tensor.hpp>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <string>

namespace {

amphora::Store open_store(const char* dir) {
  return amphora::Store::open(dir, {.create = true});
}

amphora::Tensor random_floats(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  auto t = amphora::Tensor::zeros(amphora::DType::float32, {rows, cols});
  std::mt19937_64 rng(seed);
  auto v = t.mutable_values<float>();
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : v) x = dist(rng);
  return t;
}

// A composite whose children are saved before it is published.
struct Triple {
  amphora::Tensor shared, own, other;
};

}  // namespace

template <>
struct amphora::materializer<Triple> {
  static constexpr std::string_view name = "test.triple";
  static constexpr int version = 1;
  static void save(const Triple& t, ArtifactWriter& out) {
    out.save_child("shared", t.shared);
    out.save_child("own", t.own);
    out.save_child("other", t.other);
  }
  static Triple load(const ArtifactReader& in) {
    return {in.load_child<Tensor>("shared"), in.load_child<Tensor>("own"), in.load_child<Tensor>("other")};
  }
};

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
      auto r = store.save(t, {.name = argv[3], .options = amphora::TensorOptions{amphora::Compression::none}});
      std::cout << r.digest.str() << " " << (r.created ? "created" : "existing") << std::endl;
      return 0;
    }
    if (mode == "many" && argc == 6) {
      auto store = open_store(argv[2]);
      int count = std::stoi(argv[4]);
      std::uint64_t seed = std::stoull(argv[5]);
      for (int i = 0; i < count; ++i) {
        auto t = random_floats(8, 8, seed * 100000 + static_cast<std::uint64_t>(i));
        auto r = store.save(t, {.name = argv[3], .options = amphora::TensorOptions{i % 2 ? amphora::Compression::lz4
                                                                        : amphora::Compression::none}});
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
        store.save(t, {.name = argv[3], .options = amphora::TensorOptions{i % 2 ? amphora::Compression::lz4 : amphora::Compression::none}});
        std::cout << "saved " << i << std::endl;
      }
    }
    if (mode == "example" && argc == 3) {
      // Two keys holding equal vectors: one child artifact, listed twice.
      std::map<std::string, std::vector<std::vector<float>>> value = {{"a", {{1.5f, 2.5f}}}, {"b", {{1.5f, 2.5f}}}};
      std::cout << open_store(argv[2]).save(value).digest.str() << std::endl;
      return 0;
    }
    if (mode == "composites" && argc == 6) {
      auto store = open_store(argv[2]);
      int count = std::stoi(argv[4]);
      std::uint64_t seed = std::stoull(argv[5]);
      auto shared = random_floats(16, 16, 1);
      for (int i = 0; i < count; ++i) {
        std::uint64_t s = seed * 100000 + static_cast<std::uint64_t>(i);
        Triple t{shared, random_floats(32, 8, s), random_floats(4, 4, s % 5)};  // `other` repeats across saves
        try {
          auto r = store.save(t, {.name = argv[3]});
          std::cout << r.version << " " << r.digest.str() << "\n";
        } catch (const amphora::IoError& e) {
          if (std::string(e.what()).find("was collected") == std::string::npos) throw;
          std::cout << "collected\n";
        }
      }
      return 0;
    }
    std::cerr << "usage: amphora_test_writer digest|named|many|loop|composites ...\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "amphora_test_writer: " << e.what() << "\n";
    return 1;
  }
}
