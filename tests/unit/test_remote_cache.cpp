// A store's remote as a shared action cache (FORMAT.md §13.4), on a file://
// remote: what a run looks up there, what it pushes, what it pulls, and what
// it says. tests/python/test_remote_pipeline.py runs pipelines of separate
// processes against a real S3 server.

#include "support.hpp"

#include <amphora/everyday.hpp>
#include <amphora/pipeline.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <mutex>
#include <unistd.h>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

std::string file_url(const fs::path& dir) { return "file://" + fs::absolute(dir).string(); }

// words(n) -> lengths -> total, and words -> first: a chain and a branch.
struct Shared {
  Pipeline p{"shared"};
  std::map<std::string, int> calls;
  std::mutex mutex;

  void count(const std::string& step) {
    std::lock_guard lock(mutex);
    ++calls[step];
  }

  Shared() {
    auto words = p.step({.name = "words", .params = {{"n", 5}}}, [this](const StepContext& c) {
      count("words");
      std::vector<std::string> w;
      for (int i = 0; i < c.param<int>("n"); ++i) w.push_back(std::string(static_cast<std::size_t>(i + 1), 'a'));
      return w;
    });
    auto lengths = p.step({.name = "lengths"},
                          [this](const std::vector<std::string>& w) {
                            count("lengths");
                            std::vector<std::int64_t> n;
                            for (const auto& s : w) n.push_back(static_cast<std::int64_t>(s.size()));
                            return n;
                          },
                          words);
    p.step({.name = "total", .params = {{"scale", 1}}},
           [this](const std::vector<std::int64_t>& n, const StepContext& c) {
             count("total");
             std::int64_t sum = 0;
             for (auto v : n) sum += v;
             return sum * c.param<int>("scale");
           },
           lengths);
    p.step({.name = "first"},
           [this](const std::vector<std::string>& w) {
             count("first");
             return w.front();
           },
           words);
  }
  int computed() {
    std::lock_guard lock(mutex);
    int n = 0;
    for (const auto& [step, k] : calls) n += k;
    return n;
  }
};

bool has_entry(const fs::path& store, const Digest& key) { return fs::exists(store / "cache" / (key.hex() + ".json")); }

Store store_with_remote(const fs::path& dir, const fs::path& remote) {
  Store s = test::make_store(dir);
  s.add_remote({"team", file_url(remote), "", ""});
  return s;
}

}  // namespace

TEST_CASE("Remote cache: a run elsewhere is served by digests alone and pulls only what it reads", "[remote]") {
  test::TempDir dir;
  Shared one;
  Store a = store_with_remote(dir / "a", dir / "remote");
  auto first = one.p.run(a);
  REQUIRE(first.ok);
  CHECK(first.count("ran") == 4);
  CHECK(first.record["remote_cache"]["remote"] == "team");
  CHECK(first.record["remote_cache"]["mode"] == "read_write");
  CHECK_FALSE(first.record.value("host", "").empty());

  // What ran is on the remote: every output, every entry, the run record.
  Store remote = Store::open(dir / "remote");
  for (const auto& s : first.steps) {
    CHECK(has_entry(dir / "remote", s.key));
    for (const auto& o : s.outputs) CHECK(remote.contains(o.digest));
  }
  // Named there as here, so gc --keep-last treats the remote as a store.
  CHECK(remote.names() == std::vector<std::string>{"shared.first.out", "shared.lengths.out", "shared.total.out",
                                                   "shared.words.out"});
  CHECK(remote.resolve("shared.total.out") == first.step("total").outputs[0].digest);
  CHECK(remote.versions("shared.total.out").front().record["run"] == first.run_id);
  REQUIRE(list_runs(remote).size() == 1);
  CHECK(list_runs(remote).front()["run"] == first.run_id);

  // Another machine, an empty store: nothing computed, nothing copied.
  Shared two;
  Store b = store_with_remote(dir / "b", dir / "remote");
  auto second = two.p.run(b);
  REQUIRE(second.ok);
  CHECK(two.computed() == 0);
  CHECK(second.count("cached") == 4);
  CHECK(second.record["remote_cache"]["lookup_rounds"] == 3);  // one per level: words; lengths, first; total
  for (const auto& s : second.steps) {
    CHECK(s.cache == "team");
    CHECK(s.reason.empty());
    CHECK(second.record["steps"][&s - second.steps.data()]["cache"] == "team");
    for (const auto& o : s.outputs) CHECK_FALSE(b.contains(o.digest));
  }
  CHECK(b.artifacts().empty());
  // The names say what the outputs are, and a load pulls one when asked.
  CHECK(b.resolve("shared.total.out") == first.step("total").outputs[0].digest);
  CHECK(b.verify().ok());  // names of remote hits are not damage while the remote is configured
  CHECK(b.load<std::int64_t>("shared.total.out") == 15);
  CHECK(b.contains(first.step("total").outputs[0].digest));
  CHECK(b.artifacts().size() == 1);

  // A changed parameter of the last step: it runs, reading (and pulling)
  // only its own input; the result is shared for the next machine.
  auto third = two.p.run(b, {.params = {{"total", {{"scale", 2}}}}});
  REQUIRE(third.ok);
  CHECK(two.calls == std::map<std::string, int>{{"total", 1}});
  CHECK(third.step("total").status == "ran");
  CHECK(b.contains(first.step("lengths").outputs[0].digest));
  CHECK_FALSE(b.contains(first.step("words").outputs[0].digest));
  CHECK(remote.contains(third.step("total").outputs[0].digest));
  auto again = one.p.run(a, {.params = {{"total", {{"scale", 2}}}}});
  CHECK(again.step("total").status == "cached");
  CHECK(again.step("total").cache == "team");
  CHECK(one.calls["total"] == 1);
  CHECK(a.load<std::int64_t>("shared.total.out") == 30);

  // A local hit stays local: no need to ask the remote.
  auto local = one.p.run(a);
  CHECK(local.count("cached") == 4);
  for (const auto& s : local.steps) CHECK(s.cache == "local");
}

