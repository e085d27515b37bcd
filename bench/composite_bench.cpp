// Section "composite": a Menpo-like value -- a map of one entry holding a
// model (a ~1 MB JSON config and 8 float32 tensors of 4 MiB) and 1,000
// images of 64x64x3 uint8 -- saved and loaded whole, against pickle protocol 5
// of the same dict, numpy arrays and list in Python.

#include "bench_common.hpp"

#include <amphora/describe.hpp>
#include <amphora/npy.hpp>

#include <array>
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

// Menpo's own bundle as its users wrote it (issue 22): a model and 50
// images with landmarks, the weights referenced twice, nothing but
// AMPHORA_MATERIALIZE lines.
struct MenpoModel {
  std::string name;
  std::map<std::string, std::string> config;
  amphora::Tensor weights;
};
AMPHORA_MATERIALIZE(MenpoModel, "bench.menpo_model", 1, name, config, weights)

struct MenpoImage {
  amphora::Tensor pixels;
  std::vector<std::array<float, 2>> landmarks;
};
AMPHORA_MATERIALIZE(MenpoImage, "bench.menpo_image", 1, pixels, landmarks)

struct MenpoBundle {
  MenpoModel model;
  std::vector<MenpoImage> images;
  amphora::Tensor initial_weights;
};
AMPHORA_MATERIALIZE(MenpoBundle, "bench.menpo_bundle", 1, model, images, initial_weights)

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
  std::size_t files = 0, directories = 0;  // below objects/
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
  for (const auto& e : fs::recursive_directory_iterator(dir / "objects")) (e.is_directory() ? m.directories : m.files)++;
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

using bench_composite::MenpoBundle;

MenpoBundle make_bundle(std::size_t images, std::int64_t side, std::int64_t weights_side) {
  MenpoBundle b;
  b.model.name = "aam";
  b.model.config = {{"optimizer", "adam"}, {"scales", "0.5,1.0"}, {"landmarks", "68"}, {"patch_shape", "17x17"}};
  b.model.weights = Tensor::zeros(DType::float32, {weights_side, weights_side});
  fill_random_f32(b.model.weights.mutable_values<float>(), 5);
  b.initial_weights = b.model.weights;
  Rng rng(11);
  for (std::size_t i = 0; i < images; ++i) {
    bench_composite::MenpoImage image{Tensor::zeros(DType::uint8, {side, side}), {}};
    fill_random_u8(image.pixels.mutable_values<std::uint8_t>(), 2000 + i);
    for (int j = 0; j < 68; ++j)
      image.landmarks.push_back({static_cast<float>(rng.unit() * static_cast<double>(side)),
                                 static_cast<float>(rng.unit() * static_cast<double>(side))});
    b.images.push_back(std::move(image));
  }
  return b;
}

struct BundleSums {
  double weights = 0, landmarks = 0;
  std::uint64_t pixels = 0;
  bool operator==(const BundleSums&) const = default;
};
BundleSums sum_bundle(const MenpoBundle& b) {
  BundleSums s;
  s.weights = sum_f32(b.model.weights.values<float>()) + sum_f32(b.initial_weights.values<float>());
  for (const auto& image : b.images) {
    s.pixels += sum_u8(image.pixels.values<std::uint8_t>());
    for (const auto& p : image.landmarks) s.landmarks += static_cast<double>(p[0]) + static_cast<double>(p[1]);
  }
  return s;
}

void write_bundle_inputs(const MenpoBundle& b, const fs::path& dir) {
  retire(dir);
  fs::create_directories(dir);
  amphora::write_npy(b.model.weights, dir / "weights.npy");
  const auto n = static_cast<std::int64_t>(b.images.size());
  const auto side = b.images.empty() ? 0 : b.images[0].pixels.shape()[0];
  Tensor pixels = Tensor::zeros(DType::uint8, {n, side, side});
  Tensor landmarks = Tensor::zeros(DType::float32, {n, 68, 2});
  std::byte* p = pixels.mutable_data();
  std::byte* l = landmarks.mutable_data();
  for (const auto& image : b.images) {
    std::memcpy(p, image.pixels.data(), image.pixels.nbytes());
    p += image.pixels.nbytes();
    std::memcpy(l, image.landmarks.data(), image.landmarks.size() * sizeof(image.landmarks[0]));
    l += image.landmarks.size() * sizeof(image.landmarks[0]);
  }
  amphora::write_npy(pixels, dir / "pixels.npy");
  amphora::write_npy(landmarks, dir / "landmarks.npy");
}

