// Section "tiny": what one artifact costs. 1,000 tiny values saved one by
// one (an int64 under its own name each, then short strings as 1,000
// versions of one name) and loaded back by name, against pickle.dump /
// pickle.load of a tiny object to / from its own file.

#include "bench_common.hpp"

#include <amphora/everyday.hpp>

namespace amphora_bench {

void run_tiny(const Options& o, Verdicts& verdict) {
  const std::size_t n = o.quick ? 100 : 1000;
  std::printf("\nPer-artifact overhead: %zu tiny values saved one at a time (amphora: hashed, published, named; "
              "pickle: one file each, no hashing or versioning)\n",
              n);
  auto note = [](std::size_t i) {
    char text[64];
    std::snprintf(text, sizeof text, "note %04zu: checkpoint written", i);
    return std::string(text);
  };
  auto tiny_name = [](std::size_t i) {
    char name[32];
    std::snprintf(name, sizeof name, "tiny-%04zu", i);
    return std::string(name);
  };
  const fs::path dir = o.dir / "store-tiny";
  std::vector<double> int_save, int_load, str_save, str_load;
  bool ok = true;
  for (int r = 0; r < o.repeats; ++r) {
    auto store = fresh_store(dir);
    touch_scratch();
    auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i) store.save(static_cast<std::int64_t>(1000 + i), {.name = tiny_name(i)});
    int_save.push_back(seconds_since(t0));
    touch_scratch();
    t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i) store.save(note(i), {.name = "note"});
    str_save.push_back(seconds_since(t0));
    touch_scratch();
    t0 = Clock::now();
    std::int64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += store.load<std::int64_t>(tiny_name(i));
    int_load.push_back(seconds_since(t0));
    touch_scratch();
    t0 = Clock::now();
    std::size_t chars = 0;
    for (std::size_t i = 0; i < n; ++i) chars += store.load<std::string>("note@" + std::to_string(i + 1)).size();
    str_load.push_back(seconds_since(t0));
    const auto want_total = static_cast<std::int64_t>(n * 1000 + n * (n - 1) / 2);
    ok = ok && total == want_total && chars == n * note(0).size() && store.versions("note").size() == n;
  }
  retire(dir);

  auto peers = run_peer(AMPHORA_PICKLE_PEER, {"tiny", std::to_string(o.repeats), o.dir.string(), std::to_string(n)});
  if (peers.empty() || !peers[0].contains("int_save_s")) {
    std::printf("  pickle peer produced no figures\n");
    verdict(false);
    return;
  }
  const auto& peer = peers[0];
  const double per = 1e6 / static_cast<double>(n);
  struct Row {
    std::string what;
    double ours, theirs;
  };
  const Row rows[] = {
      {"save int64, each under its own name", median(int_save), peer_median(peer, "int_save_s")},
      {"save short string, " + std::to_string(n) + " versions of one name", median(str_save),
       peer_median(peer, "str_save_s")},
      {"load int64 by name", median(int_load), peer_median(peer, "int_load_s")},
      {"load string by NAME@N", median(str_load), peer_median(peer, "str_load_s")},
  };
  std::printf("  ratio = pickle time / amphora time (> 1: Amphora is faster)\n");
  std::printf("  %-48s %12s %12s %9s\n", "per value", "amphora", "pickle", "ratio");
  for (const auto& row : rows)
    std::printf("  %-48s %9.1f us %9.1f us %8.2fx\n", row.what.c_str(), row.ours * per, row.theirs * per,
                row.theirs / row.ours);
  std::printf("  content: %s\n", ok ? "every value loaded back equal" : "MISMATCH");
  if (!ok) verdict(false);
}

}  // namespace amphora_bench
