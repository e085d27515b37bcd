// Remotes and the copies between a store and its remote (push, pull), on a
// file:// remote here; tests/python/test_remote.py runs the same commands
// against a real S3 server.

#include "support.hpp"

#include <amphora/everyday.hpp>
#include <amphora/storage/s3.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <sys/stat.h>
#include <set>
#include <utility>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

std::string file_url(const fs::path& dir) { return "file://" + fs::absolute(dir).string(); }

// The store layout's folder of an artifact under `root`.
fs::path artifact_dir(const fs::path& root, const Digest& d) { return test::object_dir(root, d); }

// Every distinct artifact the roots reach, themselves included.
std::set<Digest> reachable(const Store& store, std::vector<Digest> pending) {
  std::set<Digest> seen;
  while (!pending.empty()) {
    Digest d = pending.back();
    pending.pop_back();
    if (!seen.insert(d).second) continue;
    for (const auto& child : store.open_artifact(d).manifest().children) pending.push_back(child.digest);
  }
  return seen;
}

// Stores a and b under `dir`, each with the remote `name` at dir/remote.
std::pair<Store, Store> two_stores_sharing(const fs::path& dir, const std::string& name) {
  Store a = test::make_store(dir / "a");
  Store b = test::make_store(dir / "b");
  a.add_remote({name, file_url(dir / "remote"), "", ""});
  b.add_remote({name, file_url(dir / "remote"), "", ""});
  return {std::move(a), std::move(b)};
}

}  // namespace

TEST_CASE("Remotes: added, listed and removed; malformed ones refused", "[remote]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "s");
  CHECK(store.remotes().empty());
  CHECK_THROWS_WITH(store.remote_store(), Catch::Contains("has no remote; add one with `amphora remote add"));

  store.add_remote({"team", "s3://ml-artifacts/amphora", "http://127.0.0.1:9000", "eu-west-1"});
  store.add_remote({"hpc", file_url(dir / "shared"), "", ""});
  auto remotes = store.remotes();
  REQUIRE(remotes.size() == 2);
  CHECK(remotes[0].name == "hpc");
  CHECK(remotes[1].name == "team");
  CHECK(remotes[1].url == "s3://ml-artifacts/amphora");
  CHECK(remotes[1].endpoint == "http://127.0.0.1:9000");
  CHECK(remotes[1].region == "eu-west-1");

  CHECK_THROWS_WITH(store.add_remote({"team", "s3://other", "", ""}), Catch::Contains("has a remote named 'team' already"));
  CHECK_THROWS_AS(store.add_remote({"bad name", "s3://bucket", "", ""}), InvalidArgument);
  CHECK_THROWS_WITH(store.add_remote({"x", "http://host/bucket", "", ""}), Catch::Contains("must be s3://BUCKET/PREFIX or file:///PATH"));
  CHECK_THROWS_WITH(store.add_remote({"x", "s3://Bad_Bucket/p", "", ""}), Catch::Contains("invalid bucket name"));
  CHECK_THROWS_WITH(store.add_remote({"x", "s3://bucket/a/../b", "", ""}), Catch::Contains("invalid key prefix"));
  CHECK_THROWS_WITH(store.add_remote({"x", "s3://bucket/p?endpoint=http://h", "", ""}), Catch::Contains("as options"));
  CHECK_THROWS_WITH(store.add_remote({"x", "s3://bucket", "ftp://host", ""}), Catch::Contains("http:// or https://"));
  CHECK_THROWS_WITH(store.add_remote({"x", "file://relative/dir", "", ""}), Catch::Contains("absolute path"));
  CHECK_THROWS_WITH(store.add_remote({"x", file_url(dir / "r"), "http://h", ""}), Catch::Contains("for s3:// only"));
  CHECK(store.remotes().size() == 2);

  // Two remotes: which one must be said.
  CHECK_THROWS_WITH(store.remote_store(), Catch::Contains("2 remotes (hpc, team)"));
  CHECK_THROWS_WITH(store.remote_store("nope"), Catch::Contains("no remote named 'nope'"));
  // A remote no one pushed to holds no store yet.
  CHECK_THROWS_WITH(store.remote_store("hpc"), Catch::Contains("holds no store yet"));

  // Credentials are never recorded.
  ::setenv("AWS_SECRET_ACCESS_KEY", "do-not-record-this-secret", 1);
  store.add_remote({"third", "s3://bucket-three", "", ""});
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  const std::string record = test::read_text(dir / "s" / "remotes.json");
  CHECK(record.find("do-not-record") == std::string::npos);
  CHECK(record.find("ml-artifacts") != std::string::npos);

  store.remove_remote("team");
  CHECK_THROWS_AS(store.remove_remote("team"), NotFound);
  CHECK(store.remotes().size() == 2);
  // A damaged record is named, not ignored.
  test::write_text(dir / "s" / "remotes.json", "{\"remotes\": [1, 2]}");
  CHECK_THROWS_WITH(store.remotes(), Catch::Contains("remotes.json has no \"remotes\" object"));
  // Nor is one that is no small regular file: never followed, read or waited on.
  const fs::path record_path = dir / "s" / "remotes.json";
  test::write_text(dir / "outside.json", "{\"remotes\": {\"evil\": {\"url\": \"s3://evil\"}}}");
  fs::remove(record_path);
  fs::create_symlink(dir / "outside.json", record_path);
  CHECK_THROWS_AS(store.remotes(), CorruptData);
  CHECK_THROWS_AS(store.add_remote({"x", "s3://bucket", "", ""}), CorruptData);
  fs::remove(record_path);
  REQUIRE(::mkfifo(record_path.c_str(), 0600) == 0);
  CHECK_THROWS_AS(store.remotes(), CorruptData);
  fs::remove(record_path);
  test::write_text(record_path, "{\"remotes\": {}, \"pad\": \"" + std::string(2u << 20, 'x') + "\"}");
  CHECK_THROWS_WITH(store.remotes(), Catch::Contains("remotes.json"));
  test::write_text(record_path, "{\"remotes\": {\"tru");  // truncated
  CHECK_THROWS_AS(store.remotes(), CorruptData);
  fs::remove(record_path);
  CHECK(store.remotes().empty());
}

