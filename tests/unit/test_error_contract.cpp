// The error contract: every public entry point throws only amphora::Error
// subclasses, whatever a step, a materializer, a file format, a storage
// medium or the machine throws underneath; a run always finishes its record;
// handles and contexts cannot dangle or cross pipelines.

#include "support.hpp"

#include "fault_medium.hpp"
#include "memory_medium.hpp"

#include <amphora/everyday.hpp>
#include <amphora/pipeline.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <utility>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

int reap(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool under_sanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

// What a call threw: the name of its class, for the checks below.
template <class F>
std::string thrown_by(F&& call) {
  try {
    call();
  } catch (const OutOfResources&) {
    return "OutOfResources";
  } catch (const IoError&) {
    return "IoError";
  } catch (const InvalidArgument&) {
    return "InvalidArgument";
  } catch (const CorruptData&) {
    return "CorruptData";
  } catch (const NotFound& e) {
    return std::string("NotFound: ") + e.what();
  } catch (const Error& e) {
    return std::string("Error: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("foreign: ") + e.what();
  } catch (...) {
    return "foreign: not a std::exception";
  }
  return "nothing";
}

}  // namespace

namespace {

// The out-of-memory helper's exit status and first line, run with `mode`.
std::pair<int, std::string> out_of_memory_helper(const std::string& mode) {
  FILE* out = ::popen((std::string(AMPHORA_TEST_OUT_OF_MEMORY) + " " + mode).c_str(), "r");
  if (!out) return {-1, "popen failed"};
  char line[256] = {};
  (void)!std::fgets(line, sizeof line, out);
  const int status = ::pclose(out);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, line};
}

}  // namespace

TEST_CASE("A SHA-256 that cannot get memory is OutOfResources, not a raw std::bad_alloc", "[errors]") {
  const auto [status, line] = out_of_memory_helper("");
  INFO(line);
  CHECK(status == 0);
  CHECK_THAT(line, Catch::Contains("out of memory"));
}

TEST_CASE("Fingerprinting a program without a build ID, out of memory, is OutOfResources naming the file",
          "[errors][pipeline]") {
  const auto [status, line] = out_of_memory_helper("fingerprint");
  INFO(line);
  CHECK(status == 0);
  CHECK_THAT(line, Catch::Contains("cannot fingerprint ") && Catch::Contains("amphora_test_out_of_memory: out of memory"));
}

TEST_CASE("Whatever a storage medium throws leaves the store as an amphora::Error", "[errors][storage]") {
  auto faulty = std::make_shared<testing::FaultMedium>(testing::make_memory_medium());
  Store store = Store::open({.create = true, .medium = faulty});
  auto saved = store.save(std::string("x"), {.name = "x"});
  Pipeline p("p");
  p.step({.name = "one"}, [] { return 1; });
  REQUIRE(p.run(store).ok);
  const auto recorded = run_summaries(store).front().stored_as;

  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"open", [&] { Store::open({.medium = faulty}); }},
      {"names", [&] { store.names(); }},
      {"artifacts", [&] { store.artifacts(); }},
      {"resolve", [&] { store.resolve(saved.digest.hex().substr(0, 12)); }},
      {"save", [&] { store.save(std::string("y"), {.name = "y"}); }},
      {"load", [&] { store.load<std::string>("x"); }},
      {"verify", [&] { store.verify(); }},
      {"gc", [&] { store.gc(); }},
      {"remove", [&] { store.remove("x"); }},
      {"list_runs", [&] { list_runs(store); }},
      {"run_summaries", [&] { run_summaries(store); }},
      {"read_run", [&] { read_run(store, recorded.first, recorded.second); }},
      {"lineage", [&] { lineage(store, saved.digest); }},
      {"run", [&] { p.run(store); }},
  };
  for (auto action : {testing::FaultMedium::Action::foreign, testing::FaultMedium::Action::no_memory}) {
    const bool oom = action == testing::FaultMedium::Action::no_memory;
    for (const auto& [name, call] : calls) {
      INFO(name << (oom ? " (bad_alloc)" : " (runtime_error)"));
      for (const char* point : {"before:get", "before:list", "before:put", "before:open", "before:map"}) {
        faulty->disarm();
        if (store.version_numbers("x").empty()) store.save(std::string("x"), {.name = "x"});  // remove took it
        faulty->arm(point, action, "", 0, false);
        auto what = thrown_by(call);
        faulty->disarm();
        CHECK_FALSE(what.starts_with("foreign"));
        if (what != "nothing") CHECK(what == (oom ? "OutOfResources" : "IoError"));
      }
    }
  }
  CHECK(store.verify().ok());
}

