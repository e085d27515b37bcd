// Pipelines: the hit and miss matrix, explained misses, early cutoff,
// failure and resume, parallel steps, lazy inputs, run records and lineage.

#include "support.hpp"

#include <amphora/json.hpp>
#include <amphora/everyday.hpp>
#include <amphora/run_main.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <thread>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

// A value that counts how often it is loaded from the store.
struct Counted {
  std::int64_t value = 0;
};
std::atomic<int> counted_loads{0};

}  // namespace

template <>
struct amphora::materializer<Counted> {
  static constexpr std::string_view name = "test.counted";
  static constexpr int version = 1;
  static void save(const Counted& c, ArtifactWriter& out) { out.meta()["value"] = c.value; }
  static Counted load(const ArtifactReader& in) {
    ++counted_loads;
    return Counted{in.meta<std::int64_t>("value")};
  }
};

namespace {

// source(n) -> vector 0..n-1 -> parity (early cutoff: only n's parity) -> report
struct Chain {
  Pipeline p{"chain"};
  std::map<std::string, int> calls;
  std::mutex mutex;
  std::string source_version = "1";
  bool fail_report = false;

  void count(const std::string& step) {
    std::lock_guard lock(mutex);
    ++calls[step];
  }

  Chain() {
    auto numbers = p.step({.name = "numbers", .version = "1", .params = {{"n", 4}, {"scale", 1.0}}, .outputs = {"values"}},
                          [this](const StepContext& c) {
                            count("numbers");
                            std::vector<std::int64_t> v;
                            for (int i = 0; i < c.param<int>("n"); ++i) v.push_back(i);
                            return v;
                          });
    auto parity = p.step({.name = "parity", .outputs = {"parity"}},
                         [this](const std::vector<std::int64_t>& v) {
                           count("parity");
                           return static_cast<std::int64_t>(v.size() % 2);
                         },
                         numbers);
    p.step({.name = "report"},
           [this](const std::int64_t& parity, const StepContext&) {
             count("report");
             if (fail_report) throw std::runtime_error("report exploded");
             return std::string(parity ? "odd" : "even");
           },
           parity);
  }
  RunReport run(Store& store, RunOptions options = {}) {
    calls.clear();
    return p.run(store, options);
  }
};

std::string status_of(const RunReport& r, const std::string& step) { return r.step(step).status; }
std::string reason_of(const RunReport& r, const std::string& step) { return r.step(step).reason; }

}  // namespace

TEST_CASE("An unchanged pipeline is served from the cache", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  auto first = chain.run(store);
  REQUIRE(first.ok);
  CHECK(first.count("ran") == 3);
  CHECK(reason_of(first, "numbers") == "no cache entry");
  CHECK(store.load<std::string>("chain.report.out") == "even");
  CHECK(store.load<std::vector<std::int64_t>>("chain.numbers.values") == std::vector<std::int64_t>{0, 1, 2, 3});

  auto second = chain.run(store);
  REQUIRE(second.ok);
  CHECK(second.count("cached") == 3);
  CHECK(chain.calls.empty());
  for (const auto& s : second.steps) {
    CHECK(s.reason.empty());
    CHECK(s.key == first.step(s.name).key);
    REQUIRE(s.outputs.size() == 1);
    CHECK(s.outputs[0].digest == first.step(s.name).outputs[0].digest);
  }
  // No new versions for identical results.
  CHECK(store.versions("chain.report.out").size() == 1);
  CHECK(second.step("report").outputs[0].ref == "chain.report.out@1");
}

TEST_CASE("A changed parameter reruns the step and names the parameter", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  REQUIRE(chain.run(store).ok);

  auto r = chain.run(store, {.params = {{"numbers", {{"n", 5}}}}});
  REQUIRE(r.ok);
  CHECK(status_of(r, "numbers") == "ran");
  CHECK(reason_of(r, "numbers") == "parameter `n` changed from 4 to 5");
  CHECK(status_of(r, "parity") == "ran");
  CHECK(reason_of(r, "parity") == "input `values` changed");
  CHECK(status_of(r, "report") == "ran");
  CHECK(store.load<std::string>("chain.report.out") == "odd");
  CHECK(store.versions("chain.report.out").size() == 2);

  // 1 and 1.0 are different parameters.
  auto typed = chain.run(store, {.params = {{"numbers", {{"n", 5}, {"scale", 1}}}}});
  CHECK(reason_of(typed, "numbers") == "parameter `scale` changed from 1.0 to 1");

  // Back to the first parameters: every step is a hit again, and the names
  // point at the first results once more.
  auto back = chain.run(store);
  CHECK(back.count("cached") == 3);
  CHECK(store.load<std::string>("chain.report.out") == "even");
  CHECK(store.versions("chain.report.out").size() == 3);
}

TEST_CASE("Unknown steps and parameters are refused before anything runs", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  CHECK_THROWS_WITH(chain.run(store, {.params = {{"numbers", {{"top_k", 5}}}}}),
                    Catch::Contains("step 'numbers' has no parameter 'top_k' (it has n, scale)"));
  CHECK_THROWS_WITH(chain.run(store, {.params = {{"nope", {{"n", 5}}}}}), Catch::Contains("no step 'nope'"));
  CHECK_THROWS_WITH(chain.run(store, {.force = {"nope"}}), Catch::Contains("no step 'nope'"));
  CHECK(chain.calls.empty());
  CHECK(list_runs(store).empty());
}

TEST_CASE("Early cutoff: an upstream rerun with identical output leaves downstream cached", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  REQUIRE(chain.run(store).ok);
  // n = 6 changes `numbers` and `parity` reruns, but its output (even) is the
  // same as before, so `report` is a hit.
  auto r = chain.run(store, {.params = {{"numbers", {{"n", 6}}}}});
  REQUIRE(r.ok);
  CHECK(status_of(r, "numbers") == "ran");
  CHECK(status_of(r, "parity") == "ran");
  CHECK(status_of(r, "report") == "cached");
  CHECK(chain.calls.count("report") == 0);
}

TEST_CASE("A cache entry copied from another key is a miss, not the other step's result", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  std::atomic<int> calls{0};  // the two steps run at once
  auto make = [&calls] {
    Pipeline p("copies");
    // Two steps of one form, output name and type: their entries differ only
    // in the key and step they record, and in the digest they hold.
    p.step({.name = "a", .params = {{"v", 1}}}, [&calls](const StepContext& c) {
      ++calls;
      return c.param<std::int64_t>("v");
    });
    p.step({.name = "b", .params = {{"v", 2}}}, [&calls](const StepContext& c) {
      ++calls;
      return c.param<std::int64_t>("v");
    });
    return p;
  };
  auto first = make().run(store);
  REQUIRE(first.ok);
  fs::copy_file(dir.path() / "cache" / (first.step("a").key.hex() + ".json"),
                dir.path() / "cache" / (first.step("b").key.hex() + ".json"), fs::copy_options::overwrite_existing);
  calls = 0;
  auto r = make().run(store);
  CHECK(status_of(r, "a") == "cached");
  CHECK(status_of(r, "b") == "ran");
  CHECK_THAT(reason_of(r, "b"), Catch::StartsWith("cache entry damaged: it records key " + first.step("a").key.short_str()));
  CHECK(calls == 1);
  CHECK(store.load<std::int64_t>("copies.b.out") == 2);
  CHECK(make().run(store).count("cached") == 2);  // b's own entry again
}

