// Section "sparse": a 200,000 x 200,000 CSR matrix with 10,000,000 stored
// float64 values (int32 indices), saved as an amphora.sparse artifact,
// against scipy.sparse.save_npz (uncompressed) and load_npz.

#include "bench_common.hpp"

#include <amphora/sparse.hpp>

#include <cmath>

namespace amphora_bench {

namespace {

// `per_row` distinct sorted columns in each row, values uniform in [-1, 1).
amphora::SparseMatrix make_csr(std::int64_t n, std::int64_t per_row) {
  using amphora::Tensor;
  const std::int64_t nnz = n * per_row;
  Tensor data = Tensor::zeros(amphora::DType::float64, {nnz});
  Tensor indices = Tensor::zeros(amphora::DType::int32, {nnz});
  Tensor indptr = Tensor::zeros(amphora::DType::int32, {n + 1});
  auto d = data.mutable_values<double>();
  auto idx = indices.mutable_values<std::int32_t>();
  auto ptr = indptr.mutable_values<std::int32_t>();
  for (std::int64_t r = 0; r <= n; ++r) ptr[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(r * per_row);
  amphora::parallel_for(64, [&](std::size_t part) {
    Rng rng(part + 1);
    const std::int64_t begin = n * static_cast<std::int64_t>(part) / 64, end = n * static_cast<std::int64_t>(part + 1) / 64;
    const std::int64_t stride = n / per_row;  // one column in each band of `stride`, so columns are distinct
    for (std::int64_t r = begin; r < end; ++r)
      for (std::int64_t k = 0; k < per_row; ++k) {
        const auto at = static_cast<std::size_t>(r * per_row + k);
        idx[at] = static_cast<std::int32_t>(k * stride + static_cast<std::int64_t>(rng.below(static_cast<std::size_t>(stride))));
        d[at] = rng.unit() * 2.0 - 1.0;
      }
  });
  return amphora::SparseMatrix::csr(n, n, data, indices, indptr);
}

double sum_f64(std::span<const double> v) {
  double acc[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= v.size(); i += 8)
    for (std::size_t k = 0; k < 8; ++k) acc[k] += v[i + k];
  double s = 0;
  for (; i < v.size(); ++i) s += v[i];
  for (double a : acc) s += a;
  return s;
}

}  // namespace

void run_sparse(const Options& o, Verdicts& verdict) {
  const std::int64_t n = o.quick ? 20000 : 200000, per_row = 50;
  const amphora::SparseMatrix matrix = make_csr(n, per_row);
  const double want_sum = sum_f64(matrix.data().values<double>());
  std::int64_t want_indices = 0;
  for (std::int32_t v : matrix.indices().values<std::int32_t>()) want_indices += v;
  std::printf("\nSparse: a %lld x %lld CSR matrix, %lld float64 values, int32 indices, as an amphora.sparse\n",
              static_cast<long long>(n), static_cast<long long>(n), static_cast<long long>(matrix.nnz()));
  std::printf("  scipy: the same csr_matrix, scipy.sparse.save_npz(compressed=False) / load_npz\n");

  const fs::path dir = o.dir / "store-sparse";
  // The peak is measured over what the process held before each save (the
  // matrix included), as for tables and records, so memory an earlier section
  // left to malloc does not count against this one.
  const SaveTimings timed = time_saves(o, dir, matrix, "graph");
  const std::vector<double>& saves = timed.seconds;
  const amphora::Digest digest = timed.digest;
  auto store = amphora::Store::open(dir);
  const std::uint64_t payload = store.open_artifact(digest).manifest().payload_bytes();

  // Load and one pass over the stored values, mapped and eager.
  std::vector<double> mapped, eager;
  bool same = true;
  for (int r = 0; r < o.repeats; ++r)
    for (bool read_now : {false, true}) {
      touch_scratch();
      auto t0 = Clock::now();
      auto back = store.load<amphora::SparseMatrix>(digest, {.eager = read_now});
      const double sum = sum_f64(back.data().values<double>());
      (read_now ? eager : mapped).push_back(seconds_since(t0));
      if (r == 0) same = same && back.bit_equal(matrix) && sum == want_sum;
    }
  retire(dir);

  const fs::path input = o.dir / "sparse-input.npz";
  amphora::write_npz(matrix, input);
  auto peers = run_peer(AMPHORA_SCIPY_PEER, {std::to_string(o.repeats), o.dir.string(), input.string()});
  retire(input);
  if (peers.empty() || !peers[0].contains("bytes")) {
    std::printf("  scipy peer produced no figures\n");
    verdict(false);
    return;
  }
  const auto& peer = peers[0];
  const double ps = peer_median(peer, "save_s"), pl = peer_median(peer, "load_s");
  const auto peer_bytes = peer["bytes"].get<std::uint64_t>();
  const double peer_sum = peer["data_sum"].get<double>();
  same = same && peer["nnz"].get<std::int64_t>() == matrix.nnz() && peer["format"] == "csr" &&
         peer["indices_sum"].get<std::int64_t>() == want_indices && peer["index_dtype"] == "int32" &&
         std::abs(peer_sum - want_sum) <= 1e-9 * std::max(1.0, std::abs(want_sum));

  const double s = median(saves), lm = median(mapped), le = median(eager);
  std::printf("  ratio = scipy time / amphora time (> 1: Amphora is faster)\n");
  std::printf("  %-44s %12s %12s %9s\n", "", "amphora", "scipy", "ratio");
  std::printf("  %-44s %9.1f ms %9.1f ms %8.2fx\n", "save (fresh store, hashed, published)", s * 1e3, ps * 1e3,
              ps / s);
  std::printf("  %-44s %9.1f ms %9.1f ms %8.2fx\n", "load + sum of values, mapped", lm * 1e3, pl * 1e3, pl / lm);
  std::printf("  %-44s %9.1f ms %9.1f ms %8.2fx\n", "load + sum of values, eager", le * 1e3, pl * 1e3, pl / le);
  std::printf("  %-44s %9.2f MB %9.2f MB %8.3fx\n", "bytes on disk (payload / .npz)", payload / 1e6,
              peer_bytes / 1e6, static_cast<double>(payload) / static_cast<double>(peer_bytes));
  std::printf("  %-44s %9.0f    %9.0f     (each side's bytes on disk / its save time)\n", "save MB/s",
              mb_per_s(payload, s), mb_per_s(peer_bytes, ps));
  std::printf("  %-44s %6.0f/%-6.0f %9.0f     (mapped / eager; the same over the load + sum time)\n",
              "load + sum MB/s", mb_per_s(payload, lm), mb_per_s(payload, le), mb_per_s(peer_bytes, pl));
  std::printf("  content: %s\n", same ? "loaded back equal; scipy holds the same nnz, index and value sums" : "MISMATCH");
  if (!same) verdict(false);
  const double over = median(timed.rss_over);
  std::printf("    save vs save_npz:      %.2fx  (target >= 1.00x: %s)\n", ps / s, verdict(ps / s >= 1.0));
  std::printf("    load vs load_npz:      %.2fx mapped, %.2fx eager  (target >= 1.00x: %s)\n", pl / lm, pl / le,
              verdict(pl / std::max(lm, le) >= 1.0));
  std::printf("    peak RSS saving:       matrix in memory + %.0f MiB (target <= 64 MiB: %s)\n", over / 1048576.0,
              verdict(over <= 64.0 * 1048576));
}

}  // namespace amphora_bench