TEST_CASE("Remote cache: read mode writes nothing there, off ignores it", "[remote]") {
  test::TempDir dir;
  Shared one;
  Store a = store_with_remote(dir / "a", dir / "remote");
  REQUIRE(one.p.run(a).ok);
  Store remote = Store::open(dir / "remote");
  const auto entries_before = remote.artifacts().size();

  Shared two;
  Store b = store_with_remote(dir / "b", dir / "remote");
  auto read = two.p.run(b, {.params = {{"total", {{"scale", 3}}}}, .remote_cache = RemoteCache::read});
  REQUIRE(read.ok);
  CHECK(read.record["remote_cache"]["mode"] == "read");
  CHECK(two.calls == std::map<std::string, int>{{"total", 1}});  // the rest served by the remote
  CHECK(remote.artifacts().size() == entries_before);
  CHECK_FALSE(remote.contains(read.step("total").outputs[0].digest));
  CHECK_FALSE(has_entry(dir / "remote", read.step("total").key));
  CHECK(list_runs(remote).size() == 1);

  Shared three;
  Store c = store_with_remote(dir / "c", dir / "remote");
  auto off = three.p.run(c, {.remote_cache = RemoteCache::off});
  REQUIRE(off.ok);
  CHECK(off.count("ran") == 4);
  CHECK(off.record["remote_cache"] == "off");

  // Reading from a remote that holds no store yet reads nothing.
  Shared empty;
  Store e = store_with_remote(dir / "e", dir / "nothing-there");
  auto nothing = empty.p.run(e, {.remote_cache = RemoteCache::read});
  REQUIRE(nothing.ok);
  CHECK(nothing.count("ran") == 4);
  CHECK(nothing.record["remote_cache"] == "off: remote 'team' holds no store yet");
  CHECK_FALSE(fs::exists(dir / "nothing-there"));

  // A store with two remotes uses neither, and says so.
  Shared four;
  Store d = store_with_remote(dir / "d", dir / "remote");
  d.add_remote({"other", file_url(dir / "other"), "", ""});
  auto two_remotes = four.p.run(d);
  CHECK(two_remotes.count("ran") == 4);
  CHECK(two_remotes.record["remote_cache"] == "off: the store has 2 remotes");
}

TEST_CASE("Remote cache: an entry whose outputs left the remote is a miss that says so", "[remote]") {
  test::TempDir dir;
  Shared one;
  Store a = store_with_remote(dir / "a", dir / "remote");
  auto first = one.p.run(a);
  REQUIRE(first.ok);
  // The remote's copy of `lengths` output is removed by hand.
  const Digest gone = first.step("lengths").outputs[0].digest;
  fs::remove_all(test::object_dir(dir / "remote", gone));

  Shared two;
  Store b = store_with_remote(dir / "b", dir / "remote");
  auto second = two.p.run(b);
  REQUIRE(second.ok);
  const auto& lengths = second.step("lengths");
  CHECK(lengths.status == "ran");
  CHECK_THAT(lengths.reason, Catch::Contains("output `out` of the cache entry on remote 'team' is not there") &&
                                 Catch::Contains(gone.short_str()));
  // It ran here from the remote's `words`, and shared its output again.
  CHECK(two.calls == std::map<std::string, int>{{"lengths", 1}});
  CHECK(Store::open(dir / "remote").contains(gone));
  CHECK(second.step("total").status == "cached");
}

