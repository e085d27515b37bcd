// The storage conformance suite: one set of rules every medium must keep,
// run against the local directory, the in-memory medium and an S3 bucket
// (S3Kind: a real server, which the ctest `remote_conformance` starts;
// `unit` leaves the S3Kind cases out): objects written
// whole, conditions checked atomically, listings with prefixes and cursors,
// staged folders published at once, leases that exclude, expire and are
// taken over, and a store built on the medium surviving injected faults.

#include "support.hpp"

#include "fault_medium.hpp"
#include "memory_medium.hpp"

#include <amphora/everyday.hpp>
#include <amphora/pipeline.hpp>
#include <amphora/storage/medium.hpp>
#include <amphora/storage/s3.hpp>

#include <catch2/catch.hpp>

#include <limits>

#include <atomic>
#include <csignal>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <type_traits>
#include <unistd.h>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

struct LocalKind {
  static constexpr const char* name = "local";
  test::TempDir dir;
  std::shared_ptr<Medium> make() { return open_local_medium(dir / "medium", true); }
  // Another handle on the same space, as a second process would open it.
  std::shared_ptr<Medium> reopen() { return open_local_medium(dir / "medium", false); }
  static constexpr bool shared_between_processes = true;
};

struct MemoryKind {
  static constexpr const char* name = "memory";
  std::shared_ptr<Medium> medium = testing::make_memory_medium("memory://conformance");
  std::shared_ptr<Medium> make() { return medium; }
  std::shared_ptr<Medium> reopen() { return medium; }
  static constexpr bool shared_between_processes = false;
};

// A fresh prefix of the test bucket of $AMPHORA_TEST_S3_ENDPOINT (scripts/rgw.sh).
struct S3Kind {
  static constexpr const char* name = "s3";
  static constexpr bool shared_between_processes = true;
  std::string url = fresh_url();
  // Kept: a lease taken through a medium (objects it renews) must not outlive
  // it. Tests reopen from several threads at once.
  std::mutex opened_mutex;
  std::vector<std::shared_ptr<Medium>> opened;
  std::shared_ptr<Medium> make() {
    auto medium = open_s3_medium(url, options());
    std::lock_guard lock(opened_mutex);
    return opened.emplace_back(std::move(medium));
  }
  std::shared_ptr<Medium> reopen() { return make(); }

  static S3Options options() {
    S3Options o;
    const char* endpoint = std::getenv("AMPHORA_TEST_S3_ENDPOINT");
    if (!endpoint) FAIL("S3Kind needs AMPHORA_TEST_S3_ENDPOINT and the test keys: run `make remote-up` and source build/rgw/env");
    o.endpoint = endpoint;
    return o;
  }
  static std::string fresh_url() {
    const char* bucket = std::getenv("AMPHORA_TEST_S3_BUCKET");
    static std::atomic<int> n{0};
    return std::string("s3://") + (bucket ? bucket : "amphora") + "/conformance-" + std::to_string(::getpid()) + "-" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "-" + std::to_string(++n);
  }
};

std::vector<std::string> keys_of(const std::vector<ListedEntry>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(e.key);
  return out;
}

std::string read_all(RandomAccessFile& file) {
  std::string out(static_cast<std::size_t>(file.size()), '\0');
  file.read_at(0, out.size(), reinterpret_cast<std::byte*>(out.data()));
  return out;
}

// Waits for a forked child; its exit status, or 128 + signal.
int reap(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ObjectLeases::Options quick_leases() {
  ObjectLeases::Options o;
  o.ttl = std::chrono::milliseconds(300);
  o.poll = std::chrono::milliseconds(5);
  o.clock_skew = std::chrono::milliseconds(0);
  return o;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TEMPLATE_TEST_CASE("Storage: objects are written whole and read back exactly", "[storage]", LocalKind, MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  CHECK_FALSE(m->head("a/b.bin"));
  CHECK_THROWS_AS(m->get("a/b.bin", 100), NotFound);
  CHECK_THROWS_AS(m->open("a/b.bin"), NotFound);

  std::string bytes("binary\0bytes\xff\x01", 15);
  auto written = m->put("a/b.bin", bytes);
  REQUIRE(written);
  CHECK(written->size == bytes.size());
  auto info = m->head("a/b.bin");
  REQUIRE(info);
  CHECK(info->size == bytes.size());
  CHECK(info->tag == written->tag);
  CHECK(m->get("a/b.bin", 100) == bytes);
  auto file = m->open("a/b.bin");
  CHECK(read_all(*file) == bytes);
  auto mapped = m->map("a/b.bin");
  CHECK(std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size()) == bytes);
  // An empty object is an object.
  REQUIRE(m->put("empty", ""));
  CHECK(m->head("empty")->size == 0);
  CHECK(m->get("empty", 0).empty());

  // Over the caller's bound: refused before reading.
  CHECK_THROWS_AS(m->get("a/b.bin", 4), CorruptData);
  // Past the end: an error, never a short read.
  std::vector<std::byte> buf(32);
  CHECK_THROWS_AS(file->read_at(10, 10, buf.data()), CorruptData);

  // Replaced whole: a new tag, and what was opened before still reads the old bytes.
  auto replaced = m->put("a/b.bin", "new");
  REQUIRE(replaced);
  CHECK(replaced->tag != written->tag);
  CHECK(m->get("a/b.bin", 100) == "new");
  if constexpr (std::is_same_v<TestType, S3Kind>)  // an object store keeps no old version to read: it says so
    CHECK_THROWS_WITH(read_all(*file), Catch::Contains("was replaced while being read"));
  else
    CHECK(read_all(*file) == bytes);
  CHECK(m->head("a/b.bin")->modified >= info->modified);

  CHECK(m->remove("a/b.bin"));
  CHECK_FALSE(m->remove("a/b.bin"));
  CHECK_FALSE(m->head("a/b.bin"));
}

TEMPLATE_TEST_CASE("Storage: objects opened with a size known from a manifest read back exactly or fail",
                   "[storage]", LocalKind, MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  const std::string bytes = "0123456789abcdef";
  REQUIRE(m->put("sized/f.bin", bytes));
  auto file = m->open_sized("sized/f.bin", bytes.size());
  CHECK(file->size() == bytes.size());
  CHECK(read_all(*file) == bytes);
  std::vector<std::byte> buf(4);
  file->read_at(6, 4, buf.data());
  CHECK(std::memcmp(buf.data(), "6789", 4) == 0);
  auto mapped = m->map_sized("sized/f.bin", bytes.size());
  CHECK(std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size()) == bytes);

  // What the caller was told is not what is there: found at the open (a
  // size to compare) or at the first read, never a wrong byte.
  auto wrong_size = [&](std::uint64_t size) {
    try {
      auto f = m->open_sized("sized/f.bin", size);
      if (f->size() != size) return true;
      std::vector<std::byte> all(size);
      f->read_at(0, size, all.data());
      return false;
    } catch (const CorruptData&) {
      return true;
    }
  };
  CHECK(wrong_size(bytes.size() - 1));
  CHECK(wrong_size(bytes.size() + 1));
  CHECK(wrong_size(1000));
  auto missing = [&](auto&& attempt) {
    try {
      attempt();
      return false;
    } catch (const NotFound&) {
      return true;
    }
  };
  CHECK(missing([&] { read_all(*m->open_sized("sized/none.bin", 8)); }));
  CHECK(missing([&] { m->map_sized("sized/none.bin", 8); }));
  CHECK(missing([&] { m->open_sized("sized/none.bin", 0); }));
  CHECK_THROWS_AS(m->open_sized("../out", 4), InvalidArgument);
}

