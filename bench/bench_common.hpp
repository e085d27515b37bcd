#pragma once
// Helpers shared by the sections of amphora_bench: options, timing, the
// warm-memory discipline, deterministic data, the Python peers and verdicts.

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/tensor.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace amphora_bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::int64_t mib = 256;
  int repeats = 5;
  fs::path dir = "bench-tmp";
  /// --quick: smaller counts everywhere, for a smoke test.
  bool quick = false;
  /// Sections to run; all when empty.
  std::set<std::string> sections;
  bool runs(const std::string& section) const { return sections.empty() || sections.count(section) > 0; }
};

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/// Touches and frees a 64 MiB block before each timed operation: memory left
/// idle on these machines is handed back to the host and is slow to touch again.
inline void touch_scratch() {
  constexpr std::size_t kScratch = 64u << 20;
  std::unique_ptr<char[]> block(new char[kScratch]);
  std::memset(block.get(), 1, kScratch);
  asm volatile("" : : "r"(block.get()) : "memory");
}

/// A "Key: N kB" figure of /proc/self/status, in KiB (0 when absent).
std::uint64_t status_kib(const char* key);
/// Resets the kernel's peak-RSS mark so VmHWM covers only what follows.
void reset_peak_rss();

inline double mb_per_s(std::uint64_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e6 : 0; }

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// Where retire() parks scratch files: `dir`/retired. Call once, first.
void set_scratch_dir(const fs::path& dir);

/// Moves `path` (a file or a directory tree) aside instead of deleting it,
/// after truncating its files so their pages are freed. On an ext4 without a
/// journal (these machines) the inode allocator skips every inode freed in
/// the last minutes, one lookup each, so deleting a store's thousands of
/// files between repeats would make every later file creation slower and
/// the figures depend on what ran before. Nothing happens if `path` is absent.
void retire(const fs::path& path);

/// Deletes everything retired so far and writes the deletion back to disk;
/// the bench calls it once, at the end.
void remove_retired();

/// Writes back what earlier work left dirty on the scratch directory's file
/// system (syncfs), outside any timing. A small save measured while the
/// kernel writes back hundreds of megabytes from the part before it waits
/// behind that I/O on every directory and file it creates, so whichever side
/// creates more inodes pays for what ran earlier. Called before each side of
/// a comparison that is timed in milliseconds.
void write_back_scratch();

/// The inodes a run's cleanup freed are skipped by every file creation for
/// a minute after they were written back (six while still dirty), which
/// slows whichever side creates more files. When the previous run cleaned up
/// less than that ago, waits out the rest if `wait`, else prints a note.
void settle_after_recent_cleanup(bool wait);

inline amphora::Store fresh_store(const fs::path& dir) {
  retire(dir);
  return amphora::Store::open(dir, {.create = true});
}

/// xorshift64: the same sequence on every run.
struct Rng {
  std::uint64_t x;
  explicit Rng(std::uint64_t seed) : x(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  std::uint64_t next() {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  }
  /// Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

/// Uniform floats in [-1, 1), filled on all cores; `seed` picks the sequence.
void fill_random_f32(std::span<float> v, std::uint64_t seed);
void fill_random_u8(std::span<std::uint8_t> v, std::uint64_t seed);

/// What the pass sections do with a loaded tensor: a plain loop the compiler
/// vectorizes (sixteen float accumulators, added up in double).
double sum_f32(std::span<const float> v);
std::uint64_t sum_u8(std::span<const std::uint8_t> v);

/// The directory holding artifact `digest` in the store at `store`.
inline fs::path artifact_dir(const amphora::Store& store, const amphora::Digest& digest) {
  std::string hex = digest.hex();
  return store.path() / "objects" / "sha256" / hex.substr(0, 2) / hex;
}

/// Bytes of every regular file under `dir`.
std::uint64_t tree_bytes(const fs::path& dir);

/// Reads `file` once, start to end, with read(2) into a scratch buffer.
void read_sequentially(const fs::path& file);

/// Runs `/usr/bin/python3 SCRIPT ARGS...` and returns each line of standard
/// output that parses as a JSON object. Reports a failed peer on stderr.
std::vector<nlohmann::json> run_peer(const std::string& script, const std::vector<std::string>& args);

/// Median of the list of seconds `key` in a peer's JSON line (0 when absent).
double peer_median(const nlohmann::json& j, const char* key);

/// Targets met or missed, across all sections.
struct Verdicts {
  bool all_ok = true;
  const char* operator()(bool ok) {
    all_ok = all_ok && ok;
    return ok ? "meets target" : "MISSES target";
  }
};

/// What time_saves measured: seconds per save, the peak RSS each save added
/// over what the process held before it, and the digest saved.
struct SaveTimings {
  std::vector<double> seconds, rss_over;
  amphora::Digest digest;
};

/// Saves `value` under `name` `o.repeats` times, each into a fresh store at `dir`.
template <class T>
SaveTimings time_saves(const Options& o, const fs::path& dir, const T& value, const std::string& name) {
  SaveTimings t;
  for (int r = 0; r < o.repeats; ++r) {
    auto store = fresh_store(dir);
    touch_scratch();
    const double before = static_cast<double>(status_kib("VmRSS:")) * 1024;
    reset_peak_rss();
    auto t0 = Clock::now();
    t.digest = store.save(value, {.name = name}).digest;
    t.seconds.push_back(seconds_since(t0));
    t.rss_over.push_back(static_cast<double>(status_kib("VmHWM:")) * 1024 - before);
  }
  return t;
}

// Sections other than the tensor figures; each prints its own table.
void run_composite(const Options& o, Verdicts& verdict);
void run_records(const Options& o, Verdicts& verdict);
void run_tiny(const Options& o, Verdicts& verdict);
void run_pass(const Options& o, Verdicts& verdict);
void run_sparse(const Options& o, Verdicts& verdict);
void run_table(const Options& o, Verdicts& verdict);
void run_jsonl(const Options& o, Verdicts& verdict);
void run_pipeline(const Options& o, Verdicts& verdict);
void run_remote(const Options& o, Verdicts& verdict);
void run_hdf5(const Options& o, Verdicts& verdict);

}  // namespace amphora_bench