TEST_CASE("Step version and code fingerprint changes are misses", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  auto make = [](const std::string& version, const std::string& code) {
    Pipeline p("versions");
    p.step({.name = "one", .version = version, .code = code}, [] { return std::int64_t{1}; });
    return p;
  };
  REQUIRE(make("1", "sha256:aa").run(store).ok);
  CHECK(make("1", "sha256:aa").run(store).count("cached") == 1);
  auto bumped = make("2", "sha256:aa").run(store);
  CHECK(status_of(bumped, "one") == "ran");
  CHECK(reason_of(bumped, "one") == "version changed from \"1\" to \"2\"");
  auto edited = make("2", "sha256:bb").run(store);
  CHECK(status_of(edited, "one") == "ran");
  CHECK(reason_of(edited, "one") == "code changed");
}

TEST_CASE("A deleted or damaged output is a miss and is recomputed", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  auto first = chain.run(store);
  REQUIRE(first.ok);
  const auto numbers = first.step("numbers").outputs[0].digest;
  // Warm: the store has read and kept the manifests, cache entries and name
  // records of a cached run, and must still see each change made after it.
  const bool warm = GENERATE(false, true);
  INFO((warm ? "after a cached rerun in the same process" : "straight after the first run"));
  if (warm) REQUIRE(chain.run(store).count("cached") == 3);

  SECTION("deleted") {
    fs::remove_all(test::object_dir(dir.path(), numbers));
    auto r = chain.run(store);
    REQUIRE(r.ok);
    CHECK(status_of(r, "numbers") == "ran");
    CHECK_THAT(reason_of(r, "numbers"), Catch::StartsWith("output `values` missing or damaged"));
    CHECK(status_of(r, "parity") == "cached");  // same digest again: early cutoff
    CHECK(store.verify().ok());
  }
  SECTION("truncated") {
    auto reader = store.open_artifact(numbers);
    auto file = test::object_dir(dir.path(), numbers) / reader.manifest().files.front().path;
    fs::resize_file(file, fs::file_size(file) - 1);
    auto r = chain.run(store);
    CHECK(status_of(r, "numbers") == "ran");
    CHECK_THAT(reason_of(r, "numbers"), Catch::Contains("manifest says"));
    CHECK(store.verify().ok());  // the save replaced the damaged copy
  }
  SECTION("a flipped bit is found when hits are verified") {
    auto reader = store.open_artifact(numbers);
    auto file = test::object_dir(dir.path(), numbers) / reader.manifest().files.front().path;
    test::flip_byte(file, fs::file_size(file) - 1);
    CHECK(chain.run(store).count("cached") == 3);  // same sizes: the cheap check passes
    auto r = chain.run(store, {.verify_hits = true});
    CHECK(status_of(r, "numbers") == "ran");
    CHECK(store.verify().ok());
  }
  SECTION("cache entry removed") {
    REQUIRE(fs::remove(dir.path() / "cache" / (first.step("report").key.hex() + ".json")));
    auto r = chain.run(store);
    CHECK(status_of(r, "report") == "ran");
    CHECK(reason_of(r, "report") == "no cache entry (removed since the last run)");
  }
  SECTION("cache entry damaged") {
    auto file = dir.path() / "cache" / (first.step("report").key.hex() + ".json");
    test::write_text(file, "{\"outputs\": 3");
    auto r = chain.run(store);
    CHECK(status_of(r, "report") == "ran");
    CHECK_THAT(reason_of(r, "report"), Catch::StartsWith("cache entry damaged"));
  }
  SECTION("cache entry pointing elsewhere") {
    auto file = dir.path() / "cache" / (first.step("report").key.hex() + ".json");
    auto doc = nlohmann::json::parse(test::read_text(file));
    doc["outputs"]["out"] = Digest(amphora::Sha256::of("nothing saved")).str();
    test::write_text(file, doc.dump(1));
    auto r = chain.run(store);
    CHECK(status_of(r, "report") == "ran");
    CHECK_THAT(reason_of(r, "report"), Catch::StartsWith("output `out` missing or damaged"));
  }
  SECTION("a cache entry pointing at an artifact of the right materializer but another C++ type") {
    // parity's output is a 0-d int64 tensor, numbers' a 1-d one: both
    // amphora.tensor, so only the shape tells them apart.
    const Digest scalar = first.step("parity").outputs.front().digest;
    const auto file = dir.path() / "cache" / (first.step("numbers").key.hex() + ".json");
    auto doc = nlohmann::json::parse(test::read_text(file));
    doc["outputs"]["values"] = scalar.str();
    test::write_text(file, doc.dump(1));
    for (bool verify_hits : {false, true}) {
      INFO("verify_hits " << verify_hits);
      auto r = chain.run(store, {.verify_hits = verify_hits});
      CHECK(status_of(r, "numbers") == "ran");
      CHECK_THAT(reason_of(r, "numbers"),
                 Catch::StartsWith("output `values` missing or damaged (") &&
                     Catch::Contains("holds a 0-d int64 tensor, not a 1-d int64 vector"));
      CHECK(r.ok);
      CHECK(store.load<std::vector<std::int64_t>>("chain.numbers.values").size() == 4);
      test::write_text(file, doc.dump(1));  // the entry the run replaced, damaged again
    }
  }
  SECTION("a cache entry naming another step") {
    const auto file = dir.path() / "cache" / (first.step("report").key.hex() + ".json");
    auto doc = nlohmann::json::parse(test::read_text(file));
    doc["step"] = "parity";
    test::write_text(file, doc.dump(1));
    auto r = chain.run(store);
    CHECK(status_of(r, "report") == "ran");
    CHECK(reason_of(r, "report") == "cache entry damaged: it is an entry of step 'parity', not 'report'");
  }
  SECTION("a cache entry recording no key") {
    const auto file = dir.path() / "cache" / (first.step("report").key.hex() + ".json");
    auto doc = nlohmann::json::parse(test::read_text(file));
    doc.erase("key");
    test::write_text(file, doc.dump(1));
    auto r = chain.run(store);
    CHECK(status_of(r, "report") == "ran");
    CHECK_THAT(reason_of(r, "report"), Catch::StartsWith("cache entry damaged: it records key none"));
  }
  SECTION("a file of a child replaced by a directory") {
    auto reader = store.open_artifact(numbers);
    auto file = test::object_dir(dir.path(), numbers) / reader.manifest().files.front().path;
    fs::remove(file);
    fs::create_directory(file);
    auto r = chain.run(store);
    CHECK(status_of(r, "numbers") == "ran");
    CHECK_THAT(reason_of(r, "numbers"), Catch::Contains("is a directory, not a regular file"));
    CHECK(store.verify().ok());
  }
  SECTION("a cache entry whose provenance cannot go into a name record") {
    // Readable (under the 1 MiB a record may hold), but a hit would name the
    // output again with this provenance plus the run: over the limit.
    store.save(std::string("not the parity"), {.name = "chain.parity.parity"});
    const auto file = dir.path() / "cache" / (first.step("parity").key.hex() + ".json");
    auto doc = nlohmann::json::parse(test::read_text(file));
    // Many short items: a record indents them more deeply than the entry.
    const auto items = ((1u << 20) - doc.dump(1).size() - 200) / 6;
    doc["provenance"]["pad"] = nlohmann::json::array();
    for (std::size_t k = 0; k < items; ++k) doc["provenance"]["pad"].push_back(1);
    test::write_text(file, doc.dump(1));
    REQUIRE(fs::file_size(file) < (1u << 20));
    auto r = chain.run(store);
    REQUIRE(r.ok);
    CHECK(status_of(r, "parity") == "ran");
    CHECK_THAT(reason_of(r, "parity"), Catch::StartsWith("cache entry unusable: ") && Catch::Contains("bytes"));
    CHECK(store.load<std::int64_t>("chain.parity.parity") == 0);
    CHECK(fs::file_size(file) < 4096);                   // replaced by the run's own entry
    CHECK(chain.run(store).count("cached") == 3);
  }
  SECTION("the output's name given another artifact meanwhile") {
    store.save(std::string("not the parity"), {.name = "chain.parity.parity"});
    auto r = chain.run(store);
    CHECK(r.count("cached") == 3);
    // The name means the latest run's output again: a new version for it.
    CHECK(r.step("parity").outputs[0].ref == "chain.parity.parity@3");
    CHECK(store.load<std::int64_t>("chain.parity.parity") == 0);
  }
}