TEST_CASE("Remotes: push and pull copy trees and names, and only what is missing", "[remote]") {
  test::TempDir dir;
  auto [a, b] = two_stores_sharing(dir.path(), "shared");

  const Tensor big = test::random_tensor(DType::float32, {3 << 20}, 1);  // 12 MiB: several pieces, two chunks
  const Tensor small = test::random_tensor(DType::int64, {17}, 2);
  const auto v1 = a.save(big, {.name = "model"});
  const auto list = a.save(std::vector<Tensor>{small, small, big}, {.name = "bundle"});  // children shared twice
  const auto v2 = a.save(small, {.name = "model"});

  auto pushed = a.push();
  const auto everything = reachable(a, {v1.digest, list.digest, v2.digest});
  REQUIRE(everything.size() >= 3);
  CHECK(pushed.artifacts_copied == everything.size());
  CHECK(pushed.artifacts_present == 0);
  CHECK(pushed.bytes_copied > (12u << 20));
  CHECK(pushed.remote == "shared");
  REQUIRE(pushed.named.size() == 3);
  Store remote = a.remote_store();
  CHECK(remote.verify().ok());
  CHECK(remote.version_numbers("model") == std::vector<std::uint64_t>{1, 2});
  CHECK(remote.resolve("model@1") == v1.digest);
  CHECK(remote.resolve("model") == v2.digest);
  CHECK(remote.resolve("bundle") == list.digest);
  CHECK(remote.versions("model").back().record["pushed_from"]["version"] == 2);

  // Again: nothing to send, nothing to name.
  auto again = a.push();
  CHECK(again.artifacts_copied == 0);
  CHECK(again.artifacts_present == 3);  // the roots, each trusted with its tree
  CHECK(again.named.empty());

  // Pulled into another store: the same values, verified, under the names.
  auto pulled = b.pull({"bundle", "model@1"});
  CHECK(pulled.artifacts_copied == reachable(a, {list.digest, v1.digest}).size());
  CHECK(b.verify().ok());
  auto bundle = b.load<std::vector<Tensor>>("bundle");
  REQUIRE(bundle.size() == 3);
  CHECK(bundle[2].values<float>()[(3 << 20) - 1] == big.values<float>()[(3 << 20) - 1]);
  CHECK(bundle[0].values<std::int64_t>()[16] == small.values<std::int64_t>()[16]);
  CHECK(b.resolve("model") == v1.digest);  // model@1 of the remote, as b's first version
  CHECK(b.versions("model").front().record["pulled_from"]["version"] == 1);
  // model: the remote's latest, small, copied and recorded as b's model@2.
  const bool had_small = b.contains(v2.digest);
  auto latest = b.pull({"model"});
  CHECK(latest.artifacts_copied == (had_small ? 0u : 1u));
  CHECK(latest.artifacts_present == (had_small ? 1u : 0u));
  REQUIRE(latest.named.size() == 1);
  CHECK(b.resolve("model") == v2.digest);
  CHECK(b.pull({"model"}).named.empty());
  // By digest: copies, names nothing.
  CHECK(b.pull({v1.digest.str()}).named.empty());

  CHECK_THROWS_WITH(b.pull({"nothing-here"}), Catch::Contains("remote 'shared'"));
  CHECK_THROWS_AS(b.pull({}), InvalidArgument);
}