// Menpo's bundle, the case issue 22 measured: 3.28 MB on disk against 0.91
// MB for pickle when every image was its own artifacts and every tensor paid
// a 4 KiB header. Targets: at most 1.3x pickle's bytes, at most 2x its save time.
void run_menpo_bundle(const Options& o, Verdicts& verdict) {
  const std::size_t images = o.quick ? 10 : 50;
  const MenpoBundle bundle = make_bundle(images, 128, 256);
  const BundleSums want = sum_bundle(bundle);
  std::printf("\nComposite (Menpo's bundle, issue 22): Bundle{Model{name, config map, weights 256x256 float32}, %zu x "
              "Image{128x128 uint8, 68 landmarks as std::vector<std::array<float, 2>>}, the weights again}\n",
              images);
  std::printf("  pickle: {\"model\": {\"name\", \"config\": dict, \"weights\": W}, \"images\": [{\"pixels\": ndarray, "
              "\"landmarks\": (68, 2) ndarray}, ...], \"initial_weights\": W}, protocol 5\n");
  bool sums_ok = true;
  // The part before this one left hundreds of megabytes to write back; each
  // side starts once that is on disk (see write_back_scratch).
  write_back_scratch();
  const Timing ours = time_amphora(bundle, o, [&](const MenpoBundle& b) {
    if (!(sum_bundle(b) == want)) sums_ok = false;
  });
  const fs::path inputs = o.dir / "bundle-inputs";
  write_bundle_inputs(bundle, inputs);
  write_back_scratch();
  auto peers = run_peer(AMPHORA_PICKLE_PEER, {"bundle", std::to_string(o.repeats), o.dir.string(), inputs.string()});
  retire(inputs);
  if (peers.empty() || !peers[0].contains("bytes")) {
    std::printf("  pickle peer produced no figures\n");
    verdict(false);
    return;
  }
  const nlohmann::json& peer = peers[0];
  const double ps = peer_median(peer, "save_s");
  const double pl = std::min(peer_median(peer, "load_s"), peer_median(peer, "load_nogc_s"));
  const auto peer_bytes = peer["bytes"].get<std::uint64_t>();
  std::printf("  %-10s %9s %10s %10s %11s %10s %7s %6s\n", "", "save", "load mmap", "load eager", "bytes", "artifacts",
              "files", "dirs");
  std::printf("  %-10s %6.1f ms %7.1f ms %7.1f ms %8.2f MB %10zu %7zu %6zu\n", "amphora", ours.save_s * 1e3,
              ours.mapped_s * 1e3, ours.eager_s * 1e3, ours.bytes / 1e6, ours.artifacts, ours.files, ours.directories);
  std::printf("  %-10s %6.1f ms %7.1f ms %10s %8.2f MB %10s %7d %6s\n", "pickle", ps * 1e3, pl * 1e3, "", peer_bytes / 1e6,
              "", 1, "");
  std::printf("  %-10s %s\n", "before", "(issue 22, 50 images: 3.28 MB in 156 artifacts, 310 files, 275 directories)");
  const bool same = sums_ok && peer["pixel_sum"].get<std::uint64_t>() == want.pixels &&
                    peer["images"].get<std::size_t>() == images &&
                    std::abs(peer["weight_sum"].get<double>() - want.weights) <= 1e-6 * 2 * 256 * 256 &&
                    std::abs(peer["landmark_sum"].get<double>() - want.landmarks) <= 1e-6 * std::abs(want.landmarks);
  std::printf("  checksums: pixels %llu (pickle %llu), weights %.4f (pickle %.4f): %s\n",
              static_cast<unsigned long long>(want.pixels),
              static_cast<unsigned long long>(peer["pixel_sum"].get<std::uint64_t>()), want.weights,
              peer["weight_sum"].get<double>(), same ? "both sides hold the same data" : "MISMATCH");
  if (!same) verdict(false);
  const double size_ratio = static_cast<double>(ours.bytes) / static_cast<double>(peer_bytes);
  std::printf("    bytes on disk vs pickle:      %.2fx  (target <= 1.30x: %s)\n", size_ratio, verdict(size_ratio <= 1.3));
  std::printf("    save time vs pickle.dump:     %.2fx  (target <= 2.00x: %s)\n", ours.save_s / ps,
              verdict(ours.save_s / ps <= 2.0));
  std::printf("    load mapped vs pickle.load:   %.2fx faster\n", pl / ours.mapped_s);
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
  run_menpo_bundle(o, verdict);
}

}  // namespace amphora_bench
