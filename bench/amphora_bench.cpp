// Amphora's benchmark, run side by side with its peers on the same data in
// one invocation:
//
//   tensor     save/load of a tensor vs numpy.save / numpy.load, LZ4 vs `lz4 -b1`
//   composite  a Menpo-like map of model and images vs pickle (protocol 5)
//   records    100,000 detection records (a columnar record list) vs pickle
//   tiny       per-artifact overhead: 1,000 tiny saves vs one pickle file each
//   pass       open + full sum of a float32 tensor vs numpy.load + sum
//   sparse     a 200,000 x 200,000 CSR matrix (10M values) vs scipy.sparse save_npz / load_npz
//   table      5,000,000 rows (int64, float64, bool, Zipf words) vs pandas to_pickle / read_pickle
//   jsonl      200,000 COCO-style JSON records (amphora.records) vs JSON lines (json) and pickle
//   pipeline   fully cached reruns: a 100-step chain, 1,000-step chain and wide DAG; per-step costs
//   remote     push / pull of a 1 GiB tensor and of 1,000 small artifacts through a Ceph RGW vs boto3
//   hdf5       five tensors shaped like users' data vs libhdf5: contiguous, shuffle + deflate, Blosc
//
//   amphora_bench [--mib N] [--repeats R] [--dir DIR] [--quick] [--no-settle] [--sections a,b,...]
//
// Figures are medians over R runs. MB/s are 10^6 bytes per second (as lz4
// prints them). Before each timed operation a 64 MiB scratch block is touched
// and freed, because memory left idle on these machines is handed back to the
// host and is slow to touch again. The Python peers do the same.

#include "bench_common.hpp"

#include <amphora/npy.hpp>

#include "lz4_frames.hpp"
#include "piece_hash.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using amphora::Compression;
using amphora::DType;
using amphora::Tensor;
using namespace amphora_bench;