TEMPLATE_TEST_CASE("Storage: head_each answers as head() would, one object at a time", "[storage]", LocalKind,
                   MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  REQUIRE(m->put("f/a.json", "{}"));
  REQUIRE(m->put("f/b.bin", "twelve bytes"));
  REQUIRE(m->put("f/deeper/c.bin", "c"));
  const std::vector<std::string> names{"a.json", "missing", "b.bin", "deeper/c.bin"};
  auto answers = m->head_each("f/", names);
  REQUIRE(answers.size() == names.size());
  for (std::size_t k = 0; k < names.size(); ++k) {
    INFO(names[k]);
    auto single = m->head("f/" + names[k]);
    CHECK(answers[k].problem.empty());
    REQUIRE(answers[k].info.has_value() == single.has_value());
    if (single) {
      CHECK(answers[k].info->size == single->size);
      CHECK(answers[k].info->tag == single->tag);
    }
  }
  CHECK(answers[2].info->size == 12);
  // A folder that is not there: every answer empty, nothing thrown.
  for (const auto& a : m->head_each("nowhere/", names)) CHECK_FALSE(a.info);
  CHECK(m->head_each("f/", {}).empty());
  CHECK_THROWS_AS(m->head_each("f/", std::vector<std::string>{"../escape"}), InvalidArgument);
  if constexpr (std::is_same_v<TestType, LocalKind>) {
    // What is there but is no object is that object's answer, not a throw.
    fs::create_directory(kind.dir / "medium" / "f" / "sub");
    ::mkfifo((kind.dir / "medium" / "f" / "pipe").c_str(), 0600);
    auto odd = m->head_each("f/", std::vector<std::string>{"sub", "a.json", "pipe"});
    CHECK_THAT(odd[0].problem, Catch::Contains("'sub' is a directory"));
    CHECK_FALSE(odd[0].info);
    CHECK(odd[1].info);
    CHECK_THAT(odd[2].problem, Catch::Contains("'pipe' is a FIFO"));
    CHECK_THROWS_WITH(m->head("f/pipe"), Catch::Contains("'pipe' is a FIFO"));
  }
}

TEMPLATE_TEST_CASE("Storage: keys that could leave the medium's space are refused", "[storage]", LocalKind, MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  for (const char* key : {"../x", "a/../../x", "a//b", "/abs", "a/./b", "", "a/"}) {
    INFO(key);
    CHECK_THROWS_AS(m->put(key, "x"), InvalidArgument);
    CHECK_THROWS_AS(m->head(key), InvalidArgument);
    CHECK_THROWS_AS(m->get(key, 10), InvalidArgument);
    CHECK_THROWS_AS(m->remove(key), InvalidArgument);
  }
  CHECK(list_all(*m, "", false).empty());
}

TEMPLATE_TEST_CASE("Storage: conditional puts check and write as one step", "[storage]", LocalKind, MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  auto first = m->put("k", "one", PutCondition::absent());
  REQUIRE(first);
  CHECK_FALSE(m->put("k", "two", PutCondition::absent()));
  CHECK(m->get("k", 10) == "one");

  CHECK_FALSE(m->put("k", "two", PutCondition::matching("not-" + first->tag)));
  CHECK(m->get("k", 10) == "one");
  auto second = m->put("k", "two", PutCondition::matching(first->tag));
  REQUIRE(second);
  CHECK(m->get("k", 10) == "two");
  // The old tag is spent.
  CHECK_FALSE(m->put("k", "three", PutCondition::matching(first->tag)));
  // Matching a missing object fails; so it does after a removal.
  CHECK_FALSE(m->put("missing", "x", PutCondition::matching(second->tag)));
  REQUIRE(m->remove("k"));
  CHECK_FALSE(m->put("k", "x", PutCondition::matching(second->tag)));
  CHECK_FALSE(m->head("k"));
}

TEMPLATE_TEST_CASE("Storage: threads racing to create a key have exactly one winner", "[storage][threads]", LocalKind,
                   MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  constexpr int kThreads = 8, kKeys = 40;
  std::vector<std::vector<int>> won(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto mine = kind.reopen();
      for (int k = 0; k < kKeys; ++k)
        if (mine->put("race/" + std::to_string(k), "owner " + std::to_string(t), PutCondition::absent()))
          won[t].push_back(k);
    });
  for (auto& th : threads) th.join();
  std::map<int, int> owner;
  for (int t = 0; t < kThreads; ++t)
    for (int k : won[t]) CHECK(owner.emplace(k, t).second);
  REQUIRE(owner.size() == kKeys);
  for (auto [k, t] : owner) CHECK(m->get("race/" + std::to_string(k), 100) == "owner " + std::to_string(t));
}

