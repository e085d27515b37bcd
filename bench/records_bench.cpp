// Section "records": 100,000 detection records saved as one columnar record
// list (std::vector of a declared struct), against pickle protocol 5 of the
// list of dicts a Python program would hold.

#include "bench_common.hpp"

#include <amphora/record_list.hpp>

#include <fstream>

namespace bench_records {

struct Detection {
  std::string path;
  std::int32_t width = 0, height = 0;
  std::vector<float> boxes;  // x1, y1, x2, y2 per box
  std::vector<std::string> labels;  // one per box
  bool operator==(const Detection&) const = default;
};
AMPHORA_MATERIALIZE(Detection, "bench.detection", 1, path, width, height, boxes, labels)

}  // namespace bench_records

namespace amphora_bench {

namespace {

using bench_records::Detection;

std::vector<Detection> make_records(std::size_t n) {
  static const char* const vocabulary[] = {"person", "car",   "bicycle", "dog",   "cat",   "bus",
                                           "truck",  "chair", "bottle",  "bird",  "horse", "traffic light"};
  static const std::int32_t frames[][2] = {{640, 480}, {1280, 720}, {800, 600}, {1024, 768}, {1920, 1080}};
  Rng rng(42);
  std::vector<Detection> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    Detection& d = out[i];
    char path[32];
    std::snprintf(path, sizeof path, "images/%06zu.jpg", i);
    d.path = path;
    const auto* frame = frames[rng.below(5)];
    d.width = frame[0];
    d.height = frame[1];
    const std::size_t boxes = rng.below(6);
    for (std::size_t b = 0; b < boxes; ++b) {
      const double w = d.width, h = d.height;
      const double x1 = rng.unit() * (w - 16), y1 = rng.unit() * (h - 16);
      const double x2 = x1 + 8 + rng.unit() * (w - x1 - 8), y2 = y1 + 8 + rng.unit() * (h - y1 - 8);
      for (double v : {x1, y1, x2, y2}) d.boxes.push_back(static_cast<float>(v));
      d.labels.emplace_back(vocabulary[rng.below(12)]);
    }
  }
  return out;
}

// The peer's input: the same records as JSON (floats written exactly).
void write_json(const std::vector<Detection>& records, const fs::path& file) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& d : records) {
    nlohmann::json boxes = nlohmann::json::array();
    for (float v : d.boxes) boxes.push_back(static_cast<double>(v));
    all.push_back({{"path", d.path}, {"width", d.width}, {"height", d.height}, {"boxes", std::move(boxes)},
                   {"labels", d.labels}});
  }
  std::ofstream(file, std::ios::binary) << all.dump();
}

}  // namespace