TEST_CASE("A forced step reruns; its dependents stay cached if its output is the same", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  REQUIRE(chain.run(store).ok);
  auto r = chain.run(store, {.force = {"parity"}});
  CHECK(status_of(r, "numbers") == "cached");
  CHECK(status_of(r, "parity") == "ran");
  CHECK(reason_of(r, "parity") == "forced");
  CHECK(status_of(r, "report") == "cached");
  auto all = chain.run(store, {.force = {"*"}});
  CHECK(all.count("ran") == 3);
}

TEST_CASE("A failing step fails the run; the next run resumes from the cache", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  chain.fail_report = true;
  auto failed = chain.run(store);
  CHECK_FALSE(failed.ok);
  CHECK(failed.error == "step 'report' failed: report exploded");
  CHECK(status_of(failed, "report") == "failed");
  CHECK(failed.step("report").error == "report exploded");
  CHECK(failed.record["status"] == "failed");
  CHECK(store.versions("chain.parity.parity").size() == 1);  // committed
  CHECK_THROWS_AS(store.resolve("chain.report.out"), NotFound);

  chain.fail_report = false;
  auto resumed = chain.run(store);
  REQUIRE(resumed.ok);
  CHECK(status_of(resumed, "numbers") == "cached");
  CHECK(status_of(resumed, "parity") == "cached");
  CHECK(status_of(resumed, "report") == "ran");
  CHECK(reason_of(resumed, "report") == "no cache entry");
  CHECK(chain.calls == std::map<std::string, int>{{"report", 1}});
}

TEST_CASE("Steps downstream of a failure are skipped, independent ones still run", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Pipeline p("branches");
  auto bad = p.step({.name = "bad"}, []() -> std::int64_t { throw std::runtime_error("no data"); });
  p.step({.name = "after"}, [](const std::int64_t& x) { return x + 1; }, bad);
  p.step({.name = "other"}, [] { return std::string("fine"); });
  auto r = p.run(store, {.jobs = 1});
  CHECK_FALSE(r.ok);
  CHECK(status_of(r, "bad") == "failed");
  CHECK(status_of(r, "after") == "skipped");
  CHECK(reason_of(r, "after") == "input `out` is missing: step 'bad' failed");
  CHECK(status_of(r, "other") == "ran");
  CHECK(store.load<std::string>("branches.other.out") == "fine");
}