TEMPLATE_TEST_CASE("Storage: a compare-and-swap counter loses no update", "[storage][threads]", LocalKind, MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  REQUIRE(m->put("counter", "0"));
  constexpr int kThreads = 4, kEach = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      auto mine = kind.reopen();
      for (int done = 0; done < kEach;) {
        auto info = mine->head("counter");
        int value = std::stoi(mine->get("counter", 100));
        // The value read may already be older than the tag: a stale pair fails below.
        if (mine->head("counter")->tag != info->tag) continue;
        if (mine->put("counter", std::to_string(value + 1), PutCondition::matching(info->tag))) ++done;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(m->get("counter", 100) == std::to_string(kThreads * kEach));
}

TEST_CASE("Storage: processes racing to create a key have exactly one winner (local)", "[storage][processes]") {
  test::TempDir dir;
  auto m = open_local_medium(dir / "medium", true);
  constexpr int kChildren = 4, kKeys = 60;
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        auto mine = open_local_medium(dir / "medium", false);
        for (int k = 0; k < kKeys; ++k) mine->put("race/" + std::to_string(k), std::to_string(c), PutCondition::absent());
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) CHECK(reap(pid) == 0);
  auto keys = list_all(*m, "race/", false);
  REQUIRE(keys.size() == kKeys);
  for (const auto& e : keys) {
    auto owner = m->get(e.key, 10);
    CHECK((owner.size() == 1 && owner[0] >= '0' && owner[0] < '0' + kChildren));
  }
}

TEMPLATE_TEST_CASE("Storage: listings by prefix, folded into folders, paged by a cursor", "[storage]", LocalKind,
                   MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  for (const char* key : {"a/1", "a/2", "a/sub/x", "a/sub/y", "a/sub/deeper/z", "ab", "abc/k", "b/9", "a0"})
    REQUIRE(m->put(key, key));

  CHECK(keys_of(list_all(*m, "a/", true)) == std::vector<std::string>{"a/1", "a/2", "a/sub/"});
  CHECK(keys_of(list_all(*m, "a/", false)) ==
        std::vector<std::string>{"a/1", "a/2", "a/sub/deeper/z", "a/sub/x", "a/sub/y"});
  // A prefix need not end at a '/'.
  CHECK(keys_of(list_all(*m, "a", true)) == std::vector<std::string>{"a/", "a0", "ab", "abc/"});
  CHECK(keys_of(list_all(*m, "ab", true)) == std::vector<std::string>{"ab", "abc/"});
  CHECK(keys_of(list_all(*m, "a/s", false)) == std::vector<std::string>{"a/sub/deeper/z", "a/sub/x", "a/sub/y"});
  CHECK(list_all(*m, "nothing/", true).empty());
  auto kinds = list_all(*m, "a/", true);
  CHECK(kinds[0].kind == ListedEntry::Kind::object);
  CHECK(kinds[2].kind == ListedEntry::Kind::folder);

  // Pages of two, each after the last key of the one before.
  std::vector<std::string> paged;
  std::string after;
  int pages = 0;
  for (;;) {
    auto page = m->list("a/", after, false, 2);
    ++pages;
    for (const auto& e : page.entries) paged.push_back(e.key);
    if (!page.truncated) break;
    REQUIRE(page.entries.size() == 2);
    after = page.entries.back().key;
  }
  CHECK(pages == 3);
  CHECK(paged == keys_of(list_all(*m, "a/", false)));
  // A cursor after a folder skips the whole folder in a shallow listing.
  CHECK(keys_of(m->list("", "a/", true, 10).entries) == std::vector<std::string>{"a0", "ab", "abc/", "b/"});
}

TEMPLATE_TEST_CASE("Storage: a staged folder appears at once, marker last, or not at all", "[storage]", LocalKind,
                   MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  const std::string prefix = "objects/sha256/ab/abcd/";
  {
    auto staging = m->begin_staging();
    auto file = staging->create_file("sub/data.bin");
    file->write_at(5, ConstBytes(reinterpret_cast<const std::byte*>("world"), 5));
    file->write_at(0, ConstBytes(reinterpret_cast<const std::byte*>("hello"), 5));
    file->close();
    // Nothing is visible before publishing.
    CHECK(list_all(*m, "objects/", false).empty());
    CHECK(staging->publish(prefix, "manifest.json", "{}"));
  }
  CHECK(keys_of(list_all(*m, prefix, false)) ==
        std::vector<std::string>{prefix + "manifest.json", prefix + "sub/data.bin"});
  CHECK(m->get(prefix + "sub/data.bin", 100) == "helloworld");
  CHECK(m->get(prefix + "manifest.json", 100) == "{}");

  // A second copy finds the folder taken and changes nothing.
  {
    auto staging = m->begin_staging();
    auto file = staging->create_file("sub/data.bin");
    file->write_at(0, ConstBytes(reinterpret_cast<const std::byte*>("other"), 5));
    file->close();
    CHECK_FALSE(staging->publish(prefix, "manifest.json", "{}"));
    // ... unless it replaces a damaged one, under its repair lease.
    auto repair = m->lease("repair-abcd", LeaseMode::exclusive, true);
    staging->replace(prefix, "manifest.json", "{\"fixed\":1}");
  }
  CHECK(m->get(prefix + "sub/data.bin", 100) == "other");
  CHECK(m->get(prefix + "manifest.json", 100) == "{\"fixed\":1}");

  // An abandoned staging area leaves nothing behind.
  {
    auto staging = m->begin_staging();
    staging->create_file("x")->close();
  }
  CHECK(keys_of(list_all(*m, "", false)) ==
        std::vector<std::string>{prefix + "manifest.json", prefix + "sub/data.bin"});

  CHECK(m->remove_folder(prefix, "manifest.json") == 5 + std::string("{\"fixed\":1}").size());
  CHECK(list_all(*m, "objects/", false).empty());
  CHECK(m->remove_folder(prefix, "manifest.json") == 0);
}

