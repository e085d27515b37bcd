// Section "pass": open a stored float32 tensor and sum every element, mapped
// and eagerly loaded, against numpy.load + sum, in two states of the file's
// cached pages: right after it was written, and after one sequential read of
// the file (read(2) into a scratch buffer).

#include "bench_common.hpp"

#include <amphora/npy.hpp>

#include <cmath>

namespace amphora_bench {

namespace {

using amphora::Tensor;

}  // namespace

void run_pass(const Options& o, Verdicts& verdict) {
  const std::uint64_t payload = static_cast<std::uint64_t>(o.mib) << 20;
  Tensor t = Tensor::zeros(amphora::DType::float32, {o.mib * 256, 1024});
  fill_random_f32(t.mutable_values<float>(), 77);
  const double want = sum_f32(t.values<float>());
  std::printf("\nOpen + full pass: a %lld MiB float32 tensor loaded and every element summed (a plain vectorized "
              "loop)\n",
              static_cast<long long>(o.mib));

  // The pass alone over private memory already touched: the floor.
  std::vector<double> floor;
  for (int r = 0; r < o.repeats; ++r) {
    touch_scratch();
    auto t0 = Clock::now();
    double s = sum_f32(t.values<float>());
    floor.push_back(seconds_since(t0));
    asm volatile("" : : "r"(s) : "memory");
  }

  bool sums_ok = true;
  auto load_and_sum = [&](const amphora::Store& store, const amphora::Digest& digest, bool eager) {
    touch_scratch();
    auto t0 = Clock::now();
    Tensor back = store.load<Tensor>(digest, {.eager = eager});
    double s = sum_f32(back.values<float>());
    double seconds = seconds_since(t0);
    if (s != want) sums_ok = false;
    return seconds;  // the tensor is released outside the timing, as numpy's array is
  };

  const fs::path dir = o.dir / "store-pass";
  std::vector<double> written[2], refreshed[2];
  // (a) Right after saving: a fresh store and save before every pass.
  for (int r = 0; r < o.repeats; ++r)
    for (bool eager : {false, true}) {
      auto store = fresh_store(dir);
      auto digest = store.save(t, {.options = amphora::TensorOptions{.compression = amphora::Compression::none}}).digest;
      written[eager].push_back(load_and_sum(store, digest, eager));
    }
  // (b) After the stored file was read once sequentially, before every pass.
  {
    auto store = fresh_store(dir);
    auto digest = store.save(t, {.options = amphora::TensorOptions{.compression = amphora::Compression::none}}).digest;
    const fs::path file = artifact_dir(store, digest) / "tensor.npy";
    for (int r = 0; r < o.repeats; ++r)
      for (bool eager : {false, true}) {
        read_sequentially(file);
        refreshed[eager].push_back(load_and_sum(store, digest, eager));
      }
  }
  retire(dir);

  const fs::path npy = o.dir / "pass.npy";
  amphora::write_npy(t, npy);
  t = Tensor();
  auto peers = run_peer(AMPHORA_NUMPY_PEER, {"pass", std::to_string(o.repeats), o.dir.string(), npy.string()});
  retire(npy);
  if (peers.empty() || !peers[0].contains("written_load_s")) {
    std::printf("  numpy peer produced no figures\n");
    verdict(false);
    return;
  }
  const auto& peer = peers[0];
  // numpy sums float32 pairwise in float32: equal up to rounding.
  const bool same = sums_ok && std::abs(peer["sum"].get<double>() - want) <= 1e-6 * static_cast<double>(payload / 4);

  auto cell = [&](double s) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%7.1f ms %6.0f MB/s", s * 1e3, mb_per_s(payload, s));
    return std::string(buf);
  };
  const double np_written = peer_median(peer, "written_load_s"), np_refreshed = peer_median(peer, "refreshed_load_s");
  std::printf("  ratio = numpy.load+sum time / this row's time (> 1: faster than numpy.load + sum)\n");
  std::printf("  %-36s %-20s %7s   %-20s %7s\n", "", "just written", "ratio", "after a sequential read", "ratio");
  auto row = [&](const char* what, double a, double b) {
    std::printf("  %-36s %s %6.2fx   %s %6.2fx\n", what, cell(a).c_str(), np_written / a, cell(b).c_str(),
                np_refreshed / b);
  };
  row("amphora load (mmap) + sum", median(written[0]), median(refreshed[0]));
  row("amphora load {.eager = true} + sum", median(written[1]), median(refreshed[1]));
  row("numpy.load + sum", np_written, np_refreshed);
  row("numpy.load(mmap_mode='r') + sum", peer_median(peer, "written_mmap_s"), peer_median(peer, "refreshed_mmap_s"));
  std::printf("  %-36s %s\n", "the sum alone, memory already touched", cell(median(floor)).c_str());
  std::printf("  checksums: sum %.4f (numpy %.4f): %s\n", want, peer["sum"].get<double>(),
              same ? "both sides summed the same data" : "MISMATCH");
  if (!same) verdict(false);
  const double best_written = std::min(median(written[0]), median(written[1]));
  const double best_refreshed = std::min(median(refreshed[0]), median(refreshed[1]));
  std::printf("    just written, faster amphora load vs numpy.load + sum:    %.2fx  (target >= 1.00x: %s)\n",
              np_written / best_written, verdict(np_written / best_written >= 1.0));
  std::printf("    after a sequential read, faster load vs numpy.load + sum: %.2fx  (target >= 1.00x: %s)\n",
              np_refreshed / best_refreshed, verdict(np_refreshed / best_refreshed >= 1.0));
}

}  // namespace amphora_bench