TEST_CASE("Independent steps run in parallel", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Pipeline p("wide");
  // Each of the two steps waits at the barrier for the other: run one at a
  // time, the first would wait forever, so the wait is bounded and checked.
  std::atomic<int> arrived{0};
  auto meet = [&arrived] {
    ++arrived;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (arrived.load() < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return std::int64_t{arrived.load()};
  };
  auto a = p.step({.name = "a"}, meet);
  auto b = p.step({.name = "b"}, meet);
  p.step({.name = "sum", .inputs = {"a", "b"}}, [](const std::int64_t& x, const std::int64_t& y) { return x + y; }, a, b);
  auto r = p.run(store, {.jobs = 2});
  REQUIRE(r.ok);
  CHECK(store.load<std::int64_t>("wide.sum.out") == 4);
}

TEST_CASE("Inputs of cached steps are never loaded; executing steps load theirs once", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  std::string version = "1";
  auto make = [&] {
    Pipeline p("lazy");
    auto c = p.step({.name = "make"}, [] { return Counted{7}; });
    p.step({.name = "twice", .version = version}, [](const Counted& x) { return x.value * 2; }, c);
    p.step({.name = "thrice", .version = version}, [](const Counted& x) { return x.value * 3; }, c);
    return p;
  };
  counted_loads = 0;
  REQUIRE(make().run(store).ok);
  CHECK(counted_loads == 0);  // handed over in memory
  REQUIRE(make().run(store).count("cached") == 3);
  CHECK(counted_loads == 0);  // nothing executing needs it
  version = "2";
  auto r = make().run(store);
  CHECK(r.count("ran") == 2);
  CHECK(counted_loads == 1);  // loaded once for both consumers
  CHECK(store.load<std::int64_t>("lazy.thrice.out") == 21);
}

TEST_CASE("Steps read values from the store by ref", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  store.save(std::string("hello"), {.name = "greeting"});
  Pipeline p("refs");
  auto g = p.input<std::string>("greeting");
  p.step({.name = "shout"}, [](const std::string& s) { return s + "!"; }, g);
  auto first = p.run(store);
  REQUIRE(first.ok);
  CHECK(store.load<std::string>("refs.shout.out") == "hello!");
  CHECK(first.record["inputs"]["greeting"] == store.resolve("greeting").str());
  store.save(std::string("bye"), {.name = "greeting"});
  auto second = p.run(store);
  CHECK(reason_of(second, "shout") == "input `greeting` changed");
  CHECK(store.load<std::string>("refs.shout.out") == "bye!");
  Pipeline missing("refs2");
  missing.input<std::string>("nothing");
  CHECK_THROWS_AS(missing.run(store), NotFound);
}

TEST_CASE("Steps with several outputs name each", "[pipeline]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Pipeline p("split");
  auto [lo, hi] = p.step({.name = "split", .outputs = {"low", "high"}}, [] {
    return std::tuple<std::int64_t, std::string>{1, "two"};
  });
  p.step({.name = "join"}, [](const std::int64_t& a, const std::string& b) { return std::to_string(a) + b; }, lo, hi);
  REQUIRE(p.run(store).ok);
  CHECK(store.load<std::int64_t>("split.split.low") == 1);
  CHECK(store.load<std::string>("split.split.high") == "two");
  CHECK(store.load<std::string>("split.join.out") == "1two");
}

TEST_CASE("A hit naming one output but not the next names neither, and the step reruns", "[pipeline]") {
  // Both outputs were given other values since the entry was made, so a
  // hit names each again; the entry's provenance is padded until the
  // record of `a` just fits and that of the longer-named output does not.
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  const std::string long_name(64, 'z');
  int calls = 0;
  Pipeline p("split");
  p.step({.name = "split", .outputs = {"a", long_name}}, [&calls] {
    ++calls;
    return std::tuple<std::int64_t, std::int64_t>{1, 2};
  });
  auto first = p.run(store);
  REQUIRE(first.ok);
  const auto entry_file = dir.path() / "cache" / (first.step("split").key.hex() + ".json");
  const auto entry = nlohmann::json::parse(test::read_text(entry_file));
  const std::string a = "split.split.a", z = "split.split." + long_name;
  auto give_other_values = [&] {
    store.save(std::int64_t{-1}, {.name = a});
    store.save(std::int64_t{-2}, {.name = z});
  };
  // The entry with `items` more lines in its provenance: each is 7 bytes of
  // a name record (indented by 4) and 6 of the entry (indented by 3).
  auto pad_entry = [&](std::size_t items) {
    auto doc = entry;
    doc["provenance"]["pad"] = nlohmann::json::array();
    for (std::size_t k = 0; k < items; ++k) doc["provenance"]["pad"].push_back(1);
    test::write_text(entry_file, doc.dump(1));
    REQUIRE(fs::file_size(entry_file) < (1u << 20));
  };
  constexpr std::size_t kLimit = 1u << 20;

  // Measured: padded past the limit, the run says how large `a`'s record
  // would have been.
  std::size_t items = (kLimit - entry.dump(1).size() - 200) / 6;
  give_other_values();
  pad_entry(items);
  auto measuring = p.run(store);
  REQUIRE(measuring.step("split").status == "ran");
  const std::string said = measuring.step("split").reason;
  const std::string marker = "the name record for '" + a + "' would be ";
  REQUIRE(said.find(marker) != std::string::npos);
  const std::size_t record_a = std::stoul(said.substr(said.find(marker) + marker.size()));
  REQUIRE(record_a > kLimit);
  items -= (record_a - kLimit + 40 + 6) / 7;  // `a`'s record 40-46 bytes under the limit, the other's 80-86 over

  give_other_values();
  const auto a_before = store.versions(a).size(), z_before = store.versions(z).size();
  pad_entry(items);
  calls = 0;
  auto r = p.run(store);
  REQUIRE(r.ok);
  INFO(r.step("split").reason);
  CHECK(r.step("split").status == "ran");
  CHECK(calls == 1);
  CHECK_THAT(r.step("split").reason, Catch::StartsWith("cache entry unusable: ") &&
                                         Catch::Contains("the name record for '" + z + "' would be"));
  // One new version each, the run's own: none for the hit given up.
  CHECK(store.versions(a).size() == a_before + 1);
  CHECK(store.versions(z).size() == z_before + 1);
  CHECK(r.step("split").outputs[0].ref == a + "@" + std::to_string(a_before + 1));
  CHECK(r.step("split").outputs[1].ref == z + "@" + std::to_string(z_before + 1));
  CHECK(store.load<std::int64_t>(a) == 1);
  CHECK(store.load<std::int64_t>(z) == 2);
}

TEST_CASE("Pipelines refuse bad declarations", "[pipeline]") {
  CHECK_THROWS_AS(Pipeline("has.dot"), InvalidArgument);
  Pipeline p("ok");
  auto one = p.step({.name = "one"}, [] { return std::int64_t{1}; });
  CHECK_THROWS_WITH(p.step({.name = "one"}, [] { return std::int64_t{2}; }),
                    Catch::Contains("already has a step named 'one'"));
  CHECK_THROWS_WITH(p.step({.name = "two", .inputs = {"x", "y"}}, [](const std::int64_t& v) { return v; }, one),
                    Catch::Contains("names 2 inputs but is given 1"));
  CHECK_THROWS_WITH(p.step({.name = "three", .outputs = {"a", "b"}}, [] { return std::int64_t{1}; }),
                    Catch::Contains("names 2 outputs but returns 1"));
  CHECK_THROWS_WITH(p.step({.name = "four", .params = nlohmann::json::array()}, [] { return std::int64_t{1}; }),
                    Catch::Contains("params must be a JSON object"));
  Pipeline other("other");
  CHECK_THROWS_WITH(other.step({.name = "x"}, [](const std::int64_t& v) { return v; }, one),
                    Catch::Contains("input handle from another pipeline"));
  // A copy shares the steps declared before it, and their handles; steps
  // each adds later are its own, even where the two lists line up node for
  // node with steps of the same type.
  Pipeline copy = p;
  auto in_p = p.step({.name = "in_p"}, [] { return std::int64_t{10}; });
  auto in_copy = copy.step({.name = "in_copy"}, [] { return std::int64_t{20}; });
  CHECK_THROWS_WITH(copy.step({.name = "y"}, [](const std::int64_t& v) { return v; }, in_p),
                    Catch::Contains("input handle from another pipeline"));
  CHECK_THROWS_WITH(p.step({.name = "y"}, [](const std::int64_t& v) { return v; }, in_copy),
                    Catch::Contains("input handle from another pipeline"));
  CHECK_NOTHROW(copy.step({.name = "y"}, [](const std::int64_t& v) { return v; }, one));
  CHECK_NOTHROW(copy.step({.name = "z"}, [](const std::int64_t& v) { return v; }, in_copy));
  Pipeline copy_of_copy("later");
  copy_of_copy = copy;
  CHECK_NOTHROW(copy_of_copy.step({.name = "w", .inputs = {"a", "b"}},
                                  [](const std::int64_t& a, const std::int64_t& b) { return a + b; },
                                  one, in_copy));
  CHECK_THROWS_WITH(copy_of_copy.step({.name = "v"}, [](const std::int64_t& v) { return v; }, in_p),
                    Catch::Contains("input handle from another pipeline"));
  // A move takes the steps and their handles; what the moved-from pipeline
  // declares later is its own.
  Pipeline source("moving");
  auto early = source.step({.name = "early"}, [] { return std::int64_t{1}; });
  Pipeline target = std::move(source);
  CHECK_NOTHROW(target.step({.name = "uses_early"}, [](const std::int64_t& v) { return v; }, early));
  auto stray = source.input<std::int64_t>("kept");  // node 0 of the moved-from, as `early` is of target
  CHECK_THROWS_WITH(target.step({.name = "uses_stray"}, [](const std::int64_t& v) { return v; }, stray),
                    Catch::Contains("input handle from another pipeline"));
  Pipeline assigned("assigned");
  assigned = std::move(target);
  CHECK_NOTHROW(assigned.step({.name = "again"}, [](const std::int64_t& v) { return v; }, early));
  // The name each output is saved under is checked when the step is declared,
  // not after it has run.
  const std::string long_part(64, 's');
  CHECK_THROWS_WITH(p.step({.name = long_part, .outputs = {long_part}}, [] { return std::int64_t{1}; }),
                    Catch::Contains("invalid name 'ok." + long_part));
  CHECK_NOTHROW(p.step({.name = long_part, .outputs = {"v"}}, [] { return std::int64_t{1}; }));
  Pipeline dash("-x");
  CHECK_THROWS_WITH(dash.step({.name = "s"}, [] { return std::int64_t{1}; }), Catch::Contains("invalid name '-x.s.out'"));
}

TEST_CASE("Cache keys are typed and canonical", "[pipeline][key]") {
  MaterializerEntry tensor;
  tensor.name = "amphora.tensor";
  tensor.version = 1;
  auto key = [&](const nlohmann::json& params) {
    return Pipeline::cache_key(Pipeline::cache_key_ingredients(
        "wordcount", "docfreq", "1", "sha256:00", params,
        {{"tokens", Digest::parse("sha256:" + std::string(64, 'a'))}}, {{"model", &tensor}}));
  };
  // Key order does not matter.
  CHECK(key(nlohmann::json::parse(R"({"a":1,"b":2})")) == key(nlohmann::json::parse(R"({"b":2,"a":1})")));
  // 1, 1.0 and "1" differ.
  CHECK(key({{"k", 1}}) != key({{"k", 1.0}}));
  CHECK(key({{"k", 1}}) != key({{"k", "1"}}));
  CHECK(key({{"k", 1.0}}) != key({{"k", "1"}}));
  // -0.0 is not 0.0; every NaN is one NaN.
  CHECK(key({{"k", -0.0}}) != key({{"k", 0.0}}));
  CHECK(key({{"k", std::nan("1")}}) == key({{"k", -std::numeric_limits<double>::quiet_NaN()}}));
  // The worked example of FORMAT.md §3.8, the same in every build and process.
  auto ingredients = Pipeline::cache_key_ingredients(
      "wordcount", "docfreq", "1", "sha256:" + std::string(64, '0'), {{"top_k", 500}, {"min_df", 0.5}},
      {{"tokens", Digest::parse("sha256:" + std::string(64, 'a'))}}, {{"model", &tensor}});
  CHECK(ingredients.dump() ==
        R"({"code":"sha256:0000000000000000000000000000000000000000000000000000000000000000","inputs":{"tokens":"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},"outputs":{"model":{"format_version":1,"materializer":"amphora.tensor"}},"params":{"min_df":0.5,"top_k":500},"pipeline":"wordcount","schema":2,"step":"docfreq","version":"1"})");
  CHECK(Pipeline::cache_key(ingredients).str() == "sha256:e0eca12d7ab005faac606548a8fd95595e3038ef575314ec08b0f58f6dd44fe3");
}

