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
//   rows    10 rows of a 1 GiB LZ4 tensor read through to the remote by a
//           store that lacks it (load_tensor_rows), vs pulling the whole
//           artifact; the bytes come through a relay here that counts them
//   cache   a 100-step pipeline (10 levels of 10 steps) fully cached on the
//           remote, run from an empty store: time, requests and bytes
//           (through the relay), beside a rerun served by the local cache
//
// Amphora's repeats alternate with boto3's (one repeat per run of the peer),
// and dirty pages are written out before every timed step on both sides:
// a 1 GiB copy otherwise runs at the disk's speed or the page cache's
// depending on what the step before it left unwritten.
//
// Peak RSS is measured around each push and pull (VmHWM over what the
// process held before). After each of large and small, the gateway's own
// ceiling: the same bytes as bare objects put and got on the same number of
// connections, with no store, hashing or files, which bounds any client.

#include "bench_common.hpp"

#include <amphora/storage/s3.hpp>

#include <amphora/everyday.hpp>
#include <amphora/pipeline.hpp>
#include <amphora/tensor.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

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

// A TCP relay on 127.0.0.1 in front of the server that counts what it
// relays: the bytes of the answers, and the requests (the ends of their
// heads; the reads it serves send no bodies).
class CountingRelay {
 public:
  explicit CountingRelay(const std::string& endpoint) {
    const auto colon = endpoint.rfind(':');
    upstream_port_ = static_cast<std::uint16_t>(std::stoi(endpoint.substr(colon + 1)));
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 64) != 0 || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("remote bench: cannot listen for the relay");
    endpoint_ = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~CountingRelay() {
    stopping_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    acceptor_.join();
    std::lock_guard lock(mutex_);
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    for (auto& t : relays_) t.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  std::uint64_t bytes_down() const { return down_; }
  std::uint64_t requests() const { return requests_; }
  void reset() { down_ = 0, requests_ = 0; }

 private:
  void accept_loop() {
    while (!stopping_) {
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      to.sin_port = htons(upstream_port_);
      if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
        ::close(client);
        if (server >= 0) ::close(server);
        continue;
      }
      const int one = 1;  // relayed writes go out at once, as the client's and the server's do
      ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard lock(mutex_);
      open_.insert(client), open_.insert(server);
      relays_.emplace_back([this, client, server] { relay(client, server); });
    }
  }
  void relay(int client, int server) {
    std::vector<char> buffer(1 << 16);
    std::string tail;  // the last bytes sent up, to find head ends split across reads
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    for (bool open = true; open && !stopping_;) {
      if (::poll(fds, 2, 1000) < 0) break;
      for (int k = 0; k < 2 && open; ++k) {
        if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::read(fds[k].fd, buffer.data(), buffer.size());
        if (n <= 0 || !send_all(fds[1 - k].fd, buffer.data(), static_cast<std::size_t>(n))) {
          open = false;
          break;
        }
        if (k == 1) {
          down_ += static_cast<std::uint64_t>(n);
        } else {
          tail.append(buffer.data(), static_cast<std::size_t>(n));
          for (std::size_t at; (at = tail.find("\r\n\r\n")) != std::string::npos;) ++requests_, tail.erase(0, at + 4);
          if (tail.size() > 3) tail.erase(0, tail.size() - 3);
        }
      }
    }
    std::lock_guard lock(mutex_);
    open_.erase(client), open_.erase(server);
    ::close(client), ::close(server);
  }
  static bool send_all(int fd, const char* data, std::size_t n) {
    while (n > 0) {
      const ssize_t sent = ::send(fd, data, n, MSG_NOSIGNAL);
      if (sent <= 0) return false;
      data += sent, n -= static_cast<std::size_t>(sent);
    }
    return true;
  }

  std::uint16_t upstream_port_ = 0;
  int listener_ = -1;
  std::string endpoint_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> down_{0}, requests_{0};
  std::thread acceptor_;
  std::mutex mutex_;
  std::set<int> open_;
  std::vector<std::thread> relays_;
};

struct Timed {
  std::vector<double> seconds, rss_over;
  void measure(const std::function<void()>& work) {
    ::sync();  // neither client pays for the other's (or an earlier step's) dirty pages
    touch_scratch();
    const double before = static_cast<double>(status_kib("VmRSS:")) * 1024;
    reset_peak_rss();
    auto t0 = Clock::now();
    work();
    seconds.push_back(seconds_since(t0));
    rss_over.push_back(static_cast<double>(status_kib("VmHWM:")) * 1024 - before);
  }
};

