// Store::remove: dropping names and versions, what gc then frees, and the
// rule that a version number is never issued twice.

#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

Tensor tensor(std::uint64_t seed) { return test::random_tensor(DType::int32, {256}, seed); }

std::vector<std::uint64_t> numbers(const std::vector<VersionInfo>& infos) {
  std::vector<std::uint64_t> out;
  for (const auto& v : infos) out.push_back(v.version);
  return out;
}

}  // namespace

TEST_CASE("remove drops one version or a whole name", "[store][remove]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  auto v1 = store.save(tensor(1), {.name = "emb"});
  auto v2 = store.save(tensor(2), {.name = "emb"});
  auto v3 = store.save(tensor(3), {.name = "emb"});
  store.save(tensor(4), {.name = "other"});

  auto removed = store.remove("emb", 2);
  REQUIRE(removed.size() == 1);
  CHECK(removed[0].name == "emb");
  CHECK(removed[0].version == 2);
  CHECK(removed[0].digest == v2.digest);
  CHECK(numbers(store.versions("emb")) == std::vector<std::uint64_t>{1, 3});
  CHECK_THROWS_AS(store.resolve("emb@2"), NotFound);
  CHECK(store.resolve("emb") == v3.digest);

  removed = store.remove("emb");
  CHECK(numbers(removed) == std::vector<std::uint64_t>{1, 3});
  CHECK(removed[0].digest == v1.digest);
  CHECK(store.names() == std::vector<std::string>{"other"});
  CHECK_THROWS_AS(store.versions("emb"), NotFound);
  CHECK_THROWS_AS(store.resolve("emb"), NotFound);
  CHECK(store.scan_names().problems.empty());
  CHECK(store.verify().ok());
}

TEST_CASE("A name resolves to its latest version as other handles on the store add and remove versions",
          "[store][remove]") {
  // The reader remembers the digest of a version it read; what it must not
  // remember is which version is the latest.
  test::TempDir dir;
  Store writer = test::make_store(dir.path());
  Store reader = Store::open(dir.path());
  auto v1 = writer.save(tensor(1), {.name = "emb"});
  CHECK(reader.resolve("emb") == v1.digest);
  auto v2 = writer.save(tensor(2), {.name = "emb"});
  CHECK(reader.resolve("emb") == v2.digest);
  CHECK(reader.load<Tensor>("emb").bit_equal(tensor(2)));
  writer.remove("emb", 2);
  CHECK(reader.resolve("emb") == v1.digest);
  CHECK_THROWS_AS(reader.resolve("emb@2"), NotFound);
  auto v3 = writer.save(tensor(3), {.name = "emb"});
  CHECK(reader.resolve("emb") == v3.digest);
  writer.remove("emb");
  CHECK_THROWS_AS(reader.resolve("emb"), NotFound);
  // A latest record the reader has not read yet is checked when it is read.
  writer.save(tensor(4), {.name = "emb"});
  const auto record = dir.path() / "names" / "emb" / "4.json";
  REQUIRE(fs::exists(record));
  test::write_text(record, "{\"digest\": \"sha256:nothex\"}\n");
  CHECK_THROWS_WITH(reader.resolve("emb"), Catch::Contains("name record emb@4 has no valid digest"));
}

TEST_CASE("remove of what does not exist is NotFound, naming the store and the ref", "[store][remove]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  store.save(tensor(1), {.name = "emb"});
  CHECK_THROWS_MATCHES(store.remove("emb", 7), NotFound,
                       Catch::Matchers::Predicate<std::exception>([&](const std::exception& e) {
                         std::string m = e.what();
                         return m.find("'emb'") != std::string::npos && m.find("version 7") != std::string::npos &&
                                m.find(dir.path().string()) != std::string::npos;
                       }));
  CHECK_THROWS_AS(store.remove("nosuch"), NotFound);
  CHECK_THROWS_AS(store.remove("nosuch", 1), NotFound);
  CHECK_THROWS_AS(store.remove("../escape"), InvalidArgument);
  store.remove("emb", 1);
  CHECK_THROWS_AS(store.remove("emb", 1), NotFound);
  CHECK_THROWS_AS(store.remove("emb"), NotFound);  // a name with no version left is no name
}