TEST_CASE("Run records list every step with its status, reason, duration and outputs", "[pipeline][runs]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  REQUIRE(chain.run(store).ok);
  REQUIRE(chain.run(store, {.params = {{"numbers", {{"n", 5}}}}}).ok);
  auto runs = list_runs(store);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0]["started_at"] < runs[1]["started_at"]);
  const auto& last = runs[1];
  CHECK(last["pipeline"] == "chain");
  CHECK(last["status"] == "succeeded");
  CHECK(last["ended_at"] >= last["started_at"]);
  REQUIRE(last["steps"].size() == 3);
  const auto& s = last["steps"][0];
  CHECK(s["name"] == "numbers");
  CHECK(s["status"] == "ran");
  CHECK(s["reason"] == "parameter `n` changed from 4 to 5");
  CHECK(s["duration"].is_number());
  CHECK(s["outputs"]["values"] == "chain.numbers.values@2");
  CHECK(s["ingredients"]["params"]["n"] == 5);

  // Headlines, read one record at a time, say what the records say.
  std::vector<std::string> problems;
  auto summaries = run_summaries(store, &problems);
  CHECK(problems.empty());
  REQUIRE(summaries.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(summaries[i].run == runs[i]["run"]);
    CHECK(summaries[i].pipeline == "chain");
    CHECK(summaries[i].status == runs[i]["status"]);
    CHECK(summaries[i].started_at == runs[i]["started_at"]);
    CHECK(summaries[i].ended_at == runs[i]["ended_at"]);
    CHECK(read_run(store, summaries[i].stored_as.first, summaries[i].stored_as.second) == runs[i]);
  }
  CHECK(summaries[0].steps == std::map<std::string, std::size_t>{{"ran", 3}});
  std::size_t steps = 0;
  for (const auto& [status, n] : summaries[1].steps) steps += n;
  CHECK(steps == 3);
  // Damaged records are described, and the rest still listed.
  test::write_text(dir / "runs" / "chain" / "zz-broken.json", "{\"run\": \"zz\", \"steps\": [");
  test::write_text(dir / "runs" / "chain" / "zz-list.json", "[1, 2]");
  test::write_text(dir / "runs" / "chain" / "zz-odd.json", "{\"run\": \"zz-odd\", \"steps\": 7, \"status\": 3}");
  problems.clear();
  summaries = run_summaries(store, &problems);
  REQUIRE(problems.size() == 2);
  CHECK_THAT(problems[0], Catch::Contains("zz-broken") && Catch::Contains("is not a valid run record"));
  CHECK_THAT(problems[1], Catch::Contains("zz-list") && Catch::Contains("is not a valid run record"));
  REQUIRE(summaries.size() == 3);
  CHECK(summaries[0].run == "zz-odd");  // no start time: first
  CHECK(summaries[0].status.empty());
  CHECK(summaries[0].steps.empty());
  CHECK_THROWS_AS(read_run(store, "chain", "nosuch"), NotFound);

  // Lineage: report <- parity <- numbers, with parameters and the run.
  auto chain_of = lineage(store, store.resolve("chain.report.out"));
  REQUIRE(chain_of.size() == 3);
  CHECK(chain_of[0]["step"] == "report");
  CHECK(chain_of[1]["step"] == "parity");
  CHECK(chain_of[2]["step"] == "numbers");
  CHECK(chain_of[2]["params"]["n"] == 5);
  CHECK(chain_of[2]["run"] == last["run"]);
}

TEST_CASE("Lineage visits each artifact once on a dense history", "[pipeline][lineage]") {
  // Every artifact made from all the ones before it: n(n-1)/2 input edges
  // in the name records, n artifacts in the lineage, each exactly once.
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  const int n = 120;
  std::vector<Digest> made;
  for (int i = 0; i < n; ++i) {
    nlohmann::json inputs = nlohmann::json::object();
    for (int j = 0; j < i; ++j) inputs["in" + std::to_string(j)] = made[static_cast<std::size_t>(j)].str();
    auto saved = store.save(std::int64_t{i});
    store.name_artifact(saved.digest, "dense." + std::to_string(i),
                        {{"pipeline", "dense"}, {"step", "s" + std::to_string(i)}, {"inputs", inputs}});
    made.push_back(saved.digest);
  }
  auto chain = lineage(store, made.back());
  REQUIRE(chain.size() == static_cast<std::size_t>(n));
  std::set<std::string> digests;
  for (const auto& node : chain) digests.insert(node["digest"].get<std::string>());
  CHECK(digests.size() == static_cast<std::size_t>(n));
  CHECK(chain.front()["step"] == "s" + std::to_string(n - 1));
  CHECK(chain[1]["digest"] == made[0].str());  // breadth first, inputs in key order: in0 first
  for (const auto& node : chain) CHECK(node["stored"] == true);
}

TEST_CASE("Run configuration: aliases that expand past the bound and duplicate keys are refused", "[pipeline][config]") {
  test::TempDir dir;
  // 369 bytes describing 9^9 (387 million) strings through nested aliases.
  std::string bomb = "numbers:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  char previous = 'a';
  for (char name = 'b'; name <= 'i'; ++name, ++previous) {
    bomb += std::string("  ") + name + ": &" + name + " [";
    for (int k = 0; k < 9; ++k) bomb += std::string(k ? "," : "") + "*" + previous;
    bomb += "]\n";
  }
  test::write_text(dir / "bomb.yaml", bomb);
  CHECK_THROWS_AS(read_run_config(dir / "bomb.yaml"), InvalidArgument);
  CHECK_THROWS_WITH(read_run_config(dir / "bomb.yaml"),
                    Catch::Contains("bomb.yaml:") && Catch::Contains("expands to more than 100000 values"));
  nlohmann::json params;
  std::string set = "numbers.n=[&a [1,1,1,1,1,1,1,1,1,1]";
  for (int level = 0; level < 6; ++level) set += std::string(", &l") + std::to_string(level) + " [" +
                                                 (level ? "*l" + std::to_string(level - 1) : std::string("*a")) + ", " +
                                                 (level ? "*l" + std::to_string(level - 1) : std::string("*a")) + "]";
  set += "]";
  CHECK_NOTHROW(apply_override(params, set));  // aliases as such are fine: 2^6 copies of ten values
  std::string set_bomb = "numbers.n=[&a0 [1,1,1,1,1,1,1,1,1,1]";
  for (int level = 1; level < 9; ++level) {
    set_bomb += ", &a" + std::to_string(level) + " [";
    for (int k = 0; k < 10; ++k) set_bomb += std::string(k ? "," : "") + "*a" + std::to_string(level - 1);
    set_bomb += "]";
  }
  set_bomb += "]";
  CHECK_THROWS_WITH(apply_override(params, set_bomb), Catch::Contains("expands to more than 100000 values"));
  // Few values, much text: one 1,000-byte string named 2,000 times is 2 MB
  // from a 9 KB file (found by fuzz_run_config).
  std::string text_bomb = "numbers:\n  a: &x \"" + std::string(1000, 'A') + "\"\n  b: [";
  for (int k = 0; k < 2000; ++k) text_bomb += std::string(k ? "," : "") + "*x";
  text_bomb += "]\n";
  test::write_text(dir / "text_bomb.yaml", text_bomb);
  CHECK_THROWS_WITH(read_run_config(dir / "text_bomb.yaml"),
                    Catch::Contains("text_bomb.yaml:") && Catch::Contains("expands to more than 1 MiB of text"));
  std::string set_text = "numbers.s=[&x \"" + std::string(1000, 'B') + "\"";
  for (int k = 0; k < 2000; ++k) set_text += ",*x";
  CHECK_THROWS_WITH(apply_override(params, set_text + "]"), Catch::Contains("expands to more than 1 MiB of text"));
  std::string fine = "numbers:\n  a: &x \"" + std::string(1000, 'A') + "\"\n  b: [*x, *x, *x]\n";
  test::write_text(dir / "fine.yaml", fine);
  CHECK(read_run_config(dir / "fine.yaml")["numbers"]["b"][2].get<std::string>().size() == 1000);
  test::write_text(dir / "twice.yaml", "numbers:\n  n: 1\n  n: 2\n");
  CHECK_THROWS_WITH(read_run_config(dir / "twice.yaml"), Catch::Contains("twice.yaml:3: the key 'n' is given twice"));
  test::write_text(dir / "steps.yaml", "numbers:\n  n: 1\nnumbers:\n  scale: 2\n");
  CHECK_THROWS_WITH(read_run_config(dir / "steps.yaml"), Catch::Contains("the key 'numbers' is given twice"));
  test::write_text(dir / "inner.yaml", "numbers:\n  n: {a: 1, a: 2}\n");
  CHECK_THROWS_WITH(read_run_config(dir / "inner.yaml"), Catch::Contains("the key 'a' is given twice"));
}