TEST_CASE("A file format's reader failing is an amphora::Error naming the file", "[errors]") {
  test::TempDir dir;
  auto registry = Registry::with_defaults();
  struct Odd {
    std::string text;
  };
  FileFormat format;
  format.extension = ".odd";
  format.materializer = "amphora.string";
  format.read = [](const fs::path&) -> std::shared_ptr<void> { throw std::runtime_error("boom in the reader"); };
  format.write = [](const void*, const fs::path&) {};
  registry->add_format(format);
  FileFormat worse = format;
  worse.extension = ".worse";
  worse.read = [](const fs::path&) -> std::shared_ptr<void> { throw 42; };
  registry->add_format(worse);
  Store store = Store::open(dir / "store", {.create = true, .registry = registry});
  test::write_text(dir / "in.odd", "x");
  test::write_text(dir / "in.worse", "x");
  CHECK_THROWS_AS(store.import_file(dir / "in.odd"), InvalidArgument);
  CHECK_THROWS_WITH(store.import_file(dir / "in.odd"), Catch::Contains("in.odd") && Catch::Contains("boom in the reader"));
  CHECK_THROWS_AS(store.import_file(dir / "in.worse"), InvalidArgument);
  CHECK_THROWS_WITH(store.import_file(dir / "in.worse"), Catch::Contains("not a std::exception"));
}

TEST_CASE("A run records every failure, whatever the step threw", "[errors][pipeline]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Pipeline p("bad");
  p.step({.name = "bytes"}, []() -> int { throw std::runtime_error(std::string("not \xff\xfe text \xc3")); });
  p.step({.name = "thrown"}, []() -> int { throw 42; });
  p.step({.name = "fine"}, [] { return 7; });
  int callbacks = 0;
  RunReport report;
  REQUIRE_NOTHROW(report = p.run(store, {.jobs = 2, .on_step = [&](const StepReport& s) {
                                           ++callbacks;
                                           if (s.name == "fine") throw std::runtime_error("callback broke");
                                         }}));
  CHECK_FALSE(report.ok);
  CHECK(callbacks == 3);
  CHECK(report.step("bytes").status == "failed");
  CHECK(report.step("bytes").error == "not \xef\xbf\xbd\xef\xbf\xbd text \xef\xbf\xbd");
  CHECK(report.step("thrown").error == "an exception that is not a std::exception");
  CHECK(report.step("fine").status == "ran");
  // The record is finished, not left "running".
  auto runs = list_runs(store);
  REQUIRE(runs.size() == 1);
  CHECK(runs[0]["status"] == "failed");
  CHECK(is_valid_utf8(runs[0].dump()));
  // A callback that throws fails the run but never the process.
  Pipeline q("callback");
  q.step({.name = "fine"}, [] { return 7; });
  auto r = q.run(store, {.on_step = [](const StepReport&) { throw std::runtime_error("callback broke"); }});
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Catch::Contains("the on_step callback failed: callback broke"));
  CHECK(list_runs(store).back()["status"] == "failed");
}

TEST_CASE("Only Buffer's factories make a Buffer; adopted memory is writable and kept alive", "[errors][buffer]") {
  // No caller can call arbitrary memory writable through a constructor.
  STATIC_REQUIRE_FALSE(std::is_constructible_v<Buffer, std::byte*, std::size_t, bool, std::shared_ptr<const void>>);
  std::vector<std::int32_t> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int32_t>(i * 7);
  const auto* before = values.data();
  auto buffer = Buffer::adopt(std::move(values));
  CHECK(buffer->writable());
  CHECK(buffer->size() == 1000 * sizeof(std::int32_t));
  CHECK(reinterpret_cast<const std::int32_t*>(buffer->data()) == before);  // taken over, not copied
  reinterpret_cast<std::int32_t*>(buffer->mutable_data())[999] = -1;
  auto slice = Buffer::slice(buffer, 996 * sizeof(std::int32_t), 4 * sizeof(std::int32_t));
  buffer.reset();  // the slice keeps the vector alive
  CHECK(reinterpret_cast<const std::int32_t*>(slice->data())[0] == 996 * 7);
  CHECK(reinterpret_cast<const std::int32_t*>(slice->data())[3] == -1);
  CHECK(Buffer::adopt(std::vector<double>{})->size() == 0);
  const int owner = 5;
  auto wrapped = std::const_pointer_cast<Buffer>(Buffer::wrap(&owner, sizeof owner, nullptr));
  CHECK_THROWS_WITH(wrapped->mutable_data(), Catch::Contains("read-only"));
}