TEMPLATE_TEST_CASE("Storage: a folder staged in place takes writes in any order and publishes its marker last",
                   "[storage]", LocalKind, MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  const std::string prefix = "objects/sha256/cd/cdef/";
  // 20 MiB (three parts of an S3 multipart upload), written in 1 MiB blocks
  // by three threads in no particular order, and a small file beside it.
  const std::size_t size = 20u << 20, block = 1u << 20;
  std::string big(size, '\0');
  for (std::size_t k = 0; k < size; ++k) big[k] = static_cast<char>((k * 2654435761u) >> 13);
  {
    auto staging = m->begin_staging_at(prefix);
    auto file = staging->create_file("data/big.bin");
    file->reserve(size);
    std::atomic<std::size_t> next{0};
    auto writer = [&] {
      for (std::size_t b; (b = next.fetch_add(1)) < size / block;) {
        const std::size_t at = ((b * 7) % (size / block)) * block;  // a permutation of the blocks
        file->write_at(at, ConstBytes(reinterpret_cast<const std::byte*>(big.data() + at), block));
      }
    };
    std::thread a(writer), b(writer);
    writer();
    a.join();
    b.join();
    file->close();
    auto small = staging->create_file("small.txt");
    small->write_at(0, ConstBytes(reinterpret_cast<const std::byte*>("tiny"), 4));
    small->close();
    CHECK_THROWS_AS(staging->create_file("small.txt"), InvalidArgument);
    CHECK_FALSE(m->head(prefix + "manifest.json"));
    CHECK(staging->publish(prefix, "manifest.json", "{}"));
  }
  CHECK(m->get(prefix + "small.txt", 100) == "tiny");
  auto read = m->open(prefix + "data/big.bin");
  REQUIRE(read->size() == size);
  CHECK(read_all(*read) == big);
  // A second copy of the folder finds its marker there and publishes nothing.
  {
    auto staging = m->begin_staging_at(prefix);
    auto small = staging->create_file("small.txt");
    small->write_at(0, ConstBytes(reinterpret_cast<const std::byte*>("tiny"), 4));
    small->close();
    CHECK_FALSE(staging->publish(prefix, "manifest.json", "{\"other\":1}"));
  }
  CHECK(m->get(prefix + "manifest.json", 100) == "{}");
}

TEMPLATE_TEST_CASE("Storage: writes that carry their SHA-256 are stored as written; a wrong one never is",
                   "[storage]", LocalKind, MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  const std::string prefix = "objects/sha256/ce/cef0/";
  const std::size_t size = (20u << 20) + 77;
  std::string big(size, '\0');
  for (std::size_t k = 0; k < size; ++k) big[k] = static_cast<char>((k * 2246822519u) >> 11);
  auto bytes = [&](std::size_t at, std::size_t n) { return ConstBytes(reinterpret_cast<const std::byte*>(big.data() + at), n); };
  {
    auto staging = m->begin_staging_at(prefix);
    auto file = staging->create_file("big.bin");
    file->reserve(size);
    // An object store signs its parts and wants their hashes; the others take none.
    const std::uint64_t part = file->hashed_write_size();
    if (std::string(TestType::name) == "s3") CHECK(part == 8u << 20);
    else CHECK(part == 0);
    const std::size_t step = part ? static_cast<std::size_t>(part) : 8u << 20;
    for (std::size_t at = 0; at < size; at += step) {
      const std::size_t n = std::min(step, size - at);
      file->write_hashed_at(at, bytes(at, n), Sha256::of(big.data() + at, n));
    }
    file->close();
    CHECK(staging->publish(prefix, "manifest.json", "{}"));
  }
  CHECK(read_all(*m->open(prefix + "big.bin")) == big);
  // A hash of more than one part applies to none of them.
  {
    const std::string two = "objects/sha256/ce/cef1/";
    auto staging = m->begin_staging_at(two);
    auto file = staging->create_file("big.bin");
    file->reserve(size);
    file->write_hashed_at(0, bytes(0, 16u << 20), Sha256::of(big.data(), 16u << 20));
    file->write_at(16u << 20, bytes(16u << 20, size - (16u << 20)));
    file->close();
    CHECK(staging->publish(two, "manifest.json", "{}"));
    CHECK(read_all(*m->open(two + "big.bin")) == big);
  }
  // A hash that is not the data's: the server refuses the part (the
  // medium that signs with it), and nothing is published.
  if (std::string(TestType::name) == "s3") {
    const std::string other = "objects/sha256/cf/cf00/";
    auto staging = m->begin_staging_at(other);
    auto file = staging->create_file("big.bin");
    file->reserve(size);
    CHECK_THROWS_AS(file->write_hashed_at(0, bytes(0, 8u << 20), Sha256::of(std::string_view("not these bytes"))), RemoteError);
    staging.reset();
    CHECK_FALSE(m->head(other + "manifest.json"));
    CHECK_FALSE(m->head(other + "big.bin"));
  }
}