TEST_CASE("Run configuration: YAML files and --set overrides", "[pipeline][config]") {
  test::TempDir dir;
  test::write_text(dir / "run.yaml",
                   "numbers:\n  n: 7\n  scale: 2.5\nreport:\n  label: '12'\n  flag: true\n  none: ~\n");
  auto params = read_run_config(dir / "run.yaml");
  CHECK(params["numbers"]["n"] == 7);
  CHECK(params["numbers"]["n"].is_number_integer());
  CHECK(params["numbers"]["scale"] == 2.5);
  CHECK(params["report"]["label"] == "12");  // quoted: a string
  CHECK(params["report"]["flag"] == true);
  CHECK(params["report"]["none"].is_null());
  apply_override(params, "numbers.n=500");
  apply_override(params, "report.label=hello world");
  apply_override(params, "numbers.scale=1.0");
  CHECK(params["numbers"]["n"] == 500);
  CHECK(params["report"]["label"] == "hello world");
  CHECK(params["numbers"]["scale"].is_number_float());
  CHECK_THROWS_WITH(apply_override(params, "noequals"), Catch::Contains("expected STEP.PARAM=VALUE"));
  CHECK_THROWS_WITH(apply_override(params, "nodot=3"), Catch::Contains("expected STEP.PARAM=VALUE"));
  test::write_text(dir / "bad.yaml", "numbers: [1, 2]\n");
  CHECK_THROWS_WITH(read_run_config(dir / "bad.yaml"), Catch::Contains("bad.yaml:1") && Catch::Contains("numbers"));
  test::write_text(dir / "broken.yaml", "numbers: {n: 1\n");
  CHECK_THROWS_AS(read_run_config(dir / "broken.yaml"), InvalidArgument);
  CHECK_THROWS_AS(read_run_config(dir / "missing.yaml"), NotFound);
}

TEST_CASE("gc keeps cache entries' outputs and drops entries whose outputs are gone", "[pipeline][gc]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  auto first = chain.run(store);
  REQUIRE(first.ok);
  // The outputs of cache entries are reachable even without their names.
  store.remove("chain.report.out");
  auto report = store.gc(false, std::chrono::seconds(0));
  CHECK(report.removed.empty());
  CHECK(chain.run(store).count("cached") == 3);
}

TEST_CASE("Code fingerprints registered by the build are found by source path", "[pipeline][fingerprint]") {
  const std::pair<const char*, const char*> table[] = {
      {"/src/project/steps/alpha.cpp", "sha256:a1"},
      {"/src/project/other/alpha.cpp", "sha256:a2"},
      {"/src/project/steps/beta.cpp", "sha256:b1"},
  };
  detail::register_code_fingerprints(table);
  CHECK(detail::code_fingerprint_of("/src/project/steps/beta.cpp") == "sha256:b1");
  // Another spelling of the same path: the longest matching tail decides.
  CHECK(detail::code_fingerprint_of("steps/alpha.cpp") == "sha256:a1");
  CHECK(detail::code_fingerprint_of("../project/other/alpha.cpp") == "sha256:a2");
  CHECK(detail::code_fingerprint_of("beta.cpp") == "sha256:b1");
  // Ambiguous or unknown: no fingerprint rather than the wrong one.
  CHECK(detail::code_fingerprint_of("alpha.cpp").empty());
  CHECK(detail::code_fingerprint_of("/elsewhere/gamma.cpp").empty());
  // A step declared in a registered file takes its fingerprint.
  Pipeline p("fingerprinted");
  const std::pair<const char*, const char*> mine[] = {{std::source_location::current().file_name(), "sha256:this"}};
  detail::register_code_fingerprints(mine);
  // The table is the process's: this file has no fingerprint again afterwards.
  struct Unregister {
    ~Unregister() {
      const std::pair<const char*, const char*> none[] = {{std::source_location::current().file_name(), ""}};
      detail::register_code_fingerprints(none);
    }
  } unregister;
  p.step({.name = "one"}, [] { return std::int64_t{1}; });
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  auto r = p.run(store);
  CHECK(r.record["steps"][0]["ingredients"]["code"] == "sha256:this");
}

TEST_CASE("Hostile cache entries are misses, never followed or waited on", "[pipeline][hostile]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  auto first = chain.run(store);
  REQUIRE(first.ok);
  const auto entry = dir.path() / "cache" / (first.step("report").key.hex() + ".json");
  const auto outside = dir.path() / "outside.json";
  const std::string planted = test::read_text(entry);
  fs::remove(entry);

  SECTION("a symbolic link out of the store") {
    test::write_text(outside, planted);
    fs::create_symlink(outside, entry);
  }
  SECTION("a FIFO") { REQUIRE(::mkfifo(entry.c_str(), 0644) == 0); }
  SECTION("larger than a record may be") { test::write_text(entry, planted + std::string(2u << 20, ' ')); }
  bool directory = false;
  SECTION("a directory") {
    fs::create_directory(entry);
    directory = true;
  }

  auto r = chain.run(store);
  CHECK(status_of(r, "report") == (directory ? "failed" : "ran"));
  CHECK_THAT(reason_of(r, "report"), Catch::StartsWith("cache entry damaged"));
  if (fs::exists(outside)) CHECK(test::read_text(outside) == planted);  // the link's target is untouched
  if (directory) {
    // Nothing can replace it: the run fails saying where, the outputs stay.
    CHECK_THAT(r.error, Catch::Contains(entry.string()));
    CHECK(store.load<std::string>("chain.report.out") == "even");
  } else {
    REQUIRE(r.ok);
    CHECK(fs::is_regular_file(fs::symlink_status(entry)));  // replaced by a real entry
    CHECK(chain.run(store).count("cached") == 3);
  }
  CHECK(store.gc(false, std::chrono::seconds(0)).removed.empty());  // gc skips what it cannot read
}