namespace {

Tensor make_random_f32(std::int64_t mib) {
  Tensor t = Tensor::zeros(DType::float32, {mib * 256, 1024});
  auto v = t.mutable_values<float>();
  amphora::parallel_for(64, [&](std::size_t part) {
    std::uint64_t x = 0x9E3779B97F4A7C15ull * (part + 1);
    std::size_t begin = v.size() * part / 64, end = v.size() * (part + 1) / 64;
    for (std::size_t i = begin; i < end; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v[i] = static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    }
  });
  return t;
}

Tensor make_compressible_i32(std::int64_t mib) {
  Tensor t = Tensor::zeros(DType::int32, {mib * 256, 1024});
  auto v = t.mutable_values<std::int32_t>();
  amphora::parallel_for(64, [&](std::size_t part) {
    std::uint64_t x = 0x2545F4914F6CDD1Dull * (part + 1);
    std::size_t begin = v.size() * part / 64, end = v.size() * (part + 1) / 64;
    for (std::size_t i = begin; i < end; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v[i] = static_cast<std::int32_t>(i / 64) + static_cast<std::int32_t>(x & 3);  // slow ramp plus noise
    }
  });
  return t;
}

struct Row {
  std::string what;
  double mbps = 0;
  std::string extra;
};
std::vector<Row> g_rows;

void report(const std::string& what, double mbps, const std::string& extra = "") {
  g_rows.push_back({what, mbps, extra});
  std::printf("  %-44s %9.0f MB/s  %s\n", what.c_str(), mbps, extra.c_str());
  std::fflush(stdout);
}

struct Measured {
  double save_s = 0, load_s = 0, open_s = 0;
  std::uint64_t file_bytes = 0, peak_save_kib = 0;
};

Measured bench_amphora(const Tensor& t, Compression c, const Options& o, const std::string& label) {
  Measured m;
  std::vector<double> saves, peaks;
  for (int r = 0; r < o.repeats; ++r) {
    auto store = fresh_store(o.dir / "store-save");
    touch_scratch();
    reset_peak_rss();
    auto t0 = Clock::now();
    auto saved = store.save(t, {.options = amphora::TensorOptions{.compression = c}});
    saves.push_back(seconds_since(t0));
    peaks.push_back(static_cast<double>(status_kib("VmHWM:")));
    m.file_bytes = store.open_artifact(saved.digest.str()).manifest().payload_bytes();
  }
  retire(o.dir / "store-save");
  m.save_s = median(saves);
  m.peak_save_kib = static_cast<std::uint64_t>(median(peaks));

  auto store = fresh_store(o.dir / "store-load");
  auto digest = store.save(t, {.options = amphora::TensorOptions{.compression = c}}).digest.str();
  std::vector<double> opens, loads;
  for (int r = 0; r < o.repeats; ++r) {
    touch_scratch();
    auto t0 = Clock::now();
    Tensor back = store.load<Tensor>(digest);
    opens.push_back(seconds_since(t0));
    if (c == Compression::none) {  // a full read into fresh memory
      Tensor copy = back.copy();
      asm volatile("" : : "r"(copy.data()) : "memory");
    }
    loads.push_back(seconds_since(t0));
    if (r == 0 && !back.bit_equal(t)) {
      std::cerr << "amphora_bench: " << label << " did not round-trip\n";
      std::exit(1);
    }
  }
  m.open_s = median(opens);
  m.load_s = median(loads);
  return m;
}

struct Peer {
  double save_s = 0, load_s = 0;
  std::uint64_t bytes = 0;
};

std::map<std::string, Peer> run_numpy(const Options& o, const std::vector<fs::path>& files) {
  std::string cmd = "/usr/bin/python3 " + std::string(AMPHORA_NUMPY_PEER) + " " + std::to_string(o.repeats) + " " +
                    o.dir.string();
  for (const auto& f : files) cmd += " " + f.string();
  std::map<std::string, Peer> out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return out;
  char line[65536];
  while (std::fgets(line, sizeof line, pipe)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    Peer p;
    p.save_s = median(j["save_s"].get<std::vector<double>>());
    p.load_s = median(j["load_s"].get<std::vector<double>>());
    p.bytes = j["bytes"].get<std::uint64_t>();
    out[j["file"].get<std::string>()] = p;
  }
  if (::pclose(pipe) != 0) std::cerr << "amphora_bench: numpy peer failed (is python3-numpy installed?)\n";
  return out;
}

// `lz4 -b1` on a file: compression and decompression MB/s on one core.
std::pair<double, double> run_lz4_tool(const fs::path& file) {
  std::string cmd = "lz4 -b1 -i3 " + file.string() + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return {0, 0};
  std::string all;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) all.append(buf, n);
  ::pclose(pipe);
  std::replace(all.begin(), all.end(), '\r', '\n');
  double comp = 0, decomp = 0;
  std::istringstream lines(all);
  std::string line;
  while (std::getline(lines, line)) {
    auto a = line.find("MB/s ,");
    if (a == std::string::npos) continue;
    auto comma = line.rfind(',', a);
    auto b = line.find("MB/s", a + 6);
    comp = std::stod(line.substr(comma + 1, a - comma - 1));
    decomp = std::stod(line.substr(a + 6, b - a - 6));
  }
  return {comp, decomp};
}