// The peer's seconds over its single-repeat runs; 0 when it could not run.
struct PeerTimes {
  std::map<std::string, std::vector<double>> seconds;
  void add(const std::vector<nlohmann::json>& out) {
    if (out.empty()) return;
    for (const char* key : {"push_s", "pull_s"})
      if (auto it = out.front().find(key); it != out.front().end() && it->is_array())
        for (const auto& v : *it) seconds[key].push_back(v.get<double>());
  }
  double median(const std::string& key) const {
    auto it = seconds.find(key);
    return it == seconds.end() || it->second.empty() ? 0 : amphora_bench::median(it->second);
  }
};

// A store whose only remote is `url` on the server.
amphora::Store store_with_remote(const fs::path& dir, const Server& server, const std::string& url) {
  auto store = fresh_store(dir);
  store.add_remote({.name = "bench", .url = url, .endpoint = server.endpoint()});
  return store;
}

// Removes everything under the remote's prefix once a loop of repeats is done
// (the in-memory server keeps its memory).
void clear_remote(amphora::Store& store) {
  auto remote = store.remote_store();
  for (const auto& name : remote.names()) remote.remove(name);
  remote.gc(false, std::chrono::seconds(0));
}

// Objects of `size` bytes put (then got) by `jobs` threads with no store
// around them: what the gateway itself takes, per second.
std::pair<double, double> gateway_rates(amphora::Medium& medium, std::size_t count, std::size_t size, std::size_t jobs) {
  const std::string object(size, 'x');
  auto rate = [&](bool put) {
    std::atomic<std::size_t> next{0};
    auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (std::size_t j = 0; j < jobs; ++j)
      threads.emplace_back([&] {
        for (std::size_t k; (k = next++) < count;) {
          const std::string key = "o/" + std::to_string(k);
          if (put) (void)medium.put(key, object);
          else (void)medium.get(key, size);
        }
      });
    for (auto& t : threads) t.join();
    return static_cast<double>(count) / seconds_since(t0);
  };
  const double puts = rate(true), gets = rate(false);
  for (const auto& entry : amphora::list_all(medium, "o/", false)) medium.remove(entry.key);
  return {puts, gets};
}

void print_row(const char* what, double amphora_s, double peer_s, double bytes, double target, Verdicts& verdict,
               const std::string& extra = {}) {
  const double ratio = amphora_s > 0 ? peer_s / amphora_s : 0;
  std::printf("  %-34s %9.3f s %9.3f s  %6.2fx  (%s MB/s vs %s)  target >= %.1fx: %s%s\n", what, amphora_s, peer_s,
              ratio, fmt("%.0f", mb_per_s(static_cast<std::uint64_t>(bytes), amphora_s)).c_str(),
              fmt("%.0f", mb_per_s(static_cast<std::uint64_t>(bytes), peer_s)).c_str(), target,
              verdict(ratio >= target), extra.c_str());
}

