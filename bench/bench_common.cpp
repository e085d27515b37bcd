#include "bench_common.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <thread>

namespace amphora_bench {

std::uint64_t status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(std::strlen(key)));
  return 0;
}

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

void fill_random_f32(std::span<float> v, std::uint64_t seed) {
  amphora::parallel_for(64, [&](std::size_t part) {
    Rng rng(seed * 64 + part);
    std::size_t begin = v.size() * part / 64, end = v.size() * (part + 1) / 64;
    for (std::size_t i = begin; i < end; ++i) v[i] = static_cast<float>(rng.unit() * 2.0 - 1.0);
  });
}

void fill_random_u8(std::span<std::uint8_t> v, std::uint64_t seed) {
  Rng rng(seed);
  std::size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    std::uint64_t x = rng.next();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(rng.next());
}

double sum_f32(std::span<const float> v) {
  constexpr std::size_t kLanes = 16;
  float acc[kLanes] = {};
  const float* p = v.data();
  const std::size_t n = v.size();
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t k = 0; k < kLanes; ++k) acc[k] += p[i + k];
  double s = 0;
  for (; i < n; ++i) s += p[i];
  for (float a : acc) s += a;
  return s;
}

std::uint64_t sum_u8(std::span<const std::uint8_t> v) {
  // 32-bit partial sums over blocks small enough not to overflow, which the
  // compiler widens and vectorizes well.
  constexpr std::size_t kBlock = 1u << 16;
  std::uint64_t total = 0;
  for (std::size_t at = 0; at < v.size(); at += kBlock) {
    const std::uint8_t* p = v.data() + at;
    const std::size_t n = std::min(kBlock, v.size() - at);
    std::uint32_t s = 0;
    for (std::size_t i = 0; i < n; ++i) s += p[i];
    total += s;
  }
  return total;
}

std::uint64_t tree_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) total += e.file_size();
  return total;
}

void read_sequentially(const fs::path& file) {
  constexpr std::size_t kBlock = 8u << 20;
  static std::unique_ptr<char[]> scratch(new char[kBlock]);
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::cerr << "amphora_bench: cannot open " << file << "\n";
    std::exit(1);
  }
  while (::read(fd, scratch.get(), kBlock) > 0) {
  }
  ::close(fd);
}

namespace {
fs::path retired_dir;
}

void set_scratch_dir(const fs::path& dir) { retired_dir = dir / "retired"; }

void retire(const fs::path& path) {
  // Links are moved aside, never followed: only the bench's own files are truncated.
  std::error_code ec;
  const auto status = fs::symlink_status(path, ec);
  if (!fs::exists(status)) return;
  if (fs::is_directory(status)) {
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (fs::is_regular_file(e.symlink_status())) fs::resize_file(e.path(), 0);
  } else if (fs::is_regular_file(status)) {
    fs::resize_file(path, 0);
  }
  // Named by process and count: a run killed before remove_retired() leaves
  // its retired files behind, under names the next run must not reuse.
  static std::uint64_t count = 0;
  fs::create_directories(retired_dir);
  fs::rename(path, retired_dir / ("cpp-" + std::to_string(::getpid()) + "-" + std::to_string(++count) + "-" +
                                  path.filename().string()));
}

namespace {
// ext4 skips an inode freed within the last 60 s when its inode table block
// is clean, 360 s while it is dirty; a few seconds on top cover the rounding.
constexpr long long kSettleSeconds = 65;

fs::path cleanup_stamp() { return retired_dir.parent_path() / "last-cleanup"; }
}  // namespace

void write_back_scratch() {
  if (retired_dir.empty()) return;
  if (int fd = ::open(retired_dir.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
    ::syncfs(fd);
    ::close(fd);
  }
}

void remove_retired() {
  if (retired_dir.empty()) return;
  fs::remove_all(retired_dir);
  // Written back now, the freed inodes are skipped for one minute, not six.
  write_back_scratch();
  // Stamped so that the next run can tell how recent the deletion was.
  std::ofstream(cleanup_stamp()) << "";
}

void settle_after_recent_cleanup(bool wait) {
  std::error_code ec;
  auto stamp = fs::last_write_time(cleanup_stamp(), ec);
  if (ec) return;
  auto age = std::chrono::duration_cast<std::chrono::seconds>(fs::file_time_type::clock::now() - stamp).count();
  if (age < 0 || age >= kSettleSeconds) return;
  if (wait) {
    std::printf("waiting %lld s: the previous run deleted its scratch files %lld s ago, and for a minute after that\n"
                "this machine's ext4 (no journal) skips the freed inodes at every file creation, which would slow\n"
                "the side that creates more files (--no-settle: do not wait)\n\n",
                static_cast<long long>(kSettleSeconds - age), static_cast<long long>(age));
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(kSettleSeconds - age));
  } else {
    std::printf("note: the previous run deleted its scratch files %lld s ago; on an ext4 without a journal file\n"
                "creation stays slower for a minute after that, so save figures may read low\n\n",
                static_cast<long long>(age));
  }
}

std::vector<nlohmann::json> run_peer(const std::string& script, const std::vector<std::string>& args) {
  std::string cmd = "/usr/bin/python3 " + script;
  for (const auto& a : args) cmd += " '" + a + "'";
  std::vector<nlohmann::json> out;
  std::fflush(stdout);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return out;
  std::string line;
  char buf[65536];
  while (std::fgets(buf, sizeof buf, pipe)) {
    line += buf;
    if (line.empty() || line.back() != '\n') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) out.push_back(std::move(j));
    line.clear();
  }
  if (::pclose(pipe) != 0)
    std::cerr << "amphora_bench: the Python peer failed: " << cmd << " (is python3-numpy installed?)\n";
  return out;
}

double peer_median(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return 0;
  return median(it->get<std::vector<double>>());
}

}  // namespace amphora_bench