TEST_CASE("Remotes: a name set back to an older value is pushed as the remote's latest", "[remote]") {
  test::TempDir dir;
  Store a = test::make_store(dir / "a");
  a.add_remote({"r", file_url(dir / "remote"), "", ""});
  const auto x = a.save(std::string("x"), {.name = "n"});
  const auto y = a.save(std::string("y"), {.name = "n"});
  a.push();
  a.save(std::string("x"), {.name = "n"});  // back to x
  auto report = a.push();
  REQUIRE(report.named.size() == 1);
  Store remote = a.remote_store();
  CHECK(remote.resolve("n") == x.digest);
  CHECK(remote.version_numbers("n") == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(a.push().named.empty());
  // An explicit NAME@N is pushed only when no remote version has its digest.
  CHECK(a.push({"n@2"}).named.empty());
  CHECK(remote.resolve("n@2") == y.digest);
}

TEST_CASE("Remotes: a damaged copy is never published at the other end", "[remote]") {
  test::TempDir dir;
  auto [a, b] = two_stores_sharing(dir.path(), "r");
  const Tensor t = test::random_tensor(DType::float64, {1 << 19}, 5);  // 4 MiB: two pieces
  const auto saved = a.save(t, {.name = "t"});
  const std::string payload = a.open_artifact(saved.digest).manifest().files.front().path;

  SECTION("a flipped byte in the local copy stops the push, naming the file and piece") {
    test::flip_byte(artifact_dir(dir / "a", saved.digest) / payload, (3u << 20) + 5);
    CHECK_THROWS_WITH(a.push(), Catch::Contains("file '" + payload + "' piece 1") &&
                                    Catch::Contains("does not match its SHA-256"));
    CHECK_FALSE(a.remote_store().contains(saved.digest));
    CHECK(a.remote_store().names().empty());
  }
  SECTION("a flipped byte or a missing file at the remote stops the pull; nothing is published") {
    a.push();
    const fs::path there = artifact_dir(dir / "remote", saved.digest) / payload;
    test::flip_byte(there, 100);
    CHECK_THROWS_WITH(b.pull({"t"}), Catch::Contains("piece 0 (bytes 0 to 2097151)") &&
                                         Catch::Contains("nothing of the artifact was copied"));
    CHECK_FALSE(b.contains(saved.digest));
    CHECK(b.names().empty());
    fs::remove(there);
    CHECK_THROWS_WITH(b.pull({"t"}), Catch::Contains("lacks its file '" + payload + "'"));
    CHECK_FALSE(b.contains(saved.digest));
    CHECK(b.verify().ok());
  }
  SECTION("a manifest at the remote that does not match its digest is refused") {
    a.push();
    test::flip_byte(artifact_dir(dir / "remote", saved.digest) / "manifest.json", 30);
    CHECK_THROWS_AS(b.pull({saved.digest.str()}), CorruptData);
    CHECK_FALSE(b.contains(saved.digest));
  }
}

TEST_CASE("Remotes: a store reads through to its remote what it lacks", "[remote]") {
  test::TempDir dir;
  auto [a, b] = two_stores_sharing(dir.path(), "r");
  const Tensor rows = test::random_tensor(DType::int32, {4096, 64}, 8);
  const auto saved = a.save(rows, {.name = "rows", .options = TensorOptions{.compression = Compression::lz4}});
  const auto other = a.save(std::string("kept there"), {.name = "note"});
  a.push();

  // A partial read opens the artifact on the remote: nothing is copied.
  auto reader = b.open_artifact("rows");
  CHECK(reader.digest() == saved.digest);
  const Tensor some = load_tensor_rows(reader, 1000, 1010);
  REQUIRE(some.shape() == std::vector<std::int64_t>{10, 64});
  for (std::int64_t k = 0; k < 10 * 64; ++k) CHECK(some.values<std::int32_t>()[k] == rows.values<std::int32_t>()[1000 * 64 + k]);
  CHECK_FALSE(b.contains(saved.digest));
  CHECK(b.names().empty());

  // A whole load pulls it, verified, under its name: the next one is local.
  CHECK(b.load<std::string>("note") == "kept there");
  CHECK(b.contains(other.digest));
  CHECK(b.resolve("note") == other.digest);
  CHECK(b.load<Tensor>(saved.digest).values<std::int32_t>()[4095 * 64] == rows.values<std::int32_t>()[4095 * 64]);
  CHECK(b.contains(saved.digest));
  CHECK(b.verify().ok());

  // What neither holds is named as missing in both.
  CHECK_THROWS_WITH(b.open_artifact("absent"), Catch::Contains("no name or artifact 'absent'") &&
                                                   Catch::Contains("nor on its remote"));
  // A store opened not to read through stays local.
  Store local_only = Store::open(dir / "b", {.read_through = false});
  CHECK_THROWS_AS(local_only.open_artifact(a.save(std::string("new"), {.name = "n2"}).digest), NotFound);
  a.push();
  CHECK_THROWS_AS(local_only.load<std::string>("n2"), NotFound);
  CHECK(b.load<std::string>("n2") == "new");
  // Type-erased loads (export, migrate) pull the same way.
  const auto third = a.save(std::string("erased"), {.name = "n3"});
  a.push();
  CHECK_THROWS_AS(local_only.load_erased("n3"), NotFound);
  CHECK(*std::static_pointer_cast<std::string>(b.load_erased("n3")) == "erased");
  CHECK(b.contains(third.digest));
  // The remote read through to is opened once, and followed when it changes.
  const auto fourth = a.save(std::string("only on r"), {.name = "n4"});
  a.push();
  CHECK(b.open_artifact(fourth.digest).digest() == fourth.digest);
  b.remove_remote("r");
  Store elsewhere = test::make_store(dir / "elsewhere");
  (void)elsewhere.save(std::string("other"), {.name = "x"});
  b.add_remote({"r", file_url(dir / "elsewhere"), "", ""});
  CHECK_THROWS_WITH(b.open_artifact(fourth.digest), Catch::Contains("nor on its remote"));
  CHECK(b.load<std::string>("x") == "other");
  b.remove_remote("r");
  CHECK_THROWS_AS(b.open_artifact(fourth.digest), NotFound);
  b.add_remote({"r", file_url(dir / "remote"), "", ""});
  CHECK(b.open_artifact(fourth.digest).digest() == fourth.digest);
}

TEST_CASE("Remotes: a store with several remotes reads through to none and says how to fetch", "[remote]") {
  test::TempDir dir;
  auto [a, b] = two_stores_sharing(dir.path(), "r");
  b.add_remote({"s", file_url(dir / "second"), "", ""});
  const auto there = a.save(std::string("only on r"), {.name = "note"});
  a.push();

  // Which remote holds it would be a guess: a NotFound (not "say which
  // remote", which no load can), naming the remotes and the way to fetch.
  for (const std::string& ref : {std::string("note"), there.digest.str(), std::string("absent")}) {
    INFO(ref);
    CHECK_THROWS_AS(b.open_artifact(ref), NotFound);
    CHECK_THROWS_WITH(b.open_artifact(ref), Catch::Contains("in store") &&
                                                Catch::Contains("the store has 2 remotes (r, s) and reads through to none") &&
                                                Catch::Contains("amphora pull --remote NAME REF") &&
                                                !Catch::Contains("nor on its remote"));
    CHECK_THROWS_AS(b.load<std::string>(ref), NotFound);
    CHECK_THROWS_WITH(b.load_erased(ref), Catch::Contains("reads through to none"));
  }
  CHECK_FALSE(b.contains(there.digest));
  // Opened not to read through, the store says nothing of remotes.
  Store local_only = Store::open(dir / "b", {.read_through = false});
  CHECK_THROWS_WITH(local_only.open_artifact("note"), !Catch::Contains("remotes"));

  // Pulled by name it is here; with one remote left, reads go through again.
  (void)b.pull({"note"}, {.remote = "r"});
  CHECK(b.load<std::string>("note") == "only on r");
  const auto later = a.save(std::string("later"), {.name = "later"});
  a.push();
  b.remove_remote("s");
  CHECK(b.open_artifact(later.digest).digest() == later.digest);
  CHECK(b.load<std::string>("later") == "later");
}
