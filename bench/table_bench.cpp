// Section "table": a table of 5,000,000 rows (int64, float64, bool, and a
// string column drawn from a Zipf vocabulary of 50,000 words) saved as an
// amphora.table, against pandas DataFrame.to_pickle / read_pickle,
// DataFrame.to_hdf / read_hdf (PyTables; fixed and table formats, plain and
// blosc:lz4) and to_parquet when pyarrow is installed.

#include "bench_common.hpp"

#include <amphora/npy.hpp>
#include <amphora/table.hpp>

#include <cmath>
#include <fstream>

namespace amphora_bench {

namespace {

struct TableData {
  std::vector<std::string> vocabulary;
  std::vector<std::int32_t> codes;
  amphora::Table table;
};

TableData make_table(std::size_t rows) {
  TableData d;
  Rng rng(77);
  constexpr std::size_t kWords = 50000;
  for (std::size_t w = 0; w < kWords; ++w) {
    std::string word;
    for (std::size_t n = w; word.size() < 3 || n > 0; n /= 26) word += static_cast<char>('a' + n % 26);
    word += std::string(rng.below(6), static_cast<char>('a' + rng.below(26)));
    d.vocabulary.push_back(word);
  }
  // Zipf(1.07) by inverse CDF: word k (from 1) has weight 1 / k^1.07.
  std::vector<double> cdf(kWords);
  double total = 0;
  for (std::size_t k = 0; k < kWords; ++k) cdf[k] = total += 1.0 / std::pow(static_cast<double>(k + 1), 1.07);
  std::vector<std::int64_t> ids(rows);
  std::vector<double> values(rows);
  std::vector<bool> flags(rows);
  std::vector<std::string_view> words(rows);
  d.codes.resize(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    ids[i] = static_cast<std::int64_t>(rng.next() >> 1);
    values[i] = rng.unit() * 2000.0 - 1000.0;
    flags[i] = rng.below(2) == 1;
    const double u = rng.unit() * total;
    d.codes[i] = static_cast<std::int32_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    words[i] = d.vocabulary[static_cast<std::size_t>(d.codes[i])];
  }
  d.table = amphora::Table::make({
      {"id", amphora::Column::of(ids)},
      {"value", amphora::Column::of(values)},
      {"flag", amphora::Column::numbers(amphora::Tensor::from_values<bool>({static_cast<std::int64_t>(rows)}, flags))},
      {"word", amphora::Column::strings(std::span<const std::string_view>(words))},
  });
  return d;
}

struct Pass {
  std::int64_t id_sum = 0;  // wrapping, as numpy's int64 sum
  double value_sum = 0;
  std::int64_t flags = 0, word_bytes = 0;
};

Pass one_pass(const amphora::Table& t) {
  Pass p;
  std::uint64_t ids = 0;
  for (std::int64_t v : t.column("id").values().values<std::int64_t>()) ids += static_cast<std::uint64_t>(v);
  p.id_sum = static_cast<std::int64_t>(ids);
  for (double v : t.column("value").values().values<double>()) p.value_sum += v;
  for (bool v : t.column("flag").values().values<bool>()) p.flags += v;
  const auto& words = t.column("word");
  for (std::size_t i = 0; i < words.size(); ++i) p.word_bytes += static_cast<std::int64_t>(words.string(i).size());
  return p;
}

void write_inputs(const TableData& d, const fs::path& dir) {
  fs::create_directories(dir);
  for (const char* name : {"id", "value", "flag"})
    amphora::write_npy(d.table.column(name).values(), dir / (std::string(name) + ".npy"));
  amphora::write_npy(amphora::Tensor::from_values<std::int32_t>({static_cast<std::int64_t>(d.codes.size())}, d.codes),
                     dir / "word_codes.npy");
  std::ofstream words(dir / "words.txt", std::ios::binary);
  for (std::size_t w = 0; w < d.vocabulary.size(); ++w) words << (w ? "\n" : "") << d.vocabulary[w];
}

}  // namespace

void run_table(const Options& o, Verdicts& verdict) {
  const std::size_t rows = o.quick ? 200000 : 5000000;
  const TableData data = make_table(rows);
  const Pass want = one_pass(data.table);
  std::printf("\nTable: %zu rows {id int64, value float64, flag bool, word string from a Zipf(1.07) vocabulary of "
              "50,000 words} as an amphora.table\n", rows);
  std::printf("  pandas: the same DataFrame (word an object column), to_pickle / read_pickle\n");

  const fs::path dir = o.dir / "store-table";
  const SaveTimings timed = time_saves(o, dir, data.table, "table");
  const std::vector<double>& saves = timed.seconds;
  const std::vector<double>& overheads = timed.rss_over;
  const amphora::Digest digest = timed.digest;
  auto store = amphora::Store::open(dir);
  const std::uint64_t payload = store.open_artifact(digest).manifest().payload_bytes();

  std::vector<double> loads, one_column;
  bool same = true;
  for (int r = 0; r < o.repeats; ++r) {
    touch_scratch();
    auto t0 = Clock::now();
    auto back = store.load<amphora::Table>(digest);
    const Pass got = one_pass(back);
    loads.push_back(seconds_since(t0));
    if (r == 0)
      same = back.equals(data.table) && got.id_sum == want.id_sum && got.value_sum == want.value_sum &&
             got.flags == want.flags && got.word_bytes == want.word_bytes;
    touch_scratch();
    t0 = Clock::now();
    auto value = amphora::load_table(store.open_artifact(digest), {.columns = {"value"}});
    double s = 0;
    for (double v : value.column(0).values().values<double>()) s += v;
    one_column.push_back(seconds_since(t0));
    asm volatile("" : : "r"(&s) : "memory");
  }
  retire(dir);

  const fs::path inputs = o.dir / "table-input";
  write_inputs(data, inputs);
  auto peers = run_peer(AMPHORA_PANDAS_PEER, {std::to_string(o.repeats), o.dir.string(), inputs.string()});
  retire(inputs);
  if (peers.empty() || !peers[0].contains("pickle")) {
    std::printf("  pandas peer produced no figures\n");
    verdict(false);
    return;
  }
  const auto& pk = peers[0]["pickle"];
  const double ps = peer_median(pk, "save_s"), pl = peer_median(pk, "load_s");
  same = same && pk["id_sum"].get<std::int64_t>() == want.id_sum && pk["flags"].get<std::int64_t>() == want.flags &&
         pk["word_bytes"].get<std::int64_t>() == want.word_bytes &&
         std::abs(pk["value_sum"].get<double>() - want.value_sum) <= 1e-6 * std::max(1.0, std::abs(want.value_sum));
  const double s = median(saves), l = median(loads), c = median(one_column);
  std::printf("  ratio = pandas time / amphora time (> 1: Amphora is faster)\n");
  std::printf("  %-44s %12s %12s %9s\n", "", "amphora", "pickle", "ratio");
  std::printf("  %-44s %9.1f ms %9.1f ms %8.2fx\n", "save (fresh store, hashed, published)", s * 1e3, ps * 1e3, ps / s);
  std::printf("  %-44s %9.1f ms %9.1f ms %8.2fx\n", "load + one pass over every column", l * 1e3, pl * 1e3, pl / l);
  std::printf("  %-44s %9.1f ms %9.1f ms %8.2fx  (pickle loads everything)\n", "load one column + sum", c * 1e3,
              pl * 1e3, pl / c);
  std::printf("  %-44s %9.2f MB %9.2f MB %8.3fx\n", "bytes on disk", payload / 1e6, pk["bytes"].get<double>() / 1e6,
              static_cast<double>(payload) / pk["bytes"].get<double>());
  std::printf("  %-44s %9.0f    %9.0f     (each side's bytes on disk / its save time)\n", "save MB/s",
              mb_per_s(payload, s), mb_per_s(pk["bytes"].get<std::uint64_t>(), ps));
  std::printf("  %-44s %9.0f    %9.0f     (the same over the load + pass time)\n", "load + pass MB/s",
              mb_per_s(payload, l), mb_per_s(pk["bytes"].get<std::uint64_t>(), pl));
  if (peers[0].contains("parquet")) {
    const auto& pq = peers[0]["parquet"];
    std::printf("  parquet (pyarrow): save %.1f ms (%.2fx), load %.1f ms (%.2fx), %.2f MB\n",
                peer_median(pq, "save_s") * 1e3, peer_median(pq, "save_s") / s, peer_median(pq, "load_s") * 1e3,
                peer_median(pq, "load_s") / l, pq["bytes"].get<double>() / 1e6);
  } else {
    std::printf("  parquet: skipped (pyarrow is not installed)\n");
  }
  if (peers[0].contains("hdf_fixed")) {
    // DataFrame.to_hdf (PyTables): the HDF5 way to keep a frame.
    std::printf("  %-44s %12s %12s %9s %9s %9s\n", "PyTables (to_hdf / read_hdf + pass)", "save", "load+pass", "save x",
                "load x", "bytes x");
    for (const char* variant : {"hdf_fixed", "hdf_fixed_blosc_lz4", "hdf_table", "hdf_table_blosc_lz4"}) {
      if (!peers[0].contains(variant)) continue;
      const auto& h = peers[0][variant];
      const double hs = peer_median(h, "save_s"), hl = peer_median(h, "load_s");
      same = same && h["id_sum"].get<std::int64_t>() == want.id_sum && h["word_bytes"].get<std::int64_t>() == want.word_bytes;
      std::printf("  %-44s %9.1f ms %9.1f ms %8.2fx %8.2fx %8.3fx  (%.2f MB)\n", variant + 4, hs * 1e3, hl * 1e3,
                  hs / s, hl / l, static_cast<double>(payload) / h["bytes"].get<double>(), h["bytes"].get<double>() / 1e6);
    }
    const double fs_ = peer_median(peers[0]["hdf_fixed"], "save_s"), fl = peer_median(peers[0]["hdf_fixed"], "load_s");
    std::printf("    save vs to_hdf fixed:  %.2fx  (target >= 5.00x: %s)\n", fs_ / s, verdict(fs_ / s >= 5.0));
    std::printf("    load vs read_hdf fixed: %.2fx  (target >= 5.00x: %s)\n", fl / l, verdict(fl / l >= 5.0));
    if (peers[0].contains("hdf_fixed_blosc_lz4")) {
      const double b = peers[0]["hdf_fixed_blosc_lz4"]["bytes"].get<double>();
      std::printf("    bytes vs to_hdf fixed blosc:lz4: %.3fx  (target <= 1.00x: %s)\n", static_cast<double>(payload) / b,
                  verdict(static_cast<double>(payload) <= b));
    }
  } else {
    std::printf("  to_hdf: skipped (PyTables is not installed: scripts/install-deps.sh --bench)\n");
  }
  std::printf("  content: %s\n", same ? "loaded back equal; pandas holds the same sums and string bytes" : "MISMATCH");
  if (!same) verdict(false);
  const double over = median(overheads);
  std::printf("    save vs to_pickle:     %.2fx  (target >= 3.00x: %s)\n", ps / s, verdict(ps / s >= 3.0));
  std::printf("    load vs read_pickle:   %.2fx  (target >= 3.00x: %s)\n", pl / l, verdict(pl / l >= 3.0));
  std::printf("    peak RSS saving:       table in memory + %.0f MiB (target <= 64 MiB: %s)\n", over / 1048576.0,
              verdict(over <= 64.0 * 1048576));
}

}  // namespace amphora_bench
