// Section "remote": push and pull through an S3 server, against boto3 on the
// same server in the same run. The server is $AMPHORA_TEST_S3_ENDPOINT (with
// AMPHORA_TEST_S3_BUCKET and the keys in the environment) or, when that is
// not set, a Ceph RADOS Gateway this section starts with scripts/rgw.sh and
// stops at the end.
//
//   large   one 1 GiB float32 tensor (random: incompressible): Store::push,
//           then Store::pull into an empty store, vs boto3's upload_file /
//           download_file of its .npy with the default transfer settings
//   small   1,000 small tensors (a few hundred bytes each), pushed and
//           pulled as 1,000 artifacts, vs a boto3 loop of put_object /
//           get_object of their payloads
//
// Peak RSS is measured around each push and pull (VmHWM over what the
// process held before).

#include "bench_common.hpp"

#include <amphora/storage/s3.hpp>

#include <cstdlib>
#include <fstream>
#include <map>

namespace amphora_bench {

namespace {

// The S3 server the section uses, started here unless the environment names one.
class Server {
 public:
  explicit Server(const fs::path& dir) {
    if (const char* endpoint = std::getenv("AMPHORA_TEST_S3_ENDPOINT")) {
      endpoint_ = endpoint;
      const char* bucket = std::getenv("AMPHORA_TEST_S3_BUCKET");
      bucket_ = bucket ? bucket : "amphora";
      return;
    }
    dir_ = fs::absolute(dir / "rgw");
    std::error_code ec;
    fs::remove_all(dir_, ec);
    const std::string up = std::string("bash ") + AMPHORA_RGW_SCRIPT + " up '" + dir_.string() + "' > /dev/null";
    if (std::system(up.c_str()) != 0) throw std::runtime_error("scripts/rgw.sh could not start a gateway");
    std::ifstream env(dir_ / "env");
    std::map<std::string, std::string> values;
    for (std::string line; std::getline(env, line);)
      if (auto eq = line.find('='); eq != std::string::npos) values[line.substr(0, eq)] = line.substr(eq + 1);
    for (const char* key : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"})
      ::setenv(key, values[key].c_str(), 1);
    endpoint_ = values["AMPHORA_TEST_S3_ENDPOINT"];
    bucket_ = values["AMPHORA_TEST_S3_BUCKET"];
  }
  ~Server() {
    if (dir_.empty()) return;
    const std::string down = std::string("bash ") + AMPHORA_RGW_SCRIPT + " down '" + dir_.string() + "' > /dev/null 2>&1";
    if (std::system(down.c_str()) != 0) std::fprintf(stderr, "amphora_bench: scripts/rgw.sh down failed\n");
  }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& bucket() const { return bucket_; }

 private:
  fs::path dir_;
  std::string endpoint_, bucket_;
};

struct Timed {
  std::vector<double> seconds, rss_over;
  void measure(const std::function<void()>& work) {
    touch_scratch();
    const double before = static_cast<double>(status_kib("VmRSS:")) * 1024;
    reset_peak_rss();
    auto t0 = Clock::now();
    work();
    seconds.push_back(seconds_since(t0));
    rss_over.push_back(static_cast<double>(status_kib("VmHWM:")) * 1024 - before);
  }
};

// A store whose only remote is `url` on the server.
amphora::Store store_with_remote(const fs::path& dir, const Server& server, const std::string& url) {
  auto store = fresh_store(dir);
  store.add_remote({.name = "bench", .url = url, .endpoint = server.endpoint()});
  return store;
}

// Removes everything under the remote's prefix (the next repeat starts empty,
// and the in-memory server keeps its memory).
void clear_remote(amphora::Store& store) {
  auto remote = store.remote_store();
  for (const auto& name : remote.names()) remote.remove(name);
  remote.gc(false, std::chrono::seconds(0));
}

void print_row(const char* what, double amphora_s, double peer_s, double bytes, double target, Verdicts& verdict,
               const std::string& extra = {}) {
  const double ratio = amphora_s > 0 ? peer_s / amphora_s : 0;
  std::printf("  %-34s %9.3f s %9.3f s  %6.2fx  (%s MB/s vs %s)  target >= %.1fx: %s%s\n", what, amphora_s, peer_s,
              ratio, fmt("%.0f", mb_per_s(static_cast<std::uint64_t>(bytes), amphora_s)).c_str(),
              fmt("%.0f", mb_per_s(static_cast<std::uint64_t>(bytes), peer_s)).c_str(), target,
              verdict(ratio >= target), extra.c_str());
}

}  // namespace

void run_remote(const Options& o, Verdicts& verdict) {
  Server server(o.dir);
  const std::int64_t mib = o.quick ? 32 : 1024;
  const int repeats = std::min(o.repeats, 3);  // the server keeps everything in memory
  const std::size_t jobs = 8;
  std::printf("\nRemote tier: push and pull through a Ceph RADOS Gateway at %s (Amphora: %zu transfers at once; "
              "boto3: its defaults), median of %d\n",
              server.endpoint().c_str(), jobs, repeats);
  std::printf("  %-34s %11s %11s  %7s\n", "", "amphora", "boto3", "ratio");
  const std::string base = "s3://" + server.bucket() + "/bench-" + std::to_string(::getpid());

  // One large tensor.
  {
    amphora::Tensor t = amphora::Tensor::zeros(amphora::DType::float32, {mib * 256, 1024});
    fill_random_f32(t.mutable_values<float>(), 11);
    auto source = store_with_remote(o.dir / "remote-src", server, base + "/large");
    const auto digest = source.save(t, {.name = "big"}).digest;
    const auto file = artifact_dir(source, digest) / source.open_artifact(digest).manifest().files.front().path;
    const double bytes = static_cast<double>(fs::file_size(file));
    Timed push, pull;
    for (int r = 0; r < repeats; ++r) {
      push.measure([&] { source.push({"big"}, {.jobs = jobs}); });
      auto target = store_with_remote(o.dir / "remote-dst", server, base + "/large");
      pull.measure([&] { target.pull({"big"}, {.jobs = jobs}); });
      if (target.resolve("big") != digest) throw std::runtime_error("remote bench: pulled the wrong artifact");
      clear_remote(source);
      retire(o.dir / "remote-dst");
    }
    auto peer = run_peer(AMPHORA_S3_PEER, {"large", std::to_string(repeats), server.endpoint(), server.bucket(),
                                           "bench-" + std::to_string(::getpid()) + "-boto3", file.string()});
    const double peer_push = peer.empty() ? 0 : peer_median(peer.front(), "push_s");
    const double peer_pull = peer.empty() ? 0 : peer_median(peer.front(), "pull_s");
    const std::string label = std::to_string(mib) + " MiB tensor";
    print_row(("push " + label).c_str(), median(push.seconds), peer_push, bytes, 1.5, verdict);
    print_row(("pull " + label).c_str(), median(pull.seconds), peer_pull, bytes, 1.5, verdict);
    // Memory: what the process added while copying, against 64 MiB plus the
    // parts in flight (8 MiB each).
    const double limit = 64.0 * (1 << 20) + static_cast<double>(jobs) * 8 * (1 << 20);
    const double peak = std::max(median(push.rss_over), median(pull.rss_over));
    std::printf("  peak RSS added: push %.0f MiB, pull %.0f MiB (limit 64 MiB + %zu parts of 8 MiB = %.0f MiB): %s\n",
                median(push.rss_over) / (1 << 20), median(pull.rss_over) / (1 << 20), jobs, limit / (1 << 20),
                verdict(peak <= limit));
    retire(o.dir / "remote-src");
  }

  // Many small artifacts.
  {
    const std::size_t n = o.quick ? 100 : 1000;
    auto source = store_with_remote(o.dir / "remote-src", server, base + "/small");
    std::vector<std::string> refs;
    const fs::path payloads = o.dir / "remote-payloads";
    retire(payloads);
    fs::create_directories(payloads);
    double bytes = 0;
    for (std::size_t k = 0; k < n; ++k) {
      std::vector<std::int64_t> values(24);
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int64_t>(k * 1000 + i);
      const auto digest = source.save(amphora::Tensor::from_values<std::int64_t>({24}, values)).digest;
      refs.push_back(digest.str());
      const auto file = artifact_dir(source, digest) / source.open_artifact(digest).manifest().files.front().path;
      fs::copy_file(file, payloads / (std::to_string(k) + ".npy"));
      bytes += static_cast<double>(fs::file_size(file));
    }
    Timed push, pull;
    for (int r = 0; r < repeats; ++r) {
      push.measure([&] { source.push(refs, {.jobs = jobs}); });
      auto target = store_with_remote(o.dir / "remote-dst", server, base + "/small");
      pull.measure([&] { target.pull(refs, {.jobs = jobs}); });
      if (target.artifacts().size() != n) throw std::runtime_error("remote bench: pulled the wrong number of artifacts");
      clear_remote(source);
      retire(o.dir / "remote-dst");
    }
    auto peer = run_peer(AMPHORA_S3_PEER, {"small", std::to_string(repeats), server.endpoint(), server.bucket(),
                                           "bench-" + std::to_string(::getpid()) + "-boto3", payloads.string()});
    const double peer_push = peer.empty() ? 0 : peer_median(peer.front(), "push_s");
    const double peer_pull = peer.empty() ? 0 : peer_median(peer.front(), "pull_s");
    const std::string label = std::to_string(n) + " small artifacts";
    print_row(("push " + label).c_str(), median(push.seconds), peer_push, bytes, 3.0, verdict,
              "  (" + fmt("%.0f", static_cast<double>(n) / median(push.seconds)) + " artifacts/s)");
    print_row(("pull " + label).c_str(), median(pull.seconds), peer_pull, bytes, 3.0, verdict,
              "  (" + fmt("%.0f", static_cast<double>(n) / median(pull.seconds)) + " artifacts/s)");
    retire(o.dir / "remote-src");
    retire(payloads);
  }
}

}  // namespace amphora_bench