TEST_CASE("Version numbers are never issued again after remove", "[store][remove]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  for (int i = 0; i < 3; ++i) store.save(tensor(i), {.name = "emb"});

  SECTION("removing the latest version") {
    store.remove("emb", 3);
    CHECK(store.save(tensor(10), {.name = "emb"}).version == 4);
    store.remove("emb", 4);
    store.remove("emb", 2);
    CHECK(store.save(tensor(11), {.name = "emb"}).version == 5);
    CHECK(numbers(store.versions("emb")) == std::vector<std::uint64_t>{1, 5});
  }
  SECTION("removing every version") {
    store.remove("emb");
    CHECK(store.save(tensor(10), {.name = "emb"}).version == 4);
    CHECK(numbers(store.remove("emb")) == std::vector<std::uint64_t>{4});
    CHECK(store.save(tensor(11), {.name = "emb"}).version == 5);
  }
  SECTION("an equal value saved again is a new version, not the removed one") {
    store.remove("emb", 3);
    auto again = store.save(tensor(2), {.name = "emb"});
    CHECK(again.version == 4);
    CHECK_FALSE(again.created);
  }
  SECTION("a reopened store keeps the rule") {
    store.remove("emb");
    Store reopened = test::make_store(dir.path());
    CHECK(reopened.save(tensor(10), {.name = "emb"}).version == 4);
  }
  SECTION("a store numbering on from what it issued sees what others issued and removed meanwhile") {
    // `store` issued 1-3 itself; `other` stands for another process.
    Store other = test::make_store(dir.path());
    CHECK(other.save(tensor(20), {.name = "emb"}).version == 4);
    CHECK(store.save(tensor(21), {.name = "emb"}).version == 5);  // 4 is taken: it lists
    CHECK(other.save(tensor(22), {.name = "emb"}).version == 6);
    other.remove("emb", 6);                                        // 6 is gone, but was issued
    CHECK(store.save(tensor(23), {.name = "emb"}).version == 7);
    other.remove("emb", 7);
    other.remove("emb", 5);
    CHECK(store.save(tensor(24), {.name = "emb"}).version == 8);
    CHECK(numbers(store.versions("emb")) == std::vector<std::uint64_t>{1, 2, 3, 4, 8});
  }
  // Only names the store's numbering file; nothing lists it as a version or a name.
  CHECK(store.scan_names().problems.empty());
  CHECK(store.verify().ok());
}

TEST_CASE("gc after remove frees what only the removed versions reached", "[store][remove][gc]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  auto only = store.save(tensor(1), {.name = "emb"});       // reached by emb@1 only
  auto shared = store.save(tensor(2), {.name = "emb"});     // emb@2 and keep@1
  store.save(tensor(2), {.name = "keep"});
  auto again = store.save(tensor(3), {.name = "emb"});      // emb@3 and emb@4
  store.save(tensor(3), {.name = "emb"});

  store.remove("emb", 1);
  store.remove("emb", 2);
  store.remove("emb", 3);
  // Everything here was saved moments ago: within the default grace period
  // gc keeps it, with no grace it takes what no name reaches.
  CHECK(store.gc().removed.empty());
  const std::chrono::seconds no_grace(0);
  auto report = store.gc(false, no_grace);
  CHECK(report.removed == std::vector<Digest>{only.digest});
  std::vector<Digest> left = {shared.digest, again.digest};
  std::sort(left.begin(), left.end());
  CHECK(store.artifacts() == left);

  store.remove("emb");
  CHECK(store.gc(false, no_grace).removed == std::vector<Digest>{again.digest});
  CHECK(store.artifacts() == std::vector<Digest>{shared.digest});
  CHECK(store.load<Tensor>("keep").bit_equal(tensor(2)));
  CHECK(store.verify().ok());
}

TEST_CASE("remove drops an unreadable record, which lets gc run again", "[store][remove]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  store.save(tensor(1), {.name = "emb"});
  store.save(tensor(2), {.name = "emb"});
  test::write_text(dir / "names/emb/2.json", "{not json");
  CHECK_THROWS_AS(store.gc(), CorruptData);
  auto removed = store.remove("emb", 2);
  REQUIRE(removed.size() == 1);
  CHECK(removed[0].record.is_null());
  CHECK(removed[0].digest == Digest());
  CHECK_NOTHROW(store.gc());
  CHECK(store.save(tensor(3), {.name = "emb"}).version == 3);
}

