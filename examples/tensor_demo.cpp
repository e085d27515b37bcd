// Saves, lists, loads and verifies tensors: the walking skeleton end to end.
//   amphora_tensor_demo STORE_DIR

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/tensor.hpp>

#include <cmath>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: amphora_tensor_demo STORE_DIR\n";
    return 2;
  }
  try {
    auto store = amphora::Store::open(argv[1], {.create = true});

    // A float32 embedding table and a compressible int32 histogram.
    auto embeddings = amphora::Tensor::zeros(amphora::DType::float32, {1000, 64});
    auto e = embeddings.mutable_values<float>();
    for (std::size_t i = 0; i < e.size(); ++i) e[i] = std::sin(static_cast<float>(i) * 0.01f);
    auto counts = amphora::Tensor::zeros(amphora::DType::int32, {4096, 256});
    auto c = counts.mutable_values<std::int32_t>();
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = static_cast<std::int32_t>(i / 1024);

    auto first = store.save(embeddings, {.name = "embeddings", .options = amphora::TensorOptions{.compression = amphora::Compression::none}});
    auto second = store.save(counts, {.name = "counts", .options = amphora::TensorOptions{.compression = amphora::Compression::lz4}});
    // zstd: smaller than LZ4 (here about a sixth of its bytes), a little slower to save.
    auto small = store.save(counts, {.name = "counts", .options = amphora::TensorOptions{.compression = amphora::Compression::zstd}});
    auto again = store.save(embeddings, {.name = "embeddings"});  // same content: no new artifact
    std::cout << "saved embeddings@" << first.version << " " << first.digest.short_str() << "\n"
              << "saved counts@" << second.version << " " << second.digest.short_str() << " (lz4, "
              << store.open_artifact(second.digest.str()).manifest().payload_bytes() << " bytes)\n"
              << "saved counts@" << small.version << " " << small.digest.short_str() << " (zstd, "
              << store.open_artifact(small.digest.str()).manifest().payload_bytes() << " bytes)\n"
              << "saved embeddings@" << again.version << " " << again.digest.short_str()
              << (again.created ? "" : " (deduplicated)") << "\n";

    auto loaded = store.load<amphora::Tensor>("embeddings@1");  // zero-copy mmap
    auto rows = amphora::load_tensor_rows(store.open_artifact("counts@1"), 2048, 2056);  // touches one chunk
    auto zrows = amphora::load_tensor_rows(store.open_artifact("counts@2"), 2048, 2056);
    std::cout << "loaded embeddings: " << loaded.shape()[0] << "x" << loaded.shape()[1] << ", identical: "
              << (loaded.bit_equal(embeddings) ? "yes" : "NO") << "\n"
              << "rows 2048..2056 of counts: identical: "
              << (rows.bit_equal(counts.rows(2048, 2056)) && zrows.bit_equal(counts.rows(2048, 2056)) ? "yes" : "NO")
              << "\n";

    for (const auto& name : store.names())
      for (const auto& v : store.versions(name))
        std::cout << "  " << name << "@" << v.version << "  " << v.digest.short_str() << "\n";
    auto report = store.verify();
    std::cout << "verify: " << report.artifacts << " artifacts, " << (report.ok() ? "all intact" : "PROBLEMS") << "\n";
    return report.ok() && loaded.bit_equal(embeddings) && zrows.bit_equal(counts.rows(2048, 2056)) ? 0 : 1;
  } catch (const amphora::Error& e) {
    std::cerr << "amphora_tensor_demo: " << e.what() << "\n";
    return 1;
  }
}