TEST_CASE("An on_wait callback that throws fails the run, not the step it waited for", "[errors][pipeline][threads]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::atomic<bool> waited{false};
  std::atomic<int> computed{0};
  // Two pipelines alike: the same step, so the same cache key and lease.
  auto make = [&] {
    Pipeline p("wait");
    p.step({.name = "slow"}, [&] {
      ++computed;
      // Holds the key's lease until the other run has started waiting for it.
      for (int i = 0; i < 3000 && !waited; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return 7;
    });
    return p;
  };
  const Pipeline first = make(), second = make();
  RunReport first_report;
  std::string first_failure;
  std::thread holder([&] {
    try {
      first_report = first.run(store);
    } catch (const std::exception& e) {
      first_failure = e.what();
    }
  });
  for (int i = 0; i < 30000 && computed == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::string waited_for;  // written before `waited` is set, read after the join
  RunReport r;
  std::string second_failure;
  try {
    r = second.run(store, {.on_wait = [&](std::string_view step) {
                             waited_for = step;
                             waited = true;
                             throw std::runtime_error("wait broke");
                           }});
  } catch (const std::exception& e) {
    second_failure = e.what();
  }
  waited = true;  // frees the first run's step, whatever happened
  holder.join();
  REQUIRE(first_failure.empty());
  REQUIRE(second_failure.empty());
  REQUIRE(computed == 1);
  REQUIRE(waited_for == "slow");
  CHECK(first_report.ok);  // and the waiting run found its result: computed once
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Catch::Contains("the on_wait callback failed: wait broke"));
  CHECK(r.step("slow").status == "cached");
  CHECK(store.load<int>("wait.slow.out") == 7);
}

TEST_CASE("A run on a machine that cannot start threads runs on the ones it has", "[errors][pipeline][processes]") {
  if (::geteuid() != 0) {
    WARN("skipped: dropping to an unprivileged user with a process limit needs root");
    return;
  }
  if (under_sanitizer()) {
    WARN("skipped under a sanitizer, whose runtime needs threads of its own");
    return;
  }
  test::TempDir dir;
  fs::permissions(dir.path(), fs::perms::all);
  const fs::path store_dir = dir / "store";
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    rlimit one{1, 1};
    if (::setgid(65534) != 0 || ::setuid(65534) != 0 || ::setrlimit(RLIMIT_NPROC, &one) != 0) ::_exit(9);
    try {
      Store store = Store::open(store_dir, {.create = true});
      Pipeline p("threads");
      for (int k = 0; k < 4; ++k)
        p.step({.name = "s" + std::to_string(k), .params = {{"k", k}}},
               [](const StepContext& c) { return c.param<int>("k"); });
      auto report = p.run(store, {.jobs = 4});
      ::_exit(report.ok && report.count("ran") == 4 ? 0 : 1);
    } catch (...) {
      ::_exit(2);
    }
  }
  CHECK(reap(pid) == 0);
}

TEST_CASE("A handle from another pipeline is refused where it is given", "[errors][pipeline]") {
  Pipeline a("a"), b("b");
  auto from_a = a.step({.name = "x"}, [] { return 1; });
  auto from_b = b.step({.name = "x"}, [] { return std::string("s"); });
  (void)from_b;
  // The same indices exist in b, holding another type: refused, not miscast.
  CHECK_THROWS_AS(b.step({.name = "y"}, [](const int& v) { return v; }, from_a), InvalidArgument);
  CHECK_THROWS_WITH(b.step({.name = "y"}, [](const int& v) { return v; }, from_a),
                    Catch::Contains("from another pipeline"));
  auto input = a.input<int>("somewhere");
  CHECK_THROWS_AS(b.step({.name = "z"}, [](const int& v) { return v; }, input), InvalidArgument);
  // A copy of a pipeline takes its handles.
  Pipeline copy = a;
  CHECK_NOTHROW(copy.step({.name = "y"}, [](const int& v) { return v + 1; }, from_a));
}

TEST_CASE("A StepContext keeps its own copies", "[errors][pipeline]") {
  std::string pipeline = "p", step = "s", run = "r1";
  nlohmann::json params = {{"k", 3}};
  StepContext context(pipeline, step, run, params, nlohmann::json{{"f", "sha256:..."}});
  pipeline = "changed";
  step.assign(100, 'x');
  params["k"] = 4;
  params = nullptr;
  CHECK(context.pipeline() == "p");
  CHECK(context.step() == "s");
  CHECK(context.run_id() == "r1");
  CHECK(context.param<int>("k") == 3);
  CHECK(context.external()["f"] == "sha256:...");
  StepContext none("p", "s", "r", nlohmann::json::object());
  CHECK(none.external().is_null());
}

TEST_CASE("gc --dry-run needs no write access to the store", "[errors][gc][processes]") {
  if (::geteuid() != 0) {
    WARN("skipped: reading a store as a user who may not write it needs root to set up");
    return;
  }
  test::TempDir dir;
  fs::permissions(dir.path(), fs::perms::all);
  const fs::path store_dir = dir / "store";
  Digest unnamed;
  {
    Store store = Store::open(store_dir, {.create = true});
    store.save(std::int64_t{1}, {.name = "kept"});
    unnamed = store.save(std::int64_t{2}).digest;
  }
  REQUIRE(fs::exists(store_dir / "locks" / "gc.lock"));
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Everything root made is 0755 or 0644: readable, never writable, by nobody.
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(9);
    try {
      Store store = Store::open(store_dir);
      auto report = store.gc(true, std::chrono::seconds(0));
      const bool found = report.removed.size() == 1 && report.removed.front() == unnamed;
      bool refused = false;
      try {
        store.gc(false, std::chrono::seconds(0));  // a real collection needs to write, and says so
      } catch (const Error&) {
        refused = true;
      }
      ::_exit(found && refused ? 0 : 1);
    } catch (...) {
      ::_exit(2);
    }
  }
  CHECK(reap(pid) == 0);
  Store store = Store::open(store_dir);
  CHECK(store.contains(unnamed));  // the dry run and the refused run removed nothing
  CHECK(store.verify().ok());
}
