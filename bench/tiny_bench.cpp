// Section "tiny": what one artifact costs. 1,000 tiny values saved one by
// one (an int64 under its own name each, then short strings as 1,000
// versions of one name) and loaded back by name, against pickle.dump /
// pickle.load of a tiny object to / from its own file. And what the file
// system alone charges for the inodes such a save creates, measured with
// bare system calls in the same place: the floor under any save that keeps
// the store's layout.

#include "bench_common.hpp"

#include <amphora/everyday.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace amphora_bench {

namespace {

// The file-system work of saving `n` int64 values each under its own name,
// with nothing else: per value a staging directory holding the payload
// (4,104 bytes, as the .npy of one int64) and the manifest (330 bytes),
// renamed into a fan-out directory, then a name directory and its record
// (290 bytes). No hashing, JSON, locks or checks. Seconds for all `n`.
double file_system_floor(const fs::path& dir, std::size_t n) {
  retire(dir);
  fs::create_directories(dir);
  for (const char* sub : {"tmp", "objects", "names"}) fs::create_directory(dir / sub);
  for (int fan = 0; fan < 256; ++fan) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", fan);
    fs::create_directory(dir / "objects" / hex);
  }
  const std::string bytes(4104, 'x');
  auto write_file = [&](int at, const char* name, std::size_t size) {
    int fd = ::openat(at, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || ::pwrite(fd, bytes.data(), size, 0) != static_cast<ssize_t>(size)) throw std::runtime_error("floor: write");
    ::close(fd);
  };
  int root = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int tmp = ::openat(root, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int objects = ::openat(root, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int names = ::openat(root, "names", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  touch_scratch();
  auto t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    char stage[32], target[80], name[32];
    std::snprintf(stage, sizeof stage, "stage-%zu", i);
    std::snprintf(target, sizeof target, "%02zx/%064zu", i % 256, i);
    std::snprintf(name, sizeof name, "tiny-%04zu", i);
    ::mkdirat(tmp, stage, 0755);
    int staged = ::openat(tmp, stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    write_file(staged, "tensor.npy", 4104);
    write_file(staged, "manifest.json", 330);
    ::close(staged);
    if (::renameat(tmp, stage, objects, target) != 0) throw std::runtime_error("floor: rename");
    ::mkdirat(names, name, 0755);
    int named = ::openat(names, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    write_file(named, "1.json", 290);
    ::close(named);
  }
  const double s = seconds_since(t0);
  for (int fd : {names, objects, tmp, root}) ::close(fd);
  retire(dir);
  return s;
}

}  // namespace

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
  std::vector<double> floor;
  for (int r = 0; r < o.repeats; ++r) floor.push_back(file_system_floor(o.dir / "floor-tiny", n));
  std::printf("  file system alone, the same five inodes and rename per value with bare system calls: %.1f us "
              "(amphora's save %.2fx that)\n",
              median(floor) * per, median(int_save) / median(floor));
  std::printf("  content: %s\n", ok ? "every value loaded back equal" : "MISMATCH");
  if (!ok) verdict(false);
}

}  // namespace amphora_bench