TEST_CASE("Remote cache: a remote that fails leaves the run failed, the store consistent, and a rerun completes",
          "[remote]") {
  test::TempDir dir;
  // The remote refuses this pipeline's run records: a file stands where
  // their folder goes.
  (void)Store::open(dir / "remote", {.create = true});
  test::write_text(dir / "remote" / "runs" / "shared", "in the way");

  Shared two;
  Store b = store_with_remote(dir / "b", dir / "remote");
  auto failed = two.p.run(b);
  CHECK_FALSE(failed.ok);
  CHECK_THAT(failed.error, Catch::StartsWith("the run record could not be written to remote 'team': "));
  CHECK(failed.count("ran") == 4);
  CHECK(b.verify().ok());
  const auto runs = list_runs(b);
  REQUIRE(runs.size() == 1);
  CHECK(runs.back()["status"] == "failed");
  CHECK(runs.back()["error"] == failed.error);
  // What ran is shared all the same: another store is served by the remote.
  Shared three;
  Store c = store_with_remote(dir / "c", dir / "remote");
  const auto served = three.p.run(c, {.remote_cache = RemoteCache::read});
  CHECK(served.ok);
  CHECK(served.count("cached") == 4);
  CHECK(three.computed() == 0);

  // Put right, a rerun completes from what this store kept.
  fs::remove(dir / "remote" / "runs" / "shared");
  auto rerun = two.p.run(b);
  REQUIRE(rerun.ok);
  CHECK(rerun.count("cached") == 4);
  CHECK(two.computed() == 4);
  CHECK(b.verify().ok());
  const auto shared_runs = list_runs(Store::open(dir / "remote"));
  REQUIRE(shared_runs.size() == 1);
  CHECK(shared_runs.front()["run"] == rerun.run_id);
}

TEST_CASE("Remote cache: gc --keep-last on the remote drops old results and their entries, as locally", "[remote]") {
  test::TempDir dir;
  Shared one;
  Store a = store_with_remote(dir / "a", dir / "remote");
  const auto first = one.p.run(a);
  const auto second = one.p.run(a, {.params = {{"total", {{"scale", 2}}}}});
  REQUIRE((first.ok && second.ok));
  Store remote = a.remote_store("team");
  REQUIRE(remote.versions("shared.total.out").size() == 2);
  const auto report = remote.gc(false, std::chrono::seconds(0), 1);
  CHECK(report.dropped_versions.size() == 1);
  CHECK(report.dropped_cache_entries == 1);
  CHECK_FALSE(remote.contains(first.step("total").outputs[0].digest));
  CHECK(remote.contains(second.step("total").outputs[0].digest));
  CHECK(remote.verify().ok());

  // Another machine asking for the dropped result computes it; the rest is served.
  Shared two;
  Store b = store_with_remote(dir / "b", dir / "remote");
  const auto again = two.p.run(b);
  REQUIRE(again.ok);
  CHECK(two.calls == std::map<std::string, int>{{"total", 1}});
  CHECK(again.step("total").reason == "no cache entry");
  CHECK(again.step("lengths").cache == "team");
}

TEST_CASE("Remote cache: a remote whose location cannot hold a store is named, read through to none", "[remote]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "s");
  test::write_text(dir / "file", "not a store");
  const std::string url = file_url(dir / "file");
  store.add_remote({"bad", url, "", ""});
  (void)store.save(std::string("x"), {.name = "x"});
  CHECK_THROWS_AS(store.push(), InvalidArgument);
  CHECK_THROWS_WITH(store.push(), Catch::Contains("remote 'bad' (" + url + ") cannot hold a store") &&
                                      Catch::Contains("is a regular file, not a directory"));
  // Loads of what the store lacks: nothing to read through to.
  CHECK_THROWS_AS(store.open_artifact("absent"), NotFound);
  CHECK_THROWS_AS(store.load<std::string>("absent"), NotFound);
  CHECK(store.load<std::string>("x") == "x");
  // A run reading the remote cache runs on the local one and says why; one
  // that would write to it refuses to start, naming the remote.
  Pipeline p("local");
  p.step({.name = "one"}, [] { return std::int64_t{1}; });
  const auto report = p.run(store, {.remote_cache = RemoteCache::read});
  CHECK(report.ok);
  CHECK_THAT(report.record["remote_cache"].dump(), Catch::Contains("off: remote 'bad'") && Catch::Contains("cannot hold a store"));
  CHECK_THROWS_AS(p.run(store), InvalidArgument);
  CHECK_THROWS_WITH(p.run(store), Catch::Contains("remote 'bad'") && Catch::Contains("--no-remote-cache"));
  CHECK(test::read_text(dir / "file") == "not a store");
}