TEST_CASE("A damaged tombstone stops numbering that name, and only that name", "[store][remove]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  store.save(tensor(1), {.name = "emb"});
  store.save(tensor(2), {.name = "emb"});
  store.remove("emb", 2);
  REQUIRE(fs::is_regular_file(dir / "names/emb/tombstone.json"));
  CHECK(nlohmann::json::parse(test::read_text(dir / "names/emb/tombstone.json")) ==
        nlohmann::json{{"highest_version", 2}});

  for (const char* bad : {"", "[]", "{\"highest_version\": -1}", "{\"highest_version\": 0}", "{\"other\": 3}"}) {
    INFO(bad);
    test::write_text(dir / "names/emb/tombstone.json", bad);
    CHECK_THROWS_WITH(store.save(tensor(3), {.name = "emb"}), Catch::Contains("tombstone.json"));
    CHECK_THROWS_AS(store.save(tensor(3), {.name = "emb"}), CorruptData);
    CHECK_THROWS_AS(store.remove("emb", 1), CorruptData);
  }
  // Listing, verify and gc do not depend on it; other names are unaffected.
  CHECK(numbers(store.versions("emb")) == std::vector<std::uint64_t>{1});
  CHECK(store.verify().ok());
  CHECK_NOTHROW(store.gc());
  CHECK(store.save(tensor(3), {.name = "other"}).version == 1);
  test::write_text(dir / "names/emb/tombstone.json", "{\"highest_version\": 9}\n");
  CHECK(store.save(tensor(3), {.name = "emb"}).version == 10);
}

TEST_CASE("Savers racing a remover never get a version twice", "[store][remove][concurrency]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  constexpr int kSavers = 3;
  const int each = 15 * test::scale();
  std::atomic<int> running{kSavers};
  std::vector<std::vector<std::uint64_t>> issued(kSavers);
  std::vector<std::thread> threads;
  for (int t = 0; t < kSavers; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < each; ++i)
        issued[t].push_back(store.save(tensor(static_cast<std::uint64_t>(t * 1000 + i)), {.name = "hot"}).version);
      --running;
    });
  // The remover keeps dropping the latest version (or all of them), the case
  // where a careless numbering would hand the same number out again.
  std::vector<std::uint64_t> removed;
  threads.emplace_back([&] {
    for (int round = 0; running > 0; ++round) {
      try {
        auto versions = store.versions("hot");
        auto gone = round % 5 == 4 ? store.remove("hot") : store.remove("hot", versions.back().version);
        for (const auto& v : gone) removed.push_back(v.version);
      } catch (const NotFound&) {
        std::this_thread::yield();  // nothing to remove yet, or removed meanwhile
      }
    }
  });
  for (auto& th : threads) th.join();

  std::multiset<std::uint64_t> all;
  for (const auto& list : issued) all.insert(list.begin(), list.end());
  std::set<std::uint64_t> distinct(all.begin(), all.end());
  CHECK(distinct.size() == all.size());
  CHECK(all.size() == static_cast<std::size_t>(kSavers * each));
  for (auto v : removed) CHECK(distinct.count(v) == 1);  // only issued versions were removed, each once
  CHECK(std::set<std::uint64_t>(removed.begin(), removed.end()).size() == removed.size());
  // Each saver's own versions increase: a number is never handed out below one already issued.
  for (const auto& list : issued) CHECK(std::is_sorted(list.begin(), list.end()));
  auto next = store.save(tensor(99999), {.name = "hot"}).version;
  CHECK(next > *distinct.rbegin());
  CHECK(store.scan_names().problems.empty());
  CHECK(store.verify().ok());
}

TEST_CASE("remove in a durable store", "[store][remove]") {
  test::TempDir dir;
  Store store = Store::open(dir.path(), {.create = true, .durable = true});
  store.save(tensor(1), {.name = "emb"});
  store.save(tensor(2), {.name = "emb"});
  CHECK(numbers(store.remove("emb", 2)) == std::vector<std::uint64_t>{2});
  CHECK(store.save(tensor(3), {.name = "emb"}).version == 3);
  CHECK(numbers(store.remove("emb")) == std::vector<std::uint64_t>{1, 3});
  CHECK(store.save(tensor(4), {.name = "emb"}).version == 4);
}