// The chunk encoder alone, on `threads` threads, as the materializer uses it.
std::pair<double, double> lz4_kernel(const Tensor& t, std::size_t threads, int repeats) {
  const std::size_t chunk = amphora::detail::kMaxFrameContent;
  const std::size_t chunks = (t.nbytes() + chunk - 1) / chunk;
  std::vector<std::vector<std::byte>> frames(chunks);
  auto piece = [&](std::size_t k) {
    return amphora::ConstBytes(t.data() + k * chunk, std::min(chunk, t.nbytes() - k * chunk));
  };
  std::vector<double> enc, dec;
  auto out = amphora::Buffer::allocate(t.nbytes());
  for (int r = 0; r < repeats; ++r) {
    touch_scratch();
    auto t0 = Clock::now();
    amphora::parallel_for(chunks, [&](std::size_t k) { amphora::detail::encode_frame(piece(k), true, frames[k]); }, threads);
    enc.push_back(seconds_since(t0));
    touch_scratch();
    t0 = Clock::now();
    amphora::parallel_for(chunks, [&](std::size_t k) {
      amphora::detail::decode_frame(frames[k], {out->mutable_data() + k * chunk, piece(k).size()}, "bench");
    }, threads);
    dec.push_back(seconds_since(t0));
  }
  return {mb_per_s(t.nbytes(), median(enc)), mb_per_s(t.nbytes(), median(dec))};
}