// `levels` levels of `width` steps; a step reads two of the level before.
amphora::Pipeline layered(std::size_t levels, std::size_t width) {
  amphora::Pipeline p("layered");
  std::vector<amphora::Output<std::int64_t>> previous;
  for (std::size_t j = 0; j < width; ++j)
    previous.push_back(p.step({.name = "l0_" + std::to_string(j), .params = {{"j", j}}},
                              [](const amphora::StepContext& c) { return c.param<std::int64_t>("j"); }));
  for (std::size_t level = 1; level < levels; ++level) {
    std::vector<amphora::Output<std::int64_t>> next;
    for (std::size_t j = 0; j < width; ++j)
      next.push_back(p.step({.name = "l" + std::to_string(level) + "_" + std::to_string(j), .inputs = {"a", "b"}},
                            [](const std::int64_t& a, const std::int64_t& b) { return a * 31 + b; }, previous[j],
                            previous[(j + 1) % width]));
    previous = std::move(next);
  }
  return p;
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
  const std::string peer_prefix = "bench-" + std::to_string(::getpid()) + "-boto3";

  // One large tensor.
  {
    amphora::Tensor t = amphora::Tensor::zeros(amphora::DType::float32, {mib * 256, 1024});
    fill_random_f32(t.mutable_values<float>(), 11);
    auto source = store_with_remote(o.dir / "remote-src", server, base + "/large-0");
    const auto digest = source.save(t, {.name = "big"}).digest;
    const auto file = artifact_dir(source, digest) / source.open_artifact(digest).manifest().files.front().path;
    const double bytes = static_cast<double>(fs::file_size(file));
    Timed push, pull;
    PeerTimes peer;
    // Each repeat to a prefix of its own, removed after the loop (as the
    // peer's): a removal's collection on the gateway does not run into the
    // next repeat. Amphora's repeats alternate with boto3's, so a slow spell
    // of the machine falls on both.
    for (int r = 0; r < repeats; ++r) {
      const std::string prefix = base + "/large-" + std::to_string(r);
      source.remove_remote("bench");
      source.add_remote({.name = "bench", .url = prefix, .endpoint = server.endpoint()});
      push.measure([&] { source.push({"big"}, {.jobs = jobs}); });
      auto target = store_with_remote(o.dir / "remote-dst", server, prefix);
      pull.measure([&] { target.pull({"big"}, {.jobs = jobs}); });
      if (target.resolve("big") != digest) throw std::runtime_error("remote bench: pulled the wrong artifact");
      retire(o.dir / "remote-dst");
      peer.add(run_peer(AMPHORA_S3_PEER, {"large", "1", server.endpoint(), server.bucket(),
                                          peer_prefix + "/large-" + std::to_string(r), file.string(), "--keep"}));
    }
    for (int r = 0; r < repeats; ++r) {
      source.remove_remote("bench");
      source.add_remote({.name = "bench", .url = base + "/large-" + std::to_string(r), .endpoint = server.endpoint()});
      clear_remote(source);
    }
    run_peer(AMPHORA_S3_PEER, {"clear", server.endpoint(), server.bucket(), peer_prefix});
    const double peer_push = peer.median("push_s");
    const double peer_pull = peer.median("pull_s");
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
    // The same bytes as 8 MiB objects put and got on `jobs` connections with
    // no store, no hashing and no files: the gateway's own ceiling.
    auto medium = amphora::open_s3_medium(base + "/ceiling-large", {.endpoint = server.endpoint()});
    const std::size_t parts = static_cast<std::size_t>(bytes / (8 << 20)) + 1;
    const auto [puts, gets] = gateway_rates(*medium, parts, 8 << 20, jobs);
    const double put_s = static_cast<double>(parts) / puts, get_s = static_cast<double>(parts) / gets;
    std::printf("  gateway ceiling: %zu objects of 8 MiB put in %.2f s (%.2fx boto3's upload at best), got in %.2f s "
                "(%.2fx its download)\n",
                parts, put_s, peer_push / put_s, get_s, peer_pull / get_s);
    retire(o.dir / "remote-src");
  }

  // Many small artifacts.
  {
    const std::size_t n = o.quick ? 100 : 1000;
    auto source = store_with_remote(o.dir / "remote-src", server, base + "/small-0");
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
    PeerTimes peer;
    for (int r = 0; r < repeats; ++r) {
      const std::string prefix = base + "/small-" + std::to_string(r);
      source.remove_remote("bench");
      source.add_remote({.name = "bench", .url = prefix, .endpoint = server.endpoint()});
      push.measure([&] { source.push(refs, {.jobs = jobs}); });
      auto target = store_with_remote(o.dir / "remote-dst", server, prefix);
      pull.measure([&] { target.pull(refs, {.jobs = jobs}); });
      if (target.artifacts().size() != n) throw std::runtime_error("remote bench: pulled the wrong number of artifacts");
      retire(o.dir / "remote-dst");
      peer.add(run_peer(AMPHORA_S3_PEER, {"small", "1", server.endpoint(), server.bucket(),
                                          peer_prefix + "/small-" + std::to_string(r), payloads.string(), "--keep"}));
    }
    for (int r = 0; r < repeats; ++r) {
      source.remove_remote("bench");
      source.add_remote({.name = "bench", .url = base + "/small-" + std::to_string(r), .endpoint = server.endpoint()});
      clear_remote(source);
    }
    run_peer(AMPHORA_S3_PEER, {"clear", server.endpoint(), server.bucket(), peer_prefix});
    const double peer_push = peer.median("push_s");
    const double peer_pull = peer.median("pull_s");
    const std::string label = std::to_string(n) + " small artifacts";
    print_row(("push " + label).c_str(), median(push.seconds), peer_push, bytes, 3.0, verdict,
              "  (" + fmt("%.0f", static_cast<double>(n) / median(push.seconds)) + " artifacts/s)");
    print_row(("pull " + label).c_str(), median(pull.seconds), peer_pull, bytes, 3.0, verdict,
              "  (" + fmt("%.0f", static_cast<double>(n) / median(pull.seconds)) + " artifacts/s)");
    retire(o.dir / "remote-src");
    retire(payloads);

    // What the gateway itself can take: small PUTs and GETs on `jobs`
    // connections with no store around them. A pushed artifact costs two
    // PUTs (its file, then its manifest) and a pulled one two GETs, so these
    // bound the ratios above whatever the client does.
    auto medium = amphora::open_s3_medium(base + "/ceiling", {.endpoint = server.endpoint()});
    const auto [puts, gets] = gateway_rates(*medium, 2 * n, 200, jobs);
    std::printf("  gateway ceiling: %.0f small PUT/s, %.0f small GET/s on %zu connections; at 2 per artifact, "
                "push >= %.2f s (%.2fx boto3 at best), pull >= %.2f s (%.2fx)\n",
                puts, gets, jobs, 2 * static_cast<double>(n) / puts, peer_push / (2 * static_cast<double>(n) / puts),
                2 * static_cast<double>(n) / gets, peer_pull / (2 * static_cast<double>(n) / gets));
  }

  // Ten rows of a large LZ4 tensor, read through to the remote.
  {
    // int32 counters with a little noise: LZ4 keeps about a third.
    amphora::Tensor t = amphora::Tensor::zeros(amphora::DType::int32, {mib * 256, 1024});
    auto v = t.mutable_values<std::int32_t>();
    Rng rng(5);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i % 4096 + (rng.next() & 15));
    auto source = store_with_remote(o.dir / "remote-src", server, base + "/rows");
    const auto digest =
        source.save(t, {.name = "rows", .options = amphora::TensorOptions{amphora::Compression::lz4}}).digest;
    source.push({"rows"}, {.jobs = jobs});
    const auto stored = source.open_artifact(digest);
    const std::uint64_t manifest = fs::file_size(artifact_dir(source, digest) / "manifest.json");
    const std::uint64_t index = stored.file_size("tensor.chunks.npy"), packed = stored.file_size("tensor.npy.lz4");
    const std::uint64_t frames = stored.meta()["chunks"].get<std::uint64_t>();
    CountingRelay relay(server.endpoint());
    std::vector<double> rows_s, fetched, requests;
    Timed pull;
    for (int r = 0; r < repeats; ++r) {
      auto reader_store = fresh_store(o.dir / "remote-dst");
      reader_store.add_remote({.name = "bench", .url = base + "/rows", .endpoint = relay.endpoint()});
      const std::int64_t first = (static_cast<std::int64_t>(r) * 7919 * 256 + 1000) % (t.shape()[0] - 10);
      relay.reset();
      auto t0 = Clock::now();
      const amphora::Tensor rows = amphora::load_tensor_rows(reader_store.open_artifact("rows"), first, first + 10);
      rows_s.push_back(seconds_since(t0));
      fetched.push_back(static_cast<double>(relay.bytes_down()));
      requests.push_back(static_cast<double>(relay.requests()));
      if (std::memcmp(rows.data(), t.rows(first, first + 10).data(), rows.nbytes()) != 0)
        throw std::runtime_error("remote bench: read the wrong rows");
      if (reader_store.contains(digest)) throw std::runtime_error("remote bench: the rows pulled the artifact");
      pull.measure([&] { reader_store.pull({"rows"}, {.jobs = jobs}); });
      retire(o.dir / "remote-dst");
    }
    clear_remote(source);
    retire(o.dir / "remote-src");
    const double frame = static_cast<double>(packed) / static_cast<double>(frames);
    const double allowed = static_cast<double>(manifest + index) + 2 * frame;
    const double speedup = median(rows_s) > 0 ? median(pull.seconds) / median(rows_s) : 0;
    std::printf("  %-34s %9.3f s %9.3f s  %6.0fx  (whole pull: %s MB of LZ4 frames)  target >= 50x: %s\n",
                ("10 rows of " + std::to_string(mib) + " MiB LZ4 tensor").c_str(), median(rows_s), median(pull.seconds),
                speedup, fmt("%.0f", static_cast<double>(packed) / 1e6).c_str(), verdict(speedup >= 50));
    std::printf("  rows fetched %.0f KiB in %.0f requests; manifest %.1f KiB + index %.1f KiB + 2 frames of %.0f KiB "
                "= %.0f KiB, plus 1 KiB of HTTP head per request: %s\n",
                median(fetched) / 1024, median(requests), static_cast<double>(manifest) / 1024,
                static_cast<double>(index) / 1024, frame / 1024, allowed / 1024,
                verdict(median(fetched) <= allowed + 1024 * median(requests)));
  }

  // A pipeline cached on the remote, run where nothing is cached locally.
  {
    const std::size_t levels = 10, width = 10, steps = levels * width;
    const auto pipeline = layered(levels, width);
    auto writer = store_with_remote(o.dir / "remote-pipe", server, base + "/pipeline");
    auto t0 = Clock::now();
    const auto computed = pipeline.run(writer);
    const double first_s = seconds_since(t0);
    std::vector<double> local_s, remote_s, fetched, requests, rounds;
    bool ok = computed.ok && computed.count("ran") == steps;
    CountingRelay relay(server.endpoint());
    for (int r = 0; r < repeats; ++r) {
      touch_scratch();
      t0 = Clock::now();
      const auto local = pipeline.run(writer, {.remote_cache = amphora::RemoteCache::off});
      local_s.push_back(seconds_since(t0));
      ok = ok && local.count("cached") == steps;
      auto reader = fresh_store(o.dir / "remote-pipe-reader");
      reader.add_remote({.name = "bench", .url = base + "/pipeline", .endpoint = relay.endpoint()});
      touch_scratch();
      relay.reset();
      t0 = Clock::now();
      const auto served = pipeline.run(reader);
      remote_s.push_back(seconds_since(t0));
      fetched.push_back(static_cast<double>(relay.bytes_down()));
      requests.push_back(static_cast<double>(relay.requests()));
      rounds.push_back(served.record["remote_cache"].value("lookup_rounds", 0.0));
      ok = ok && served.count("cached") == steps && reader.artifacts().empty();
      for (const auto& step : served.steps) ok = ok && step.cache == "bench";
      retire(o.dir / "remote-pipe-reader");
    }
    // What one request costs on its own: the floor of a lookup round.
    auto medium = amphora::open_s3_medium(base + "/pipeline", {.endpoint = server.endpoint()});
    const std::string entry = "cache/" + computed.steps.back().key.hex() + ".json";
    std::vector<double> single;
    for (int k = 0; k < 50; ++k) {
      t0 = Clock::now();
      (void)medium->get(entry, 1u << 20);
      single.push_back(seconds_since(t0));
    }
    clear_remote(writer);
    retire(o.dir / "remote-pipe");
    const double per_request = median(single), n_requests = median(requests);
    std::printf("  %zu-step pipeline (%zu levels of %zu), fully cached: first run (computing, sharing) %.0f ms\n", steps,
                levels, width, first_s * 1e3);
    std::printf("    served by the local cache      %9.1f ms\n", median(local_s) * 1e3);
    std::printf("    served by the remote, empty store %6.1f ms: %.0f requests (%.2f a step), %.0f KiB fetched; "
                "one at a time they would wait %.0f ms (%.2f ms each)\n",
                median(remote_s) * 1e3, n_requests, n_requests / static_cast<double>(steps), median(fetched) / 1024,
                n_requests * per_request * 1e3, per_request * 1e3);
    std::printf("    at most 2 requests a cached step, plus 3 a run (marker, listing, run record): %s\n",
                verdict(ok && n_requests <= 2.0 * static_cast<double>(steps) + 3));
    // On two cores the gateway's own rate bounds a round: 10 lookups of two
    // reads each take what 20 of its requests take, at once or not.
    std::printf("    one batched lookup round per DAG level: %.0f rounds for %zu levels: %s\n", median(rounds), levels,
                verdict(ok && median(rounds) == static_cast<double>(levels)));
    if (!ok) std::printf("    MISMATCH: a run did not compute, or was not served, as expected\n");
  }
}

}  // namespace amphora_bench
