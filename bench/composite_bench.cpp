// Section "composite": a Menpo-like value -- a map of one entry holding a
// model (a ~1 MB JSON config and 8 float32 tensors of 4 MiB) and 1,000
// images of 64x64x3 uint8 -- saved and loaded whole, against pickle protocol 5
// of the same dict, numpy arrays and list in Python.

#include "bench_common.hpp"

#include <amphora/describe.hpp>
#include <amphora/npy.hpp>

#include <cmath>
#include <fstream>
#include <iostream>

namespace bench_composite {

struct Model {
  nlohmann::json config;
  std::map<std::string, amphora::Tensor> weights;
};
AMPHORA_MATERIALIZE(Model, "bench.model", 1, config, weights)

struct Entry {
  Model model;
  std::vector<amphora::Tensor> images;
};
AMPHORA_MATERIALIZE(Entry, "bench.entry", 1, model, images)

using Dataset = std::map<std::string, Entry>;

}  // namespace bench_composite

namespace amphora_bench {

namespace {

using amphora::DType;
using amphora::Tensor;
using bench_composite::Dataset;
using bench_composite::Entry;

struct Sizes {
  std::size_t config_bytes, tensors, tensor_side, images;
};

// A model configuration as a training script would write it: a list of
// layers with a few numbers, names and nested settings each.
nlohmann::json make_config(std::size_t target_bytes) {
  static const char* const kinds[] = {"conv", "norm", "pool", "dense", "attention", "dropout"};
  static const char* const inits[] = {"he_normal", "glorot_uniform", "zeros", "orthogonal"};
  Rng rng(7);
  auto decimal = [&](double scale) { return std::round(rng.unit() * scale * 1000) / 1000; };
  nlohmann::json config = {{"name", "aam-bench"},
                           {"format", 3},
                           {"landmarks", 68},
                           {"optimizer", {{"kind", "adamw"}, {"lr", 0.0003}, {"betas", {0.9, 0.999}}, {"weight_decay", 0.01}}},
                           {"layers", nlohmann::json::array()}};
  auto& layers = config["layers"];
  for (std::size_t n = 0;; ++n) {
    if (n % 64 == 0 && amphora::canonical_json(config).size() >= target_bytes) break;
    const char* kind = kinds[rng.below(6)];
    char name[64];
    std::snprintf(name, sizeof name, "block%02zu.%s%04zu", n / 100, kind, n);
    const int k = 1 + 2 * static_cast<int>(rng.below(3));
    layers.push_back({{"name", name},
                      {"kind", kind},
                      {"in", 16 << rng.below(6)},
                      {"out", 16 << rng.below(6)},
                      {"kernel", {k, k}},
                      {"stride", 1 + static_cast<int>(rng.below(2))},
                      {"bias", rng.below(2) == 1},
                      {"dropout", decimal(0.5)},
                      {"init", {{"scheme", inits[rng.below(4)]}, {"gain", decimal(2)}}},
                      {"tags", {"trainable", kind}}});
  }
  return config;
}

Dataset make_dataset(const Sizes& s) {
  Entry e;
  e.model.config = make_config(s.config_bytes);
  static const char* const names[] = {"encoder.0.weight", "encoder.1.weight", "encoder.2.weight", "encoder.3.weight",
                                      "decoder.0.weight", "decoder.1.weight", "decoder.2.weight", "head.weight"};
  for (std::size_t i = 0; i < s.tensors; ++i) {
    const auto side = static_cast<std::int64_t>(s.tensor_side);
    Tensor t = Tensor::zeros(DType::float32, {side, side});
    fill_random_f32(t.mutable_values<float>(), 100 + i);
    e.model.weights.emplace(i < 8 ? std::string(names[i]) : "extra." + std::to_string(i) + ".weight", std::move(t));
  }
  e.images.reserve(s.images);
  for (std::size_t i = 0; i < s.images; ++i) {
    Tensor img = Tensor::zeros(DType::uint8, {64, 64, 3});
    fill_random_u8(img.mutable_values<std::uint8_t>(), 1000 + i);
    e.images.push_back(std::move(img));
  }
  Dataset d;
  d.emplace("train", std::move(e));
  return d;
}

// The pickle peer reads the same values from files written here.
void write_inputs(const Dataset& d, const fs::path& dir) {
  retire(dir);
  fs::create_directories(dir / "weights");
  const Entry& e = d.at("train");
  std::ofstream(dir / "config.json", std::ios::binary) << amphora::canonical_json(e.model.config);
  for (const auto& [name, t] : e.model.weights) amphora::write_npy(t, dir / "weights" / (name + ".npy"));
  Tensor stacked = Tensor::zeros(DType::uint8, {static_cast<std::int64_t>(e.images.size()), 64, 64, 3});
  std::byte* at = stacked.mutable_data();
  for (const auto& img : e.images) {
    std::memcpy(at, img.data(), img.nbytes());
    at += img.nbytes();
  }
  amphora::write_npy(stacked, dir / "images.npy");
}

// The pass over a loaded value: every float summed, every image byte summed.
double sum_weights(const std::map<std::string, Tensor>& weights) {
  double s = 0;
  for (const auto& [name, t] : weights) s += sum_f32(t.values<float>());
  return s;
}
std::uint64_t sum_images(const std::vector<Tensor>& images) {
  std::uint64_t s = 0;
  for (const auto& img : images) s += sum_u8(img.values<std::uint8_t>());
  return s;
}

struct Timing {
  double save_s = 0, mapped_s = 0, eager_s = 0;
  std::uint64_t bytes = 0;     // every file of every artifact the save wrote
  std::size_t artifacts = 0;
};

// Saves `value` into a fresh store per repeat (the time includes hashing and
// publishing), then loads it mapped and eagerly, each followed by `pass`.
template <class T, class Pass>
Timing time_amphora(const T& value, const Options& o, const Pass& pass) {
  Timing m;
  std::vector<double> saves, mapped, eager;
  const fs::path dir = o.dir / "store-composite";
  amphora::Digest digest;
  for (int r = 0; r < o.repeats; ++r) {
    auto store = fresh_store(dir);
    touch_scratch();
    auto t0 = Clock::now();
    digest = store.save(value, {.name = "menpo"}).digest;
    saves.push_back(seconds_since(t0));
  }
  auto store = amphora::Store::open(dir);
  m.bytes = tree_bytes(dir / "objects");
  m.artifacts = store.artifacts().size();
  for (int r = 0; r < o.repeats; ++r) {
    for (bool is_eager : {false, true}) {
      touch_scratch();
      auto t0 = Clock::now();
      T back = store.load<T>(digest, {.eager = is_eager});
      pass(back);
      (is_eager ? eager : mapped).push_back(seconds_since(t0));
    }
  }
  retire(dir);
  m.save_s = median(saves);
  m.mapped_s = median(mapped);
  m.eager_s = median(eager);
  return m;
}

}  // namespace

void run_composite(const Options& o, Verdicts& verdict) {
  const Sizes s = o.quick ? Sizes{64 << 10, 8, 256, 100} : Sizes{1000000, 8, 1024, 1000};
  Dataset value = make_dataset(s);
  const Entry& entry = value.at("train");
  const std::size_t config_bytes = amphora::canonical_json(entry.model.config).size();
  const double mib = static_cast<double>(s.tensor_side * s.tensor_side * 4) / 1048576.0;
  std::printf("\nComposite (Menpo-like): {\"train\": Entry{Model{config: JSON of %.2f MB, weights: %zu float32 tensors of "
              "%.2f MiB}, images: %zu x 64x64x3 uint8}}\n",
              config_bytes / 1e6, s.tensors, mib, s.images);
  std::printf("  pickle: the same as {\"train\": {\"model\": {\"config\": dict, \"weights\": {name: ndarray}}, "
              "\"images\": [ndarray, ...]}}, protocol 5, to one file\n");
  std::printf("  loads are followed by a sum over every tensor and image on both sides\n");

  const double want_tensor_sum = sum_weights(entry.model.weights);
  const std::uint64_t want_image_sum = sum_images(entry.images);
  bool sums_ok = true;
  auto check_tensors = [&](const std::map<std::string, Tensor>& w) {
    double got = sum_weights(w);
    if (got != want_tensor_sum) sums_ok = false;
    return got;
  };
  auto check_images = [&](const std::vector<Tensor>& images) {
    if (sum_images(images) != want_image_sum) sums_ok = false;
  };

  struct Part {
    const char* key;
    std::string label;
    Timing ours;
  };
  std::vector<Part> parts;
  parts.push_back({"config", "config JSON", time_amphora(entry.model.config, o, [&](const nlohmann::json& c) {
                     if (c.size() != entry.model.config.size()) sums_ok = false;
                   })});
  parts.push_back({"weights", "weights map", time_amphora(entry.model.weights, o, [&](const auto& w) { check_tensors(w); })});
  parts.push_back({"images", "image list", time_amphora(entry.images, o, [&](const auto& im) { check_images(im); })});
  parts.push_back({"whole", "whole value", time_amphora(value, o, [&](const Dataset& d) {
                     const Entry& e = d.at("train");
                     check_tensors(e.model.weights);
                     check_images(e.images);
                   })});

  const fs::path inputs = o.dir / "composite-inputs";
  write_inputs(value, inputs);
  auto peers = run_peer(AMPHORA_PICKLE_PEER, {"composite", std::to_string(o.repeats), o.dir.string(), inputs.string()});
  retire(inputs);
  if (peers.empty() || !peers[0].contains("parts")) {
    std::printf("  pickle peer produced no figures\n");
    verdict(false);
    return;
  }
  const nlohmann::json& peer = peers[0];

  // pickle.load is timed with Python's cyclic garbage collector on (the
  // default) and off; ratios take the faster of the two.
  auto pickle_load = [](const nlohmann::json& q) {
    return std::min(peer_median(q, "load_s"), peer_median(q, "load_nogc_s"));
  };
  std::printf("  amphora saves into a fresh store, hashing and publishing included; pickle.load runs with Python's\n"
              "  garbage collector on (default) and off; ratio = pickle time / amphora time, against the faster\n"
              "  pickle.load (> 1: Amphora is faster)\n");
  std::printf("  %-18s %-31s  %-30s  %s\n", "", "----------- amphora ------------", "----------- pickle -----------",
              "-- ratio pickle/amphora --");
  std::printf("  %-18s %9s %10s %10s  %9s %9s %10s  %8s %8s %8s\n", "", "save", "load mmap", "load eager", "dump",
              "load", "load no gc", "save", "mapped", "eager");
  for (const auto& p : parts) {
    const auto& q = peer["parts"][p.key];
    double ps = peer_median(q, "save_s"), pl = pickle_load(q);
    std::printf("  %-18s %6.1f ms %7.1f ms %7.1f ms  %6.1f ms %6.1f ms %7.1f ms  %7.2fx %7.2fx %7.2fx\n",
                p.label.c_str(), p.ours.save_s * 1e3, p.ours.mapped_s * 1e3, p.ours.eager_s * 1e3, ps * 1e3,
                peer_median(q, "load_s") * 1e3, peer_median(q, "load_nogc_s") * 1e3, ps / p.ours.save_s,
                pl / p.ours.mapped_s, pl / p.ours.eager_s);
  }
  const Part& whole = parts.back();
  const auto& pw = peer["parts"]["whole"];
  const double ps = peer_median(pw, "save_s"), pl = pickle_load(pw);
  const auto peer_bytes = pw["bytes"].get<std::uint64_t>();
  std::printf("  bytes on disk: amphora %.1f MB in %zu artifacts (payloads and manifests), pickle %.1f MB (%.3fx)\n",
              whole.ours.bytes / 1e6, whole.ours.artifacts, peer_bytes / 1e6,
              static_cast<double>(whole.ours.bytes) / static_cast<double>(peer_bytes));
  const bool same = sums_ok && peer["image_sum"].get<std::uint64_t>() == want_image_sum &&
                    peer["tensors"].get<std::size_t>() == s.tensors && peer["images"].get<std::size_t>() == s.images &&
                    peer["config_keys"].get<std::size_t>() == entry.model.config.size() &&
                    // numpy sums float32 pairwise in float32: equal up to rounding
                    std::abs(peer["tensor_sum"].get<double>() - want_tensor_sum) <=
                        1e-6 * static_cast<double>(s.tensors * s.tensor_side * s.tensor_side);
  std::printf("  checksums: tensor sum %.4f (pickle %.4f), image bytes sum %llu (pickle %llu): %s\n", want_tensor_sum,
              peer["tensor_sum"].get<double>(), static_cast<unsigned long long>(want_image_sum),
              static_cast<unsigned long long>(peer["image_sum"].get<std::uint64_t>()),
              same ? "both sides hold the same data" : "MISMATCH");
  if (!same) verdict(false);
  std::printf("    whole value save vs pickle.dump:        %.2fx  (target >= 1.00x: %s)\n", ps / whole.ours.save_s,
              verdict(ps / whole.ours.save_s >= 1.0));
  std::printf("    whole value load mapped vs pickle.load: %.2fx  (target >= 1.00x: %s)\n", pl / whole.ours.mapped_s,
              verdict(pl / whole.ours.mapped_s >= 1.0));
  std::printf("    whole value load eager vs pickle.load:  %.2fx  (target >= 1.00x: %s)\n", pl / whole.ours.eager_s,
              verdict(pl / whole.ours.eager_s >= 1.0));
}

}  // namespace amphora_bench