TEMPLATE_TEST_CASE("Storage: the medium's leases exclude, share and wait", "[storage][leases]", LocalKind, MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  {
    auto held = m->lease("gc", LeaseMode::exclusive, false);
    REQUIRE(held);
    CHECK(held->held());
    CHECK_FALSE(kind.reopen()->lease("gc", LeaseMode::exclusive, false));
    CHECK_FALSE(kind.reopen()->lease("gc", LeaseMode::shared, false));
    CHECK(kind.reopen()->lease("names", LeaseMode::exclusive, false));  // another name is free
  }
  auto a = m->lease("gc", LeaseMode::shared, false);
  auto b = kind.reopen()->lease("gc", LeaseMode::shared, false);
  REQUIRE(a);
  REQUIRE(b);
  CHECK_FALSE(kind.reopen()->lease("gc", LeaseMode::exclusive, false));
  // An exclusive taker waits until the shared holders are gone.
  std::atomic<bool> got{false};
  std::thread taker([&] {
    auto x = kind.reopen()->lease("gc", LeaseMode::exclusive, true);
    got = x != nullptr;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(got.load());
  a.reset();
  b.reset();
  taker.join();
  CHECK(got.load());
  CHECK_THROWS_AS(m->lease("bad/name", LeaseMode::exclusive, false), InvalidArgument);

  // Shared leases of one medium object count: the lock stays until the last goes.
  auto first = m->lease("names", LeaseMode::shared, false);
  auto second = m->lease("names", LeaseMode::shared, false);
  REQUIRE(first);
  REQUIRE(second);
  first.reset();
  CHECK_FALSE(kind.reopen()->lease("names", LeaseMode::exclusive, false));
  second.reset();
  CHECK(kind.reopen()->lease("names", LeaseMode::exclusive, false));
  // And the same object's exclusive lease excludes its own shared ones.
  auto mine = m->lease("names", LeaseMode::exclusive, false);
  REQUIRE(mine);
  CHECK_FALSE(m->lease("names", LeaseMode::shared, false));
}

TEST_CASE("Storage: a forked child's shared lease leaves its parent's held (local)", "[storage][leases][processes]") {
  LocalKind kind;
  auto m = kind.make();
  auto parents = m->lease("gc", LeaseMode::shared, false);
  REQUIRE(parents);
  pid_t child = ::fork();
  if (child == 0) {
    // The child's copy of the medium: its own lease, taken and given back.
    int code = 0;
    try {
      auto own = m->lease("gc", LeaseMode::shared, true);
      code = own ? 0 : 3;
      own.reset();
      parents.reset();  // the child's copy of the parent's lease: not the child's to release
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  REQUIRE(child > 0);
  CHECK(reap(child) == 0);
  CHECK_FALSE(kind.reopen()->lease("gc", LeaseMode::exclusive, false));  // still the parent's
  parents.reset();
  CHECK(kind.reopen()->lease("gc", LeaseMode::exclusive, false));
}

TEMPLATE_TEST_CASE("Storage: object leases expire unrenewed and are taken over", "[storage][leases]", LocalKind,
                   MemoryKind, S3Kind) {
  TestType kind;
  auto m = kind.make();
  auto leases = ObjectLeases::create(*m, quick_leases());

  SECTION("a live holder keeps its lease past its ttl by renewing it") {
    auto held = leases->acquire("step-x", LeaseMode::exclusive, false);
    REQUIRE(held);
    auto rival = ObjectLeases::create(*m, quick_leases());
    std::this_thread::sleep_for(std::chrono::milliseconds(700));  // over two ttls
    CHECK_FALSE(rival->acquire("step-x", LeaseMode::exclusive, false));
    CHECK(held->held());
    held.reset();  // released: gone at once, not after a ttl
    CHECK(rival->acquire("step-x", LeaseMode::exclusive, false));
  }
  SECTION("a dead holder's lease is taken over once expired") {
    // What a holder killed mid-step leaves: its record, no one renewing it.
    nlohmann::json dead = {{"holder", "gone-1"}, {"pid", 1}, {"expires_at_ms", now_ms() - 1000}};
    REQUIRE(m->put("leases/step-y", dead.dump()));
    auto taken = leases->acquire("step-y", LeaseMode::exclusive, false);
    REQUIRE(taken);
    CHECK(taken->held());
    CHECK(m->get("leases/step-y", 4096).find(dead["holder"].get<std::string>()) == std::string::npos);
  }
  SECTION("a stalled holder learns it lost the lease") {
    auto held = leases->acquire("step-z", LeaseMode::exclusive, false);
    REQUIRE(held);
    // Its record as it would stand after the holder stalled past the expiry.
    nlohmann::json stale = {{"holder", "stalled"}, {"pid", 1}, {"expires_at_ms", now_ms() - 1000}};
    REQUIRE(m->put("leases/step-z", stale.dump()));
    auto rival = ObjectLeases::create(*m, quick_leases());
    auto taken = rival->acquire("step-z", LeaseMode::exclusive, false);
    REQUIRE(taken);
    for (int i = 0; i < 100 && held->held(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK_FALSE(held->held());
    held.reset();  // releasing a lost lease leaves the new holder's alone
    CHECK(taken->held());
    CHECK(m->head("leases/step-z"));
  }
  SECTION("a holder whose clock runs behind keeps its lease where the medium tells its own clock") {
    // Written just now, by a holder whose clock is an hour behind: by its
    // own expiry long gone, by the medium's clock fresh for its ttl.
    nlohmann::json behind = {{"holder", "slow-clock"}, {"pid", 1}, {"expires_at_ms", now_ms() - 3600000},
                             {"ttl_ms", 60000}};
    REQUIRE(m->put("leases/step-c", behind.dump()));
    const bool medium_clock = m->head("leases/step-c")->observed != std::chrono::system_clock::time_point{};
    auto taken = leases->acquire("step-c", LeaseMode::exclusive, false);
    CHECK(static_cast<bool>(taken) == !medium_clock);
    // Past its ttl by the medium's clock, it is taken over whatever the record says.
    nlohmann::json ahead = {{"holder", "fast-clock"}, {"pid", 1}, {"expires_at_ms", now_ms() + 3600000}, {"ttl_ms", 1}};
    REQUIRE(m->put("leases/step-d", ahead.dump()));
    std::this_thread::sleep_for(std::chrono::milliseconds(medium_clock ? 2100 : 0));
    CHECK(static_cast<bool>(leases->acquire("step-d", LeaseMode::exclusive, false)) == medium_clock);
    // An absurd ttl is no ttl: the record's own expiry decides.
    nlohmann::json absurd = {{"holder", "x"}, {"pid", 1}, {"expires_at_ms", now_ms() - 1000},
                             {"ttl_ms", std::numeric_limits<std::int64_t>::max()}};
    REQUIRE(m->put("leases/step-e", absurd.dump()));
    CHECK(leases->acquire("step-e", LeaseMode::exclusive, false));
  }
  SECTION("garbage in a lease object does not block forever") {
    REQUIRE(m->put("leases/step-g", "not json"));
    CHECK(leases->acquire("step-g", LeaseMode::exclusive, false));
  }
  SECTION("shared and exclusive object leases") {
    auto s1 = leases->acquire("gc", LeaseMode::shared, false);
    auto s2 = ObjectLeases::create(*m, quick_leases())->acquire("gc", LeaseMode::shared, false);
    REQUIRE(s1);
    REQUIRE(s2);
    CHECK_FALSE(leases->acquire("gc", LeaseMode::exclusive, false));
    s1.reset();
    s2.reset();
    auto x = leases->acquire("gc", LeaseMode::exclusive, false);
    REQUIRE(x);
    CHECK_FALSE(ObjectLeases::create(*m, quick_leases())->acquire("gc", LeaseMode::shared, false));
  }
}

TEST_CASE("Storage: verify running beside a gc reports nothing the gc collected", "[storage][gc]") {
  // What a nightly verify overlapping a gc sees: artifacts it listed (a
  // composite and its two children, unnamed) go away while it reads their
  // manifests, hashes their files or looks for a parent's children. The gc
  // runs at each such moment in turn; verify must report none of it, and
  // still report damage the gc did not cause.
  const auto [point, skip] = GENERATE(table<std::string, int>({
      {"before:get", 0}, {"before:get", 1}, {"before:get", 2}, {"before:get", 3},    // reading manifests
      {"before:list", 4}, {"before:list", 5}, {"before:list", 6}, {"before:list", 7}, // files of each
      {"before:open", 0}, {"before:open", 1}, {"before:open", 2}, {"before:open", 3},  // hashing them
      {"before:head", 1}, {"before:head", 2}}));                                     // a parent's children
  const bool damaged = GENERATE(false, true);
  INFO("gc at the " << skip + 1 << "th " << point << " under objects/, " << (damaged ? "" : "no ") << "damage");
  auto faulty = std::make_shared<testing::FaultMedium>(testing::make_memory_medium());
  Store store = Store::open({.create = true, .medium = faulty});
  const auto kept = store.save(test::random_tensor(DType::float64, {16}, 3), {.name = "kept"});
  const auto unnamed = store.save(std::pair<Tensor, Tensor>{test::random_tensor(DType::float32, {64}, 1),
                                                             test::random_tensor(DType::int32, {32}, 2)});
  REQUIRE(store.verify().ok());
  if (damaged) {
    // One bit of the named tensor's payload, as a failing disk would flip it.
    const std::string folder = "objects/sha256/" + kept.digest.hex().substr(0, 2) + "/" + kept.digest.hex() + "/";
    bool flipped = false;
    Medium& medium = *faulty;
    for (const auto& e : medium.list(folder, "", false, kMaxListPage).entries)
      if (e.key.ends_with(".npy")) {
        std::string bytes = medium.get(e.key, 1 << 20);
        bytes.back() ^= 1;
        REQUIRE(medium.put(e.key, bytes));
        flipped = true;
      }
    REQUIRE(flipped);
  }
  // The gc runs beside the verify, as another process would: while verify
  // looks again at what seemed damaged it holds off a gc, so the gc is
  // waited for a while here and finishes after that look if it must.
  std::future<GcReport> collecting;
  faulty->on(
      point,
      [&, &store = store] {
        collecting = std::async(std::launch::async, [&] { return store.gc(false, std::chrono::seconds(0)); });
        collecting.wait_for(std::chrono::seconds(2));
      },
      "objects/", skip);
  const auto report = store.verify();
  REQUIRE(faulty->triggered() == 1);
  CHECK(collecting.get().removed.size() == 3);
  CHECK_FALSE(store.contains(unnamed.digest));
  CHECK(report.unsupported.empty());
  if (damaged) {
    REQUIRE(report.problems.size() == 1);
    CHECK_THAT(report.problems.front(), Catch::Contains(kept.digest.str()) && Catch::Contains("tensor.npy"));
  } else {
    INFO((report.problems.empty() ? std::string() : report.problems.front()));
    CHECK(report.problems.empty());
  }
}

TEST_CASE("Storage: verify reports no missing artifact for a name removed and collected while it ran",
          "[storage][gc]") {
  auto faulty = std::make_shared<testing::FaultMedium>(testing::make_memory_medium());
  Store store = Store::open({.create = true, .medium = faulty});
  const auto gone = store.save(test::random_tensor(DType::float64, {16}, 4), {.name = "gone"});
  store.save(test::random_tensor(DType::float64, {16}, 5), {.name = "kept"});
  // After verify has read the names, before it looks for their artifacts:
  // `amphora rm gone` and a gc, from another process.
  faulty->on("before:head", [&, &store = store] {
    store.remove("gone");
    store.gc(false, std::chrono::seconds(0));
  }, "remotes.json");
  const auto report = store.verify();
  REQUIRE(faulty->triggered() == 1);
  CHECK_FALSE(store.contains(gone.digest));
  INFO((report.problems.empty() ? std::string() : report.problems.front()));
  CHECK(report.ok());
}

TEST_CASE("Storage: a medium throwing a foreign exception under a held object lease does not end the process",
          "[storage][leases][processes]") {
  // A medium of the user's own may throw std::runtime_error or bad_alloc.
  // Renewal runs on the leases' own thread and release in a destructor: an
  // exception leaving either would terminate the process, so the scenario
  // runs in a child and the parent reads how it ended.
  for (auto action : {testing::FaultMedium::Action::foreign, testing::FaultMedium::Action::no_memory}) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto faulty = std::make_shared<testing::FaultMedium>(testing::make_memory_medium());
      auto leases = ObjectLeases::create(*faulty, quick_leases());
      auto held = leases->acquire("step-f", LeaseMode::exclusive, false);
      if (!held) ::_exit(2);
      faulty->arm("before:put", action, "leases/step-f", 0, false);  // every renewal
      std::this_thread::sleep_for(std::chrono::milliseconds(350));    // three or more rounds at ttl/3
      if (faulty->triggered() < 1) ::_exit(3);
      faulty->disarm();  // no renewal counts below
      const int renewals = faulty->triggered();
      faulty->arm("before:head", action, "leases/step-f", 0, false);  // the release's look
      held.reset();
      if (faulty->triggered() != renewals + 1) ::_exit(4);
      ::_exit(0);
    }
    INFO("action " << static_cast<int>(action) << " (2: not acquired, 3: no renewal reached the fault, "
                   << "4: the release did not, 134: terminated)");
    CHECK(reap(pid) == 0);
  }
}

TEST_CASE("Storage: a process killed holding an object lease loses it after the ttl (local)",
          "[storage][leases][processes]") {
  test::TempDir dir;
  auto m = open_local_medium(dir / "medium", true);
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto mine = open_local_medium(dir / "medium", false);
    auto leases = ObjectLeases::create(*mine, quick_leases());
    auto held = leases->acquire("step-k", LeaseMode::exclusive, true);
    char c = held ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    for (;;) ::pause();  // killed holding it
  }
  ::close(ready[1]);  // a child that dies before writing ends the read
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  REQUIRE(c == 'y');
  auto leases = ObjectLeases::create(*m, quick_leases());
  CHECK_FALSE(leases->acquire("step-k", LeaseMode::exclusive, false));  // alive and renewing
  ::kill(pid, SIGKILL);
  CHECK(reap(pid) == 128 + SIGKILL);
  auto taken = leases->acquire("step-k", LeaseMode::exclusive, true);  // after its expiry
  CHECK(taken);
  ::close(ready[0]);
}

TEMPLATE_TEST_CASE("Storage: a store on the medium saves, names, verifies and collects", "[storage][store]", LocalKind,
                   MemoryKind, S3Kind) {
  TestType kind;
  Store store = Store::open({.create = true, .medium = kind.make()});
  Tensor t = test::random_tensor(DType::float32, {64, 8}, 3);
  auto first = store.save(t, {.name = "t"});
  auto second = store.save(std::vector<std::string>{"a", "b"}, {.name = "words"});
  CHECK(store.save(t, {.name = "t"}).version == 2);
  CHECK(store.load<Tensor>("t@1").values<float>()[7] == t.values<float>()[7]);
  CHECK(store.load<std::vector<std::string>>("words") == std::vector<std::string>{"a", "b"});
  CHECK(store.resolve(first.digest.hex().substr(0, 10)) == first.digest);
  CHECK(store.names() == std::vector<std::string>{"t", "words"});
  CHECK(store.verify().ok());
  store.remove("words");
  CHECK(store.remove("t", 1).size() == 1);
  CHECK(store.save(t, {.name = "t"}).version == 3);  // removed numbers are never issued again
  auto gc = store.gc(false, std::chrono::seconds(0));
  CHECK(gc.removed == std::vector<Digest>{second.digest});
  CHECK(store.contains(first.digest));
  CHECK_FALSE(store.contains(second.digest));
  CHECK(store.verify().ok());

  // A pipeline on it: a rerun comes from the action cache.
  Pipeline p("conf");
  auto n = p.step({.name = "n", .params = {{"k", 3}}}, [](const StepContext& c) { return c.param<std::int64_t>("k"); });
  p.step({.name = "sq"}, [](const std::int64_t& v) { return v * v; }, n);
  REQUIRE(p.run(store).ok);
  auto again = p.run(store);
  CHECK(again.count("cached") == 2);
  CHECK(store.load<std::int64_t>("conf.sq.out") == 9);
  CHECK(list_runs(store).size() == 2);
}

TEMPLATE_TEST_CASE("Storage: a store survives a fault at any step of a save", "[storage][faults]", LocalKind,
                   MemoryKind, S3Kind) {
  TestType kind;
  // The memory medium stages through the generic staging, whose puts the
  // wrapper sees one by one; the local one renames a staged directory.
  auto faulty = std::make_shared<testing::FaultMedium>(kind.make(), !std::is_same_v<TestType, LocalKind>);
  Store store = Store::open({.create = true, .medium = faulty});
  // The steps of one named save of a new value, as the medium sees them.
  const auto before = faulty->trace().size();
  store.save(test::random_tensor(DType::int32, {256}, 1), {.name = "probe"});
  const auto trace = faulty->trace();
  const std::vector<std::string> steps(trace.begin() + static_cast<std::ptrdiff_t>(before), trace.end());
  REQUIRE_FALSE(steps.empty());
  // Every write-side step, failed in turn, each time on a value not stored yet.
  int faults = 0;
  for (const auto& step : steps) {
    auto space = step.find(' ');
    std::string point = step.substr(0, space);
    if (!point.ends_with(":put") && !point.ends_with(":publish") && !point.ends_with(":lease")) continue;
    INFO(step);
    ++faults;
    Tensor t = test::random_tensor(DType::int32, {256}, 100 + static_cast<std::uint64_t>(faults));
    // The key's first folder ("names/", "objects/"), or the lease's name.
    std::string area = step.substr(space + 1, step.find('/', space + 1) - space);
    faulty->arm(point, testing::FaultMedium::Action::fail, area);
    CHECK_THROWS_AS(store.save(t, {.name = "t"}), IoError);
    faulty->disarm();
    // Whatever was left is whole or no artifact at all (files of a folder
    // whose manifest never came, which verify names and gc removes), and
    // the next save works.
    for (const auto& problem : store.verify().problems) CHECK_THAT(problem, Catch::Contains("no manifest.json"));
    store.gc(false, std::chrono::seconds(0));
    CHECK(store.verify().ok());
    auto saved = store.save(t, {.name = "t"});
    CHECK(store.load<Tensor>(saved.digest).values<std::int32_t>()[100] == t.values<std::int32_t>()[100]);
  }
  CHECK(faults >= 3);
}

TEMPLATE_TEST_CASE("Storage: saving again what is stored needs no room for a staged copy", "[storage][faults]",
                   LocalKind, MemoryKind, S3Kind) {
  TestType kind;
  auto faulty = std::make_shared<testing::FaultMedium>(kind.make());
  Store store = Store::open({.create = true, .medium = faulty});
  const Tensor big = test::random_tensor(DType::float64, {4096}, 7);
  const std::vector<std::string> words{"alpha", "beta", "gamma"};
  const std::vector<Tensor> tensors{big, test::random_tensor(DType::int8, {5}, 8)};  // children
  const auto first = store.save(big, {.name = "t"});
  const auto first_list = store.save(tensors, {.name = "list"});
  store.save(words, {.name = "w"});
  // A disk with no room left: every write of a staged payload fails.
  faulty->arm("before:write", testing::FaultMedium::Action::fail, "", 0, false);
  const auto again = store.save(big, {.name = "t"});
  CHECK(again.digest == first.digest);
  CHECK_FALSE(again.created);
  CHECK(again.version == 2);
  CHECK(store.save(tensors, {.name = "list"}).digest == first_list.digest);
  CHECK(store.save(words, {.name = "w"}).version == 2);
  // What is not stored yet fails as the disk failed, naming nothing.
  CHECK_THROWS_WITH(store.save(test::random_tensor(DType::float64, {4096}, 9), {.name = "t"}),
                    Catch::Contains("injected fault at before:write"));
  // A list one of whose children is new is not stored content either.
  CHECK_THROWS_WITH(store.save(std::vector<Tensor>{big, test::random_tensor(DType::int8, {5}, 10)}, {.name = "list"}),
                    Catch::Contains("injected fault at before:write"));
  faulty->disarm();
  CHECK(store.version_numbers("t") == std::vector<std::uint64_t>{1, 2});
  CHECK(store.version_numbers("list") == std::vector<std::uint64_t>{1, 2});
  CHECK(store.load<Tensor>("t").values<double>()[4095] == big.values<double>()[4095]);
  // A stored copy that lost bytes is not taken for the value.
  auto reader = store.open_artifact(first.digest);
  const std::string file = "objects/sha256/" + first.digest.hex().substr(0, 2) + "/" + first.digest.hex() + "/" +
                           reader.manifest().files.front().path;
  std::string bytes = faulty->get(file, std::size_t{1} << 30);
  bytes[bytes.size() - 1] = static_cast<char>(bytes.back() ^ 1);
  faulty->put(file, bytes, {});
  faulty->arm("before:write", testing::FaultMedium::Action::fail, "", 0, false);
  CHECK_THROWS_WITH(store.save(big, {.name = "t"}), Catch::Contains("injected fault at before:write"));
  faulty->disarm();
  CHECK(store.version_numbers("t").size() == 2);
  CHECK(store.save(big, {.name = "t"}).created);  // with room, the damaged copy is replaced
  CHECK(store.verify().ok());
}

TEST_CASE("Storage: a publish that dies midway on an object medium leaves no artifact", "[storage][faults]") {
  auto faulty = std::make_shared<testing::FaultMedium>(testing::make_memory_medium(), true);
  Store store = Store::open({.create = true, .medium = faulty});
  // A list of three strings: three payload files put before the manifest.
  std::vector<std::string> words{"alpha", "beta", "gamma"};
  faulty->arm("before:put", testing::FaultMedium::Action::fail, "objects/", 1);
  CHECK_THROWS_AS(store.save(words, {.name = "w"}), IoError);
  faulty->disarm();
  CHECK(store.artifacts().size() == 1);  // the folder of files put before the failure...
  CHECK_THROWS_AS(store.load<std::vector<std::string>>(store.artifacts().front()), NotFound);  // ...is no artifact
  auto report = store.verify();
  REQUIRE(report.problems.size() == 1);
  CHECK_THAT(report.problems[0], Catch::Contains("no manifest.json"));
  CHECK(store.gc(false, std::chrono::seconds(0)).removed.size() == 1);
  CHECK(store.save(words, {.name = "w"}).version == 1);
  CHECK(store.load<std::vector<std::string>>("w") == words);
  CHECK(store.verify().ok());
}

TEST_CASE("Storage: stores open by URI through registered schemes", "[storage][uri]") {
  testing::register_memory_scheme();
  testing::register_memory_scheme();  // twice is harmless
  {
    Store a = Store::open({.create = true, .uri = "memory://uri-test"});
    a.save(std::string("shared"), {.name = "s"});
  }
  Store b = Store::open({.uri = "memory://uri-test"});
  CHECK(b.load<std::string>("s") == "shared");
  CHECK_THROWS_AS(Store::open({.uri = "memory://never-made"}), NotFound);
  CHECK_THROWS_WITH(Store::open({.uri = "nosuch://x"}), Catch::Contains("'nosuch'") && Catch::Contains("memory") &&
                                                             Catch::Contains("file"));
  CHECK_THROWS_AS(Store::open({.uri = "nosuch://x"}), Unsupported);
  CHECK_THROWS_AS(register_medium_scheme("memory", [](const MediumRequest&) { return nullptr; }), InvalidArgument);
  CHECK_THROWS_AS(register_medium_scheme("Bad Scheme", [](const MediumRequest&) { return nullptr; }),
                  InvalidArgument);

  test::TempDir dir;
  const std::string uri = "file://" + (dir / "store").string();
  Store::open(uri, {.create = true}).save(std::string("on disk"), {.name = "d"});
  CHECK(Store::open(dir / "store").load<std::string>("d") == "on disk");
  CHECK(Store::open({.uri = uri}).load<std::string>("d") == "on disk");
  CHECK_THROWS_AS(Store::open({.uri = "file://relative/path"}), InvalidArgument);
  CHECK_THROWS_AS(Store::open({.medium = testing::make_memory_medium(), .uri = uri}), InvalidArgument);
  CHECK_THROWS_AS(Store::open(Store::OpenOptions{}), InvalidArgument);
  // A medium that is not a store yet is refused unless asked to create one.
  CHECK_THROWS_WITH(Store::open({.medium = testing::make_memory_medium("empty")}),
                    Catch::Contains("not an Amphora store"));
}

TEST_CASE("Pipeline: a cache hit whose output a gc collects before it is named reruns the step", "[storage][gc][pipeline]") {
  // `gc --keep-last 1` from another process, between the run finding an
  // older entry (a parameter set back) and naming its output again: the
  // entry and its output are gone, so the step computes it once more.
  auto faulty = std::make_shared<testing::FaultMedium>(testing::make_memory_medium());
  Store store = Store::open({.create = true, .medium = faulty});
  int calls = 0;
  Pipeline p("p");
  p.step({.name = "one", .params = {{"v", 1}}}, [&calls](const StepContext& c) {
    ++calls;
    return c.param<std::int64_t>("v") * 10;
  });
  REQUIRE(p.run(store, {.params = {{"one", {{"v", 1}}}}}).ok);
  REQUIRE(p.run(store, {.params = {{"one", {{"v", 2}}}}}).ok);
  const Digest first = store.resolve("p.one.out@1");
  // The lease a run takes to name an output: the gc gets there first.
  faulty->on("before:lease", [&, &store = store] {
    CHECK(store.gc(false, std::chrono::seconds(0), 1).removed.size() == 1);
  }, "gc");
  const auto run = p.run(store, {.params = {{"one", {{"v", 1}}}}});
  REQUIRE(faulty->triggered() == 1);
  INFO(run.steps.front().reason);
  CHECK(run.ok);
  CHECK(run.steps.front().status == "ran");
  CHECK_THAT(run.steps.front().reason, Catch::Contains("cache entry unusable"));
  CHECK(calls == 3);
  CHECK(store.load<std::int64_t>("p.one.out") == 10);
  CHECK(store.resolve("p.one.out") == first);
  CHECK(store.verify().ok());
}