TEST_CASE("Hostile run records are skipped by runs and by explanations", "[pipeline][hostile]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  REQUIRE(chain.run(store).ok);
  // Newer than the real run, so explanations would read them first.
  const auto runs = dir.path() / "runs" / "chain";
  test::write_text(runs / "99990101T000000.000000Z-aaaaaa.json", "{\"steps\": [");
  test::write_text(runs / "99990101T000000.000000Z-bbbbbb.json", "[1, 2, 3]");
  test::write_text(runs / "99990101T000000.000000Z-cccccc.json",
                   R"({"run": "x", "started_at": "9999", "steps": [{"name": "numbers", "status": "ran",
                       "ingredients": {"version": 5, "code": [], "params": "n", "inputs": 3}}, "junk"]})");
  test::write_text(dir.path() / "elsewhere.json", R"({"run": "planted", "steps": []})");
  fs::create_symlink(dir.path() / "elsewhere.json", runs / "99990101T000000.000000Z-dddddd.json");
  REQUIRE(::mkfifo((runs / "99990101T000000.000000Z-eeeeee.json").c_str(), 0644) == 0);
  test::write_text(runs / "99990101T000000.000000Z-ffffff.json", std::string(65u << 20, ' '));
  fs::create_symlink(dir.path(), dir.path() / "runs" / "linked");

  std::vector<std::string> problems;
  auto listed = list_runs(store, &problems);
  REQUIRE(listed.size() == 2);  // the real run and the one with odd ingredients
  CHECK(listed[1]["run"] == "x");
  CHECK(problems.size() == 6);  // bad JSON, not an object, link, FIFO, too large, linked directory
  for (const auto& p : problems) CHECK_THAT(p, Catch::Contains(dir.path().string()));

  // The miss is still explained, from the real run.
  auto r = chain.run(store, {.params = {{"numbers", {{"n", 5}}}}});
  REQUIRE(r.ok);
  CHECK(reason_of(r, "numbers") == "parameter `n` changed from 4 to 5");
}

TEST_CASE("A run configuration must be a small regular file", "[pipeline][config][hostile]") {
  test::TempDir dir;
  REQUIRE(::mkfifo((dir / "fifo.yaml").c_str(), 0644) == 0);
  CHECK_THROWS_WITH(read_run_config(dir / "fifo.yaml"), Catch::Contains("fifo.yaml is not a regular file (a FIFO)"));
  CHECK_THROWS_WITH(read_run_config(dir.path()), Catch::Contains("not a regular file"));
  test::write_text(dir / "huge.yaml", "numbers:\n  n: 1\n" + std::string(2u << 20, '#'));
  CHECK_THROWS_WITH(read_run_config(dir / "huge.yaml"), Catch::Contains("more than the 1048576 allowed"));
  test::write_text(dir / "target.yaml", "numbers:\n  n: 3\n");
  fs::create_symlink(dir / "target.yaml", dir / "link.yaml");
  CHECK(read_run_config(dir / "link.yaml")["numbers"]["n"] == 3);  // the user's own file may be a link
}

TEST_CASE("file_digests names every matching file by relative path, and refuses what it cannot read", "[pipeline][external]") {
  test::TempDir dir;
  fs::create_directories(dir / "corpus" / "more");
  test::write_text(dir / "corpus" / "a.txt", "alpha");
  test::write_text(dir / "corpus" / "more" / "b.txt", "beta");
  test::write_text(dir / "corpus" / "notes.md", "not a text");
  auto digests = file_digests(dir / "corpus", ".txt");
  CHECK(digests == nlohmann::json{{"a.txt", Digest(Sha256::of("alpha")).str()},
                                  {"more/b.txt", Digest(Sha256::of("beta")).str()}});
  CHECK(file_digests(dir / "corpus").size() == 3);
  CHECK(file_digests(dir / "corpus" / "a.txt") == nlohmann::json{{"a.txt", Digest(Sha256::of("alpha")).str()}});
  // An empty match is a value too: files all removed is a change, not "none".
  CHECK(file_digests(dir / "corpus", ".csv") == nlohmann::json::object());

  CHECK_THROWS_AS(file_digests(dir / "missing"), NotFound);
  CHECK_THROWS_WITH(file_digests(dir / "corpus", "", 2), Catch::Contains("more than 2 files"));
  fs::create_symlink(dir / "corpus" / "a.txt", dir / "corpus" / "link.txt");
  CHECK(file_digests(dir / "corpus", ".txt")["link.txt"] == Digest(Sha256::of("alpha")).str());
  REQUIRE(::mkfifo((dir / "corpus" / "pipe.txt").c_str(), 0644) == 0);
  CHECK_THROWS_WITH(file_digests(dir / "corpus", ".txt"), Catch::Contains("pipe.txt"));
}

TEST_CASE("An external input joins the cache key and a change is explained by file", "[pipeline][external]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  fs::create_directories(dir / "corpus");
  test::write_text(dir / "corpus" / "a.txt", "one two");
  test::write_text(dir / "corpus" / "b.txt", "three");
  const std::string corpus = (dir / "corpus").string();
  int reads = 0, counts = 0;
  Pipeline p("ext");
  auto texts = p.step({.name = "read",
                       .params = {{"corpus", corpus}},
                       .outputs = {"size"},
                       .external = [](const StepContext& c) { return file_digests(c.param<std::string>("corpus"), ".txt"); }},
                      [&](const StepContext& c) {
                        ++reads;
                        std::int64_t bytes = 0;
                        for (const auto& e : fs::directory_iterator(c.param<std::string>("corpus")))
                          if (e.path().extension() == ".txt") bytes += static_cast<std::int64_t>(e.file_size());
                        return bytes;
                      });
  p.step({.name = "double"}, [&](const std::int64_t& n) {
    ++counts;
    return 2 * n;
  }, texts);

  auto first = p.run(store);
  REQUIRE(first.ok);
  CHECK(first.count("ran") == 2);
  auto second = p.run(store);
  CHECK(second.count("cached") == 2);
  CHECK(reads == 1);
  CHECK(second.step("read").key == first.step("read").key);

  // The same bytes under new content: a rerun naming the file; the output is
  // the same size, so early cutoff keeps the next step cached.
  test::write_text(dir / "corpus" / "b.txt", "THREE");
  auto edited = p.run(store);
  CHECK(edited.step("read").status == "ran");
  CHECK(edited.step("read").reason == "external input `b.txt` changed");
  CHECK(edited.step("double").status == "cached");
  CHECK(counts == 1);

  test::write_text(dir / "corpus" / "c.txt", "four");
  fs::remove(dir / "corpus" / "a.txt");
  auto moved = p.run(store);
  CHECK(moved.step("read").reason == "external input `a.txt` removed; external input `c.txt` added");
  CHECK(moved.step("double").status == "ran");

  // Many files changed: the reason stays one line.
  for (int i = 0; i < 9; ++i) test::write_text(dir / "corpus" / ("n" + std::to_string(i) + ".txt"), "x");
  auto many = p.run(store);
  CHECK_THAT(many.step("read").reason, Catch::EndsWith("; 4 more external inputs changed"));

  // Provenance and the run record keep what was read.
  auto record = list_runs(store).back();
  CHECK(record["steps"][0]["ingredients"]["external"].size() == 11);
  CHECK(store.versions("ext.read.size").back().record["external"].size() == 11);

  // An external function that throws fails its step, naming the problem.
  auto broken = p.run(store, {.params = {{"read", {{"corpus", (dir / "nowhere").string()}}}}});
  CHECK_FALSE(broken.ok);
  CHECK(broken.step("read").status == "failed");
  CHECK_THAT(broken.step("read").error, Catch::Contains("nowhere"));
  CHECK(broken.step("double").status == "skipped");
}

