// Section "jsonl": 200,000 COCO-style records (filepath, width, height,
// bboxes as lists of [x1, y1, x2, y2], labels, areas, iscrowd) as an
// amphora.records collection, against what a Python program does with the
// same records: JSON lines through the json module, and pickle of the list of dicts.

#include "bench_common.hpp"

#include <amphora/record_collection.hpp>

#include <cmath>
#include <fstream>

namespace amphora_bench {

namespace {

// Coordinates with two decimals and areas with four, as COCO annotations have.
double decimals(double v, double scale) { return std::round(v * scale) / scale; }

std::vector<nlohmann::ordered_json> make_coco(std::size_t n) {
  static const char* const classes[] = {"person", "bicycle", "car",  "motorcycle", "bus",   "truck", "traffic light",
                                        "bench",  "bird",    "cat",  "dog",        "horse", "sheep", "backpack",
                                        "umbrella", "bottle", "cup", "chair",      "couch", "dining table"};
  static const int frames[][2] = {{640, 480}, {640, 427}, {480, 640}, {500, 375}, {612, 612}};
  Rng rng(2026);
  std::vector<nlohmann::ordered_json> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto* f = frames[rng.below(5)];
    char path[48];
    std::snprintf(path, sizeof path, "train2017/%012zu.jpg", 100000 + i * 7);
    nlohmann::ordered_json boxes = nlohmann::ordered_json::array(), labels = nlohmann::ordered_json::array(),
                           areas = nlohmann::ordered_json::array(), crowd = nlohmann::ordered_json::array();
    const std::size_t k = rng.below(13);
    for (std::size_t b = 0; b < k; ++b) {
      const double x1 = decimals(rng.unit() * (f[0] - 20), 100), y1 = decimals(rng.unit() * (f[1] - 20), 100);
      const double x2 = decimals(x1 + 4 + rng.unit() * (f[0] - x1 - 4), 100);
      const double y2 = decimals(y1 + 4 + rng.unit() * (f[1] - y1 - 4), 100);
      boxes.push_back({x1, y1, x2, y2});
      labels.push_back(classes[rng.below(20)]);
      areas.push_back(decimals((x2 - x1) * (y2 - y1), 1e4));
      crowd.push_back(rng.below(50) == 0 ? 1 : 0);
    }
    out.push_back({{"filepath", path}, {"width", f[0]}, {"height", f[1]}, {"bboxes", std::move(boxes)},
                   {"labels", std::move(labels)}, {"areas", std::move(areas)}, {"iscrowd", std::move(crowd)}});
  }
  return out;
}

}  // namespace

