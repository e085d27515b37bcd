// Several processes against one store: determinism, concurrent naming, and
// writers killed with SIGKILL mid-save. $AMPHORA_TEST_SCALE scales the work.

#include "support.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <set>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

using namespace amphora;
namespace fs = std::filesystem;

namespace {

struct Child {
  pid_t pid = -1;
  fs::path output;
};

Child spawn_writer(const std::vector<std::string>& args, const fs::path& output,
                   const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> all = {AMPHORA_TEST_WRITER};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);  // its errors land beside its output
  Child c;
  c.output = output;
  std::vector<std::string> env_strings(extra_env);
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);  // earlier entries win
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int rc = posix_spawn(&c.pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  return c;
}

int wait_exit(const Child& c) {
  int status = 0;
  REQUIRE(::waitpid(c.pid, &status, 0) == c.pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("The same value saved from two processes has the same digest", "[processes]") {
  test::TempDir dir;
  auto a = spawn_writer({"digest", (dir / "a").string(), "77", "300", "200"}, dir / "a.out");
  auto b = spawn_writer({"digest", (dir / "b").string(), "77", "300", "200"}, dir / "b.out");
  REQUIRE(wait_exit(a) == 0);
  REQUIRE(wait_exit(b) == 0);
  auto da = test::read_text(dir / "a.out"), db = test::read_text(dir / "b.out");
  CHECK(da.size() == 72);  // sha256:<64 hex> and a newline
  CHECK(da == db);
  auto c = spawn_writer({"digest", (dir / "a").string(), "78", "300", "200"}, dir / "c.out");
  REQUIRE(wait_exit(c) == 0);
  CHECK(test::read_text(dir / "c.out") != da);
  // Neither the thread count nor the hashing kernel may change a digest
  // (summary statistics are hashed too). 64 MiB of float32 makes 32 pieces,
  // enough for sixteen-lane hashing when it is available; "one" hashes with
  // libcrypto alone, one piece at a time.
  auto one = spawn_writer({"digest", (dir / "d").string(), "79", "4096", "4096"}, dir / "d.out",
                          {"AMPHORA_THREADS=1", "AMPHORA_SHA256_X16=0", "AMPHORA_SHA256_X2=0"});
  auto many = spawn_writer({"digest", (dir / "e").string(), "79", "4096", "4096"}, dir / "e.out",
                           {"AMPHORA_THREADS=3"});
  auto plain = spawn_writer({"digest", (dir / "f").string(), "79", "4096", "4096"}, dir / "f.out");
  REQUIRE(wait_exit(one) == 0);
  REQUIRE(wait_exit(many) == 0);
  REQUIRE(wait_exit(plain) == 0);
  CHECK(test::read_text(dir / "d.out") == test::read_text(dir / "f.out"));
  CHECK(test::read_text(dir / "e.out") == test::read_text(dir / "f.out"));
}

TEST_CASE("Concurrent writers naming into one store lose nothing", "[processes]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const int writers = 4, each = 15 * test::scale();
  std::vector<Child> children;
  for (int w = 0; w < writers; ++w)
    children.push_back(spawn_writer({"many", (dir / "store").string(), "shared", std::to_string(each), std::to_string(w + 1)},
                                    dir / ("w" + std::to_string(w) + ".out")));
  for (auto& c : children) REQUIRE(wait_exit(c) == 0);

  // Every version a writer was given exists, holds that writer's digest, and
  // no version was handed out twice.
  std::set<std::uint64_t> seen;
  for (auto& c : children) {
    std::istringstream lines(test::read_text(c.output));
    std::uint64_t version;
    std::string digest;
    int count = 0;
    while (lines >> version >> digest) {
      ++count;
      CHECK(seen.insert(version).second);
      CHECK(store.resolve("shared@" + std::to_string(version)).str() == digest);
    }
    CHECK(count == each);
  }
  CHECK(seen.size() == static_cast<std::size_t>(writers * each));
  CHECK(*seen.rbegin() == static_cast<std::uint64_t>(writers * each));
  CHECK(store.artifacts().size() == static_cast<std::size_t>(writers * each));
  auto report = store.verify();
  CHECK(report.problems.empty());
}

// Kills at random moments of a payload's write: make stress runs it (the
// deterministic fault points below cover the same steps in every test run).
TEST_CASE("Writers killed mid-save never leave a visible partial artifact", "[.][stress][processes]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::mt19937 rng(12345);
  const int kills = 6 * test::scale();
  int mid_write = 0;
  for (int k = 0; k < kills; ++k) {
    auto child = spawn_writer({"loop", (dir / "store").string(), "crash", "32"}, dir / "loop.out");
    // Kill once a save has completed and the next one is writing its payload
    // (however slow this build is), at a random point of that write.
    auto writing = [&] {
      std::error_code ec;
      for (fs::directory_iterator it(dir / "store/tmp", ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code ec2;
        if (it->path().filename().string().starts_with("stage-") && fs::is_directory(it->path(), ec2) &&
            !fs::is_empty(it->path(), ec2) && !ec2)
          return true;
      }
      return false;
    };
    for (int wait = 0; wait < 6000; ++wait) {
      if (test::read_text(dir / "loop.out").find("saved 0") != std::string::npos && writing()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 20));
    ::kill(child.pid, SIGKILL);
    CHECK(wait_exit(child) == 128 + SIGKILL);
    if (writing()) ++mid_write;  // the kill landed while a payload was being written

    // Whatever was published is complete; every name points at a complete artifact.
    auto report = store.verify();
    INFO("after kill " << k << ": " << (report.problems.empty() ? "" : report.problems[0]));
    REQUIRE(report.ok());
  }
  CHECK(mid_write > 0);
  // The killed writers' staging areas are collectable and nothing else is harmed.
  auto gc = store.gc(false, std::chrono::seconds(0));
  CHECK(gc.staging.in_use == 0);
  std::size_t leftovers = 0;
  for (const auto& e : fs::directory_iterator(dir / "store/tmp")) {
    (void)e;
    ++leftovers;
  }
  CHECK(leftovers == 0);
  CHECK(store.verify().ok());
  auto versions = store.versions("crash");
  REQUIRE(versions.size() >= static_cast<std::size_t>(kills));
  for (const auto& v : versions) CHECK(store.load<Tensor>(v.digest.str()).num_elements() == 32 * 1024 * 256);
}

TEST_CASE("A writer killed at each step of a save leaves nothing partial behind", "[processes]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  int seed = 40;
  for (const char* point : {"before:publish", "after:publish", "before:put", "after:put"}) {
    INFO(point);
    const std::vector<std::string> args = {"named", (dir / "store").string(), "k", std::to_string(++seed), "256", "256"};
    auto killed = spawn_writer(args, dir / "killed.out", {std::string("AMPHORA_TEST_FAULT=") + point});
    REQUIRE(wait_exit(killed) == 128 + SIGKILL);
    // Published or not, named or not: nothing partial is visible.
    auto report = store.verify();
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.ok());
    // Its staging area is collectable, and the same save then succeeds.
    auto gc = store.gc(false, std::chrono::seconds(0));
    CHECK(gc.staging.in_use == 0);
    CHECK(fs::is_empty(dir / "store/tmp"));
    auto again = spawn_writer(args, dir / "again.out");
    REQUIRE(wait_exit(again) == 0);
    CHECK(store.verify().ok());
  }
  CHECK(store.versions("k").size() >= 4);
}

TEST_CASE("A repair killed at any step never leaves the digest naming nothing", "[processes][repair]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const std::vector<std::string> args = {"named", (dir / "store").string(), "r", "91", "1024", "1024"};  // 4 MiB
  auto first = spawn_writer(args, dir / "first.out");
  REQUIRE(wait_exit(first) == 0);
  std::string digest_text = test::read_text(dir / "first.out").substr(0, 71);
  Digest digest = Digest::parse(digest_text);
  auto payload = test::object_dir(dir / "store", digest) / "tensor.npy";

  for (const char* point : {"before:replace", "after:replace"}) {
    INFO(point);
    test::flip_byte(payload, 4096 + 1000);
    REQUIRE_FALSE(store.verify(digest.str()).ok());
    auto killed = spawn_writer(args, dir / "killed.out", {std::string("AMPHORA_TEST_FAULT=") + point});
    REQUIRE(wait_exit(killed) == 128 + SIGKILL);
    // Whichever step the kill hit, the digest still names a whole artifact:
    // the damaged copy before the swap, the repaired one after it.
    REQUIRE(store.contains(digest));
    CHECK(store.verify(digest.str()).ok() == (std::string(point) == "after:replace"));
    // gc keeps the named artifact and sweeps the killed writer's leftovers.
    auto gc = store.gc(false, std::chrono::seconds(0));
    CHECK(gc.kept == 1);
    CHECK(gc.removed.empty());
    CHECK(store.contains(digest));
    // The next save of the value repairs whatever is still damaged.
    auto again = spawn_writer(args, dir / "again.out");
    REQUIRE(wait_exit(again) == 0);
    CHECK(store.verify().ok());
    CHECK(test::read_text(dir / "again.out").substr(0, 71) == digest_text);
  }
}

TEST_CASE("gc running beside writer processes loses no named artifact", "[processes][gc]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const int writers = 3, each = 20 * test::scale();
  std::vector<Child> children;
  for (int w = 0; w < writers; ++w)
    children.push_back(spawn_writer({"many", (dir / "store").string(), "n" + std::to_string(w), std::to_string(each),
                                     std::to_string(w + 7)},
                                    dir / ("w" + std::to_string(w) + ".out")));
  // Collect continuously, with no grace for staging areas, while they save.
  int collections = 0;
  for (bool running = true; running; ++collections) {
    store.gc(false, std::chrono::seconds(0));
    running = false;
    for (auto& c : children)
      if (::waitpid(c.pid, nullptr, WNOHANG) == 0) running = true;
  }
  CHECK(collections > 1);
  for (int w = 0; w < writers; ++w) {
    const std::string out = test::read_text(dir / ("w" + std::to_string(w) + ".out"));
    INFO("writer " << w << " printed:\n" << out);
    std::istringstream lines(out);
    std::uint64_t version;
    std::string digest;
    int count = 0;
    while (lines >> version >> digest) {
      ++count;
      auto ref = "n" + std::to_string(w) + "@" + std::to_string(version);
      CHECK(store.resolve(ref).str() == digest);
      CHECK(store.load<Tensor>(ref).num_elements() == 64);
    }
    CHECK(count == each);
  }
  CHECK(store.verify().ok());
}

namespace {
struct Triple {
  Tensor shared, own, other;
};
}  // namespace

template <>
struct amphora::materializer<Triple> {
  static constexpr std::string_view name = "test.triple";
  static constexpr int version = 1;
  static void save(const Triple&, ArtifactWriter&) { throw InvalidArgument("only the writer process saves these"); }
  static Triple load(const ArtifactReader& in) {
    return {in.load_child<Tensor>("shared"), in.load_child<Tensor>("own"), in.load_child<Tensor>("other")};
  }
};

TEST_CASE("gc beside processes saving composites never collects a child of a named parent", "[processes][gc][composite]") {
  const int writers = 2, each = 8 * test::scale();
  // With no grace period gc may take a child before its parent is published:
  // that save then fails loudly, and nothing named ever lacks a child. With
  // the default grace period no save fails.
  for (std::chrono::seconds grace : {std::chrono::seconds(0), Store::kDefaultGcGrace}) {
    INFO("grace " << grace.count() << " s");
    test::TempDir dir;
    Store store = test::make_store(dir / "store");
    std::vector<Child> children;
    for (int w = 0; w < writers; ++w)
      children.push_back(spawn_writer({"composites", (dir / "store").string(), "c" + std::to_string(w),
                                       std::to_string(each), std::to_string(w + 3)},
                                      dir / ("w" + std::to_string(w) + ".out")));
    int collections = 0;
    for (bool running = true; running; ++collections) {
      store.gc(false, grace);
      running = false;
      for (auto& c : children)
        if (::waitpid(c.pid, nullptr, WNOHANG) == 0) running = true;
    }
    CHECK(collections > 1);
    int saved = 0, refused = 0;
    for (int w = 0; w < writers; ++w) {
      const std::string out = test::read_text(dir / ("w" + std::to_string(w) + ".out"));
      INFO("writer " << w << " printed:\n" << out);
      std::istringstream lines(out);
      std::string first;
      while (lines >> first) {
        if (first == "collected") {
          ++refused;
          continue;
        }
        std::string digest;
        lines >> digest;
        ++saved;
        auto ref = "c" + std::to_string(w) + "@" + first;
        CHECK(store.resolve(ref).str() == digest);
        Triple t = store.load<Triple>(ref);
        CHECK(t.own.num_elements() == 256);
      }
    }
    CHECK(saved + refused == writers * each);
    if (grace > std::chrono::seconds(0)) CHECK(refused == 0);
    store.gc(false, std::chrono::seconds(0));
    auto report = store.verify();
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.ok());
  }
}