void run_records(const Options& o, Verdicts& verdict) {
  const std::size_t n = o.quick ? 5000 : 100000;
  const std::vector<Detection> records = make_records(n);
  std::size_t box_values = 0, labels = 0;
  for (const auto& d : records) box_values += d.boxes.size(), labels += d.labels.size();
  std::printf("\nRecords: %zu detections {path, width, height, boxes (0-5 x 4 float32), labels (one per box, "
              "12 words)} as std::vector<Detection>, an amphora.record_list\n",
              n);
  std::printf("  pickle: the same as a list of dicts (boxes a flat list of floats, labels a list of str), protocol 5\n");

  const fs::path dir = o.dir / "store-records";
  std::vector<double> saves;
  amphora::Digest digest;
  for (int r = 0; r < o.repeats; ++r) {
    auto store = fresh_store(dir);
    touch_scratch();
    auto t0 = Clock::now();
    digest = store.save(records, {.name = "detections"}).digest;
    saves.push_back(seconds_since(t0));
  }
  auto store = amphora::Store::open(dir);
  const amphora::ArtifactReader artifact = store.open_artifact(digest);
  const std::uint64_t payload = artifact.manifest().payload_bytes();
  const std::uint64_t manifest = fs::file_size(artifact_dir(store, digest) / "manifest.json");
  const std::size_t files = artifact.manifest().files.size();

  std::vector<double> loads;
  bool equal = true;
  for (int r = 0; r < o.repeats; ++r) {
    touch_scratch();
    auto t0 = Clock::now();
    auto back = store.load<std::vector<Detection>>(digest);
    loads.push_back(seconds_since(t0));
    if (r == 0) equal = back == records;
  }

  // Random access: open the artifact and its columns, read record i.
  Rng pick(9);
  std::vector<double> first, each;
  constexpr std::size_t kLookups = 10000;
  for (int r = 0; r < o.repeats; ++r) {
    const std::size_t i = pick.below(n);
    touch_scratch();
    auto t0 = Clock::now();
    auto list = amphora::RecordList<Detection>::open(store.open_artifact(digest));
    Detection d = list[i];
    first.push_back(seconds_since(t0));
    if (!(d == records[i])) equal = false;
    std::vector<std::size_t> indices(kLookups);
    for (auto& k : indices) k = pick.below(n);
    std::size_t sink = 0;
    t0 = Clock::now();
    for (std::size_t k : indices) sink += list[k].boxes.size();
    each.push_back(seconds_since(t0) / kLookups);
    asm volatile("" : : "r"(sink) : "memory");
  }
  retire(dir);

  const fs::path input = o.dir / "records.json";
  write_json(records, input);
  auto peers = run_peer(AMPHORA_PICKLE_PEER, {"records", std::to_string(o.repeats), o.dir.string(), input.string()});
  retire(input);
  if (peers.empty() || !peers[0].contains("bytes")) {
    std::printf("  pickle peer produced no figures\n");
    verdict(false);
    return;
  }
  const auto& peer = peers[0];
  // pickle.load is timed with Python's cyclic garbage collector on (the
  // default) and off; the verdicts take the faster of the two.
  const double ps = peer_median(peer, "save_s"), pl_gc = peer_median(peer, "load_s"),
               pl_nogc = peer_median(peer, "load_nogc_s"), pl = std::min(pl_gc, pl_nogc);
  const auto peer_bytes = peer["bytes"].get<std::uint64_t>();
  const std::uint64_t ours_bytes = payload + manifest;
  const bool same = equal && peer["count"].get<std::size_t>() == n && peer["box_values"].get<std::size_t>() == box_values &&
                    peer["labels"].get<std::size_t>() == labels;

  std::printf("  ratio = pickle time / amphora time (> 1: Amphora is faster); sizes: amphora / pickle (< 1: smaller)\n");
  std::printf("  %-44s %12s %12s %9s\n", "", "amphora", "pickle", "ratio");
  std::printf("  %-44s %9.1f ms %9.1f ms %8.2fx\n", "save (fresh store, hashed, published)", median(saves) * 1e3,
              ps * 1e3, ps / median(saves));
  std::printf("  %-44s %9.1f ms %9.1f ms %8.2fx\n", "load all records (pickle: gc on, default)",
              median(loads) * 1e3, pl_gc * 1e3, pl_gc / median(loads));
  std::printf("  %-44s %9.1f ms %9.1f ms %8.2fx\n", "load all records (pickle: gc off)", median(loads) * 1e3,
              pl_nogc * 1e3, pl_nogc / median(loads));
  std::printf("  %-44s %9.3f ms %9.1f ms %8.0fx  (pickle must load everything)\n",
              "open + read one record i (RecordList::open)", median(first) * 1e3, pl * 1e3, pl / median(first));
  std::printf("  %-44s %9.2f us\n", "each further record list[i], random i", median(each) * 1e6);
  std::printf("  %-44s %9.2f MB %9.2f MB %8.3fx  (%zu payload files %.2f MB + manifest %.1f kB)\n", "bytes on disk",
              ours_bytes / 1e6, peer_bytes / 1e6, static_cast<double>(ours_bytes) / static_cast<double>(peer_bytes),
              files, payload / 1e6, manifest / 1e3);
  std::printf("  content: %zu records, %zu box values, %zu labels: %s\n", n, box_values, labels,
              same ? "loaded back equal; pickle holds the same counts" : "MISMATCH");
  if (!same) verdict(false);
  std::printf("    save vs pickle.dump:   %.2fx  (target >= 1.00x: %s)\n", ps / median(saves),
              verdict(ps / median(saves) >= 1.0));
  std::printf("    load vs pickle.load:   %.2fx  (target >= 1.00x: %s)\n", pl / median(loads),
              verdict(pl / median(loads) >= 1.0));
  std::printf("    size vs pickle file:   %.3fx  (target <= 1.20x: %s)\n",
              static_cast<double>(ours_bytes) / static_cast<double>(peer_bytes), verdict(ours_bytes <= 1.2 * peer_bytes));
}

}  // namespace amphora_bench