void run_jsonl(const Options& o, Verdicts& verdict) {
  const std::size_t n = o.quick ? 10000 : 200000;
  const auto records = make_coco(n);
  const fs::path input = o.dir / "coco.jsonl";
  {
    std::ofstream f(input, std::ios::binary);
    for (const auto& r : records) f << r.dump() << '\n';
  }
  std::printf("\nJSON records: %zu COCO-style records {filepath, width, height, bboxes (0-12 x [x1, y1, x2, y2], two "
              "decimals), labels, areas, iscrowd} as amphora.records\n", n);
  std::printf("  peers: json.dumps / json.loads per line (JSON lines), and pickle protocol 5 of the list of dicts\n");

  std::vector<double> imports;
  amphora::RecordCollection collection;
  for (int r = 0; r < o.repeats; ++r) {
    touch_scratch();
    auto t0 = Clock::now();
    collection = amphora::RecordCollection::read_jsonl(input);
    imports.push_back(seconds_since(t0));
  }

  const fs::path dir = o.dir / "store-jsonl";
  const SaveTimings timed = time_saves(o, dir, collection, "coco");
  const std::vector<double>& saves = timed.seconds;
  const std::vector<double>& overheads = timed.rss_over;
  const amphora::Digest digest = timed.digest;
  auto store = amphora::Store::open(dir);
  const amphora::ArtifactReader artifact = store.open_artifact(digest);
  const std::uint64_t ours_bytes =
      artifact.manifest().payload_bytes() + fs::file_size(artifact_dir(store, digest) / "manifest.json");

  // Load: every column read and decoded, records ready by index; then, as a
  // second figure, every record written out as JSON text as well.
  std::vector<double> loads, renders;
  bool equal = true;
  for (int r = 0; r < o.repeats; ++r) {
    touch_scratch();
    auto t0 = Clock::now();
    const auto back = store.load<amphora::RecordCollection>(digest, {.eager = true});
    loads.push_back(seconds_since(t0));
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < back.size(); ++i) bytes += back.record_json(i).size();
    renders.push_back(seconds_since(t0));
    asm volatile("" : : "r"(bytes) : "memory");
    if (r == 0)
      for (std::size_t i = 0; i < n && equal; ++i) equal = back.record_json(i) == records[i].dump();
  }
  Rng pick(11);
  std::vector<double> one;
  for (int r = 0; r < o.repeats; ++r) {
    const std::size_t i = pick.below(n);
    touch_scratch();
    auto t0 = Clock::now();
    const auto opened = store.load<amphora::RecordCollection>(digest);
    const auto text = opened.record_json(i);
    one.push_back(seconds_since(t0));
    if (text != records[i].dump()) equal = false;
  }
  retire(dir);

  auto peers = run_peer(AMPHORA_JSONL_PEER, {std::to_string(o.repeats), o.dir.string(), input.string()});
  retire(input);
  if (peers.empty() || !peers[0].contains("jsonl_bytes")) {
    std::printf("  JSON lines peer produced no figures\n");
    verdict(false);
    return;
  }
  const auto& peer = peers[0];
  const double js = peer_median(peer, "jsonl_save_s"), jl = peer_median(peer, "jsonl_load_s");
  const double ps = peer_median(peer, "pickle_save_s"), pl_gc = peer_median(peer, "pickle_load_s"),
               pl_nogc = peer_median(peer, "pickle_load_nogc_s"), pl = std::min(pl_gc, pl_nogc);
  const auto jbytes = peer["jsonl_bytes"].get<std::uint64_t>(), pbytes = peer["pickle_bytes"].get<std::uint64_t>();
  const double save = median(saves), load = median(loads);
  equal = equal && peer["count"].get<std::size_t>() == n;

  std::printf("  ratio = peer time / amphora time (> 1: Amphora is faster); sizes: amphora / peer (< 1: smaller)\n");
  std::printf("  %-46s %12s %12s %9s %12s %9s\n", "", "amphora", "JSON lines", "ratio", "pickle", "ratio");
  std::printf("  %-46s %9.1f ms %9.1f ms %8.2fx %9.1f ms %8.2fx\n", "save (amphora: hashed, published)", save * 1e3,
              js * 1e3, js / save, ps * 1e3, ps / save);
  std::printf("  %-46s %9.1f ms %9.1f ms %8.2fx %9.1f ms %8.2fx\n", "load (amphora: all columns read and decoded)",
              load * 1e3, jl * 1e3, jl / load, pl * 1e3, pl / load);
  std::printf("  %-46s %9.1f ms\n", "load + every record as JSON text", median(renders) * 1e3);
  std::printf("  %-46s %9.3f ms\n", "open + read one record i", median(one) * 1e3);
  std::printf("  %-46s %9.1f ms %9.1f ms %8.2fx  (simdjson, two passes; peer: json.loads per line + pass)\n",
              "import the JSON lines file", median(imports) * 1e3, jl * 1e3, jl / median(imports));
  std::printf("  %-46s %9.2f MB %9.2f MB %8.3fx %9.2f MB %8.3fx\n", "bytes on disk", ours_bytes / 1e6, jbytes / 1e6,
              static_cast<double>(ours_bytes) / static_cast<double>(jbytes), pbytes / 1e6,
              static_cast<double>(ours_bytes) / static_cast<double>(pbytes));
  std::printf("  %-46s %9.0f    %9.0f     %9s %9.0f     (each side's bytes on disk / its save time)\n", "save MB/s",
              mb_per_s(ours_bytes, save), mb_per_s(jbytes, js), "", mb_per_s(pbytes, ps));
  std::printf("  %-46s %9.0f    %9.0f     %9s %9.0f     (the same over the load time)\n", "load MB/s",
              mb_per_s(ours_bytes, load), mb_per_s(jbytes, jl), "", mb_per_s(pbytes, pl));
  std::printf("  (pickle load: %.1f ms with the cyclic collector on, %.1f ms off; the faster is compared)\n",
              pl_gc * 1e3, pl_nogc * 1e3);
  std::printf("  content: %zu records: %s\n", n, equal ? "loaded back equal, line for line" : "MISMATCH");
  if (!equal) verdict(false);
  const double over = *std::max_element(overheads.begin(), overheads.end());
  std::printf("    save vs pickle.dump:        %.2fx  (target >= 5x: %s)\n", ps / save, verdict(ps / save >= 5));
  std::printf("    load vs pickle.load:        %.2fx  (target >= 5x: %s)\n", pl / load, verdict(pl / load >= 5));
  std::printf("    size vs JSON lines:         %.3fx  (target <= 0.333x: %s)\n",
              static_cast<double>(ours_bytes) / static_cast<double>(jbytes), verdict(3 * ours_bytes <= jbytes));
  std::printf("    peak RSS saving:            records in memory + %.0f MiB (target <= 64 MiB: %s)\n", over / 1048576.0,
              verdict(over <= 64.0 * 1048576));
}

}  // namespace amphora_bench