void hash_write_limit(const Tensor& t, const Options& o) {
  std::vector<double> hash, pieces, write;
  for (int r = 0; r < o.repeats; ++r) {
    touch_scratch();
    auto t0 = Clock::now();
    auto d = amphora::Sha256::of(t.data(), t.nbytes());
    hash.push_back(seconds_since(t0));
    asm volatile("" : : "r"(d.bytes.data()) : "memory");
    touch_scratch();
    amphora::ConstBytes whole(t.data(), t.nbytes());
    t0 = Clock::now();
    auto digests = amphora::detail::hash_pieces(amphora::detail::PartList({&whole, 1}),
                                                amphora::Manifest::piece_size_for(t.nbytes()), {});
    pieces.push_back(seconds_since(t0));
    asm volatile("" : : "r"(digests.data()) : "memory");
    fs::path f = o.dir / "write-probe.bin";
    retire(f);
    touch_scratch();
    t0 = Clock::now();
    int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::size_t done = 0;
    while (done < t.nbytes()) {
      ssize_t n = ::write(fd, t.data() + done, std::min<std::size_t>(t.nbytes() - done, 1u << 30));
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    write.push_back(seconds_since(t0));
  }
  retire(o.dir / "write-probe.bin");
  double h = mb_per_s(t.nbytes(), median(hash)), w = mb_per_s(t.nbytes(), median(write));
  double cores = static_cast<double>(amphora::parallel_threads());
  double p = mb_per_s(t.nbytes(), median(pieces)) / cores;
  // Each byte costs 1/p + 1/w core-seconds; the cores share that work.
  double limit = cores / (1 / p + 1 / w);
  std::printf("  SHA-256 one stream on one core %.0f MB/s; pieces (as saving hashes them) %.0f MB/s per core\n", h, p);
  std::printf("  write to page cache on one core %.0f MB/s\n", w);
  std::printf("  hash-plus-write limit on %.0f cores: %.0f MB/s\n\n", cores, limit);
}

// The tensor figures: save/load against numpy.save/numpy.load, LZ4 against `lz4 -b1`.
void run_tensor(const Options& o, Verdicts& verdict) {
  const std::uint64_t payload = static_cast<std::uint64_t>(o.mib) << 20;
  struct Dataset {
    std::string name;
    fs::path npy;
    std::map<Compression, Measured> amphora;
  };
  std::vector<Dataset> sets = {{"float32 random", o.dir / "f32.npy", {}}, {"int32 compressible", o.dir / "i32.npy", {}}};
  std::pair<double, double> kernel1, kernel2;
  for (std::size_t s = 0; s < sets.size(); ++s) {
    Tensor t = s == 0 ? make_random_f32(o.mib) : make_compressible_i32(o.mib);
    std::printf("%s, %s\n", sets[s].name.c_str(), s == 0 ? "incompressible" : "about 3:1 with LZ4");
    if (s == 0) hash_write_limit(t, o);
    for (Compression c : {Compression::none, Compression::lz4}) {
      auto m = bench_amphora(t, c, o, sets[s].name);
      sets[s].amphora[c] = m;
      std::string mode = c == Compression::none ? "raw" : "lz4";
      report("amphora save " + mode, mb_per_s(payload, m.save_s),
             "file " + fmt("%.1f MiB", m.file_bytes / 1048576.0) + ", peak RSS " +
                 fmt("%.0f MiB", m.peak_save_kib / 1024.0) + " (payload + " +
                 fmt("%.0f MiB", (static_cast<double>(m.peak_save_kib) * 1024 - static_cast<double>(payload)) / 1048576.0) + ")");
      if (c == Compression::none) {
        report("amphora open raw (mmap)", mb_per_s(payload, m.open_s), fmt("%.3f ms", m.open_s * 1e3));
        report("amphora load raw into fresh memory", mb_per_s(payload, m.load_s));
      } else {
        report("amphora load lz4 (parallel decompress)", mb_per_s(payload, m.load_s));
      }
    }
    amphora::write_npy(t, sets[s].npy);
    if (s == 1) {
      kernel1 = lz4_kernel(t, 1, o.repeats);
      kernel2 = lz4_kernel(t, 2, o.repeats);
    }
    std::printf("\n");
  }

  std::printf("numpy.save / numpy.load (/usr/bin/python3) on the same data\n");
  auto peers = run_numpy(o, {sets[0].npy, sets[1].npy});
  auto lz4tool = run_lz4_tool(sets[1].npy);
  for (auto& set : sets) retire(set.npy);

  std::printf("\nResults (ratios > 1 mean Amphora is faster)\n");
  for (auto& set : sets) {
    auto it = peers.find(set.npy.string());
    if (it == peers.end()) {
      std::printf("  %s: numpy peer produced no figures\n", set.name.c_str());
      verdict(false);
      continue;
    }
    const Peer& p = it->second;
    const Measured& raw = set.amphora[Compression::none];
    const Measured& lz = set.amphora[Compression::lz4];
    double save_ratio = p.save_s / raw.save_s;
    double load_ratio = p.load_s / raw.load_s;
    std::printf("  %s: numpy.save %.0f MB/s, numpy.load %.0f MB/s, file %.1f MiB\n", set.name.c_str(),
                mb_per_s(payload, p.save_s), mb_per_s(payload, p.load_s), p.bytes / 1048576.0);
    std::printf("    save raw vs numpy.save:        %.2fx  (target >= 0.50x: %s)\n", save_ratio, verdict(save_ratio >= 0.5));
    std::printf("    save lz4 vs numpy.save:        %.2fx\n", p.save_s / lz.save_s);
    std::printf("    open raw:                      %.3f ms (target < 1 ms: %s)\n", raw.open_s * 1e3,
                verdict(raw.open_s < 1e-3));
    std::printf("    full read raw vs numpy.load:   %.2fx  (target >= 1.00x: %s)\n", load_ratio, verdict(load_ratio >= 1.0));
    std::printf("    load lz4 vs numpy.load:        %.2fx\n", p.load_s / lz.load_s);
    double over = static_cast<double>(raw.peak_save_kib) * 1024 - static_cast<double>(payload);
    std::printf("    peak RSS saving raw:           payload + %.0f MiB (target <= 64 MiB: %s)\n", over / 1048576.0,
                verdict(over <= 64.0 * 1048576));
    double over_lz = static_cast<double>(lz.peak_save_kib) * 1024 - static_cast<double>(payload);
    std::printf("    peak RSS saving lz4:           payload + %.0f MiB (target <= 64 MiB: %s)\n", over_lz / 1048576.0,
                verdict(over_lz <= 64.0 * 1048576));
  }
  std::printf("  LZ4 on the compressible data: lz4 -b1 %.0f MB/s compress, %.0f MB/s decompress (one core)\n",
              lz4tool.first, lz4tool.second);
  std::printf("    amphora 1 thread:  %.0f MB/s compress, %.0f MB/s decompress; %.2fx of lz4 -b1 (target >= 0.80x: %s)\n",
              kernel1.first, kernel1.second, kernel1.first / lz4tool.first, verdict(kernel1.first >= 0.8 * lz4tool.first));
  std::printf("    amphora 2 threads: %.0f MB/s compress, %.0f MB/s decompress; %.2fx of one thread (target > 1: %s)\n",
              kernel2.first, kernel2.second, kernel2.first / kernel1.first, verdict(kernel2.first > kernel1.first));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool mib_given = false, repeats_given = false;
  bool settle = true;
  const std::set<std::string> known = {"tensor", "composite", "records", "tiny", "pass", "sparse", "table", "jsonl", "pipeline", "remote", "hdf5"};
  auto usage = [] {
    std::cerr << "usage: amphora_bench [--mib N] [--repeats R] [--dir DIR] [--quick] [--no-settle]\n"
                 "                     [--sections tensor,composite,records,tiny,pass,sparse,table,jsonl,pipeline,remote,hdf5]\n";
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) {
      o.mib = std::stoll(argv[++i]);
      mib_given = true;
    } else if (a == "--repeats" && i + 1 < argc) {
      o.repeats = std::stoi(argv[++i]);
      repeats_given = true;
    } else if (a == "--dir" && i + 1 < argc) {
      o.dir = argv[++i];
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--no-settle") {
      settle = false;
    } else if (a == "--sections" && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      std::string name;
      while (std::getline(list, name, ',')) {
        if (!known.count(name)) {
          std::cerr << "amphora_bench: unknown section '" << name << "'\n";
          return usage();
        }
        o.sections.insert(name);
      }
    } else {
      return usage();
    }
  }
  // --quick shrinks every count (and the tensors, unless --mib says otherwise).
  if (o.quick && !mib_given) o.mib = 16;
  if (o.quick && !repeats_given) o.repeats = 2;
  if (o.mib < 1 || o.repeats < 1) {
    std::cerr << "amphora_bench: --mib and --repeats must be positive\n";
    return 2;
  }
  fs::create_directories(o.dir);
  set_scratch_dir(o.dir);
  std::printf("amphora_bench: %lld MiB tensors, median of %d runs, %zu threads, scratch dir %s%s\n\n",
              static_cast<long long>(o.mib), o.repeats, amphora::parallel_threads(), o.dir.string().c_str(),
              o.quick ? " (quick: small counts)" : "");
  // A quick run checks content, not timings: it never waits.
  settle_after_recent_cleanup(settle && !o.quick);
  // Figures are only as good as the machine is quiet: say how busy it was.
  auto loadavg = [] {
    std::ifstream in("/proc/loadavg");
    std::string one, five;
    in >> one >> five;
    return one + " (1 min), " + five + " (5 min)";
  };
  const std::string load_before = loadavg();
  Verdicts verdict;
  if (o.runs("tensor")) run_tensor(o, verdict);
  if (o.runs("composite")) run_composite(o, verdict);
  if (o.runs("records")) run_records(o, verdict);
  if (o.runs("tiny")) run_tiny(o, verdict);
  if (o.runs("pass")) run_pass(o, verdict);
  if (o.runs("sparse")) run_sparse(o, verdict);
  if (o.runs("table")) run_table(o, verdict);
  if (o.runs("jsonl")) run_jsonl(o, verdict);
  if (o.runs("pipeline")) run_pipeline(o, verdict);
  if (o.runs("remote")) run_remote(o, verdict);
  if (o.runs("hdf5")) run_hdf5(o, verdict);
  std::printf("\nload average on this machine: %s at the start, %s at the end\n", load_before.c_str(),
              loadavg().c_str());
  // Deleted only now: see retire().
  remove_retired();
  std::printf("\n%s\n", verdict.all_ok ? "all targets met" : "some targets missed");
  return 0;
}