TEST_CASE("The external ingredient is absent from keys of steps without one", "[pipeline][external][key]") {
  const MaterializerEntry* entry = &materializer_entry<std::int64_t>();
  auto without = Pipeline::cache_key_ingredients("p", "s", "1", "", nlohmann::json::object(), {}, {{"out", entry}});
  CHECK_FALSE(without.contains("external"));
  auto with = Pipeline::cache_key_ingredients("p", "s", "1", "", nlohmann::json::object(), {}, {{"out", entry}},
                                              {{"a.txt", "sha256:00"}});
  CHECK(with["external"] == nlohmann::json{{"a.txt", "sha256:00"}});
  CHECK(Pipeline::cache_key(with) != Pipeline::cache_key(without));
  // null means none; an empty object (no files) is a value.
  CHECK(Pipeline::cache_key(Pipeline::cache_key_ingredients("p", "s", "1", "", nlohmann::json::object(), {},
                                                            {{"out", entry}}, nullptr)) ==
        Pipeline::cache_key(without));
  CHECK(Pipeline::cache_key(Pipeline::cache_key_ingredients("p", "s", "1", "", nlohmann::json::object(), {},
                                                            {{"out", entry}}, nlohmann::json::object())) !=
        Pipeline::cache_key(without));
}

TEST_CASE("External values that cannot be stored fail the step; long ones are kept by digest", "[pipeline][external]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  nlohmann::json value;
  nlohmann::json seen;
  Pipeline p("extv");
  p.step({.name = "read", .outputs = {"n"}, .external = [&](const StepContext&) { return value; }},
         [&](const StepContext& c) {
           seen = c.external();
           return std::int64_t{7};
         });

  value = std::numeric_limits<double>::quiet_NaN();
  auto nan = p.run(store);
  CHECK_FALSE(nan.ok);
  CHECK_THAT(nan.step("read").error, Catch::Contains("external input of step 'read'"));
  value = std::string("\xff\xfe");
  auto bad_text = p.run(store);
  CHECK_FALSE(bad_text.ok);
  CHECK_THAT(bad_text.step("read").error, Catch::Contains("external input of step 'read'"));
  CHECK(list_runs(store).back()["status"] == "failed");  // the record was still written

  // 20,000 entries: too long for a name record, kept there by its digest.
  value = nlohmann::json::object();
  for (int i = 0; i < 20000; ++i) value["file-" + std::to_string(i) + ".txt"] = "sha256:" + std::string(64, 'a');
  auto big = p.run(store);
  REQUIRE(big.ok);
  CHECK(seen == value);
  auto record = store.versions("extv.read.n").back().record;
  CHECK_FALSE(record.contains("external"));
  CHECK(record["external_digest"] == typed_digest(value).str());
  CHECK(list_runs(store).back()["steps"][0]["ingredients"]["external"].size() == 20000);
  auto chain = lineage(store, big.step("read").outputs[0].digest);
  CHECK(chain[0]["external_digest"] == typed_digest(value).str());
  value["file-0.txt"] = "sha256:" + std::string(64, 'b');
  CHECK(p.run(store).step("read").reason == "external input `file-0.txt` changed");

  // Small ones are kept whole.
  value = {{"a.txt", "sha256:00"}};
  REQUIRE(p.run(store).ok);
  CHECK(store.versions("extv.read.n").back().record["external"] == value);
}

TEST_CASE("Integer parameters take only integers within range", "[pipeline]") {
  const std::string pipeline = "p", step = "s", run = "r";
  const nlohmann::json params = {{"k", -1}, {"big", 1ull << 40}, {"half", 2.5}, {"n", 3}};
  StepContext c(pipeline, step, run, params);
  CHECK(c.param<int>("k") == -1);
  CHECK_THROWS_WITH(c.param<std::size_t>("k"), "parameter 'k' of step 's' is -1, out of range here");
  CHECK_THROWS_WITH(c.param<std::int32_t>("big"), Catch::Contains("out of range here"));
  CHECK(c.param<std::int64_t>("big") == (std::int64_t{1} << 40));
  CHECK_THROWS_WITH(c.param<int>("half"), "parameter 'half' of step 's' is 2.5, not an integer");
  CHECK(c.param<double>("n") == 3.0);
  CHECK(c.external().is_null());
}

TEST_CASE("A hostile step lock file is refused, never followed or waited on", "[pipeline][hostile]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  Chain chain;
  const auto key = chain.run(store).step("numbers").key;
  fs::create_directories(dir.path() / "locks");
  const auto lock = dir.path() / "locks" / ("step-" + key.hex() + ".lock");
  const auto outside = dir.path() / "outside.txt";
  test::write_text(outside, "kept");

  SECTION("a symbolic link out of the store") { fs::create_symlink(outside, lock); }
  SECTION("a FIFO") { REQUIRE(::mkfifo(lock.c_str(), 0644) == 0); }
  SECTION("a directory") { fs::create_directory(lock); }

  // Named in the error; the link's target is neither locked open nor removed.
  auto medium = open_local_medium(dir.path(), false);
  CHECK_THROWS_WITH(medium->lease("step-" + key.hex(), LeaseMode::exclusive, false), Catch::Contains(lock.string()));
  CHECK_THROWS_WITH(medium->lease("step-" + key.hex(), LeaseMode::exclusive, true), Catch::Contains(lock.string()));
  CHECK(test::read_text(outside) == "kept");
  CHECK(fs::exists(fs::symlink_status(lock)));
}

TEST_CASE("Two runs racing for one key compute it once, however their lookups and leases interleave", "[pipeline][concurrency]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  // Each round keys the step anew (its parameter), and two runs start it at
  // once. Whichever takes the lease second, before or after the first let go,
  // must find the first one's entry rather than compute again.
  constexpr int kRounds = 40;
  std::mutex mutex;
  std::map<std::int64_t, int> computed;
  Pipeline p("race");
  p.step({.name = "work", .params = {{"round", 0}}}, [&](const StepContext& c) {
    auto round = c.param<std::int64_t>("round");
    std::lock_guard lock(mutex);
    ++computed[round];
    return round;
  });
  for (int round = 0; round < kRounds; ++round) {
    RunOptions options;
    options.params["work"]["round"] = round;
    // The second start is staggered a little more each round, so that some
    // round lands its lease attempt just after the first run let go.
    std::atomic<int> ready{0};
    auto run = [&](std::chrono::microseconds stagger) {
      ++ready;
      while (ready.load() < 2) std::this_thread::yield();
      std::this_thread::sleep_for(stagger);
      return p.run(store, options);
    };
    std::optional<RunReport> first, second;
    std::thread other([&] { second = run(std::chrono::microseconds(150 * round)); });
    first = run(std::chrono::microseconds(0));
    other.join();
    REQUIRE(first->ok);
    REQUIRE(second->ok);
    std::set<std::string> statuses{first->step("work").status, second->step("work").status};
    CHECK(statuses == std::set<std::string>{"cached", "ran"});
  }
  for (const auto& [round, times] : computed) {
    INFO("round " << round);
    CHECK(times == 1);
  }
  CHECK(computed.size() == kRounds);
}

TEST_CASE("A step without a source fingerprint is keyed by the program that holds its code", "[pipeline]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  // amphora_tests is built without amphora_add_pipeline: no fingerprints.
  Pipeline p("program_keyed");
  p.step({.name = "plain"}, [] { return std::int64_t{1}; });
  p.step({.name = "stamped", .code = "sha256:" + std::string(64, 'c')}, [] { return std::int64_t{2}; });
  CHECK(p.steps_keyed_by_program() == std::vector<std::string>{"plain"});
  auto report = p.run(store);
  REQUIRE(report.ok);
  std::string code;
  for (const auto& step : report.record["steps"])
    if (step["name"] == "plain") code = step["ingredients"]["code"].get<std::string>();
  CHECK_THAT(code, Catch::StartsWith("program:sha256:"));
  CHECK(code.size() == std::string("program:sha256:").size() + 64);
  // The same program gives the same fingerprint: a second run is served from the cache.
  CHECK(p.run(store).count("cached") == 2);
  // One fingerprint per loaded object, whichever step's code asks.
  CHECK(detail::program_fingerprint(reinterpret_cast<const void*>(&detail::code_anchor<int>)) == code);
}
