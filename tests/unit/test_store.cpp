#include "support.hpp"

#include <catch2/catch.hpp>

#include <sys/file.h>
#include <fcntl.h>
#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <unistd.h>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

struct Note {
  std::string text;
};
struct NoteV2 {
  std::string text;
};
struct NotRegistered {};

}  // namespace

template <>
struct amphora::materializer<Note> {
  static constexpr std::string_view name = "test.note";
  static constexpr int version = 1;
  static void save(const Note& n, ArtifactWriter& out) {
    out.write_file("note.txt", ConstBytes(reinterpret_cast<const std::byte*>(n.text.data()), n.text.size()));
    out.meta()["length"] = n.text.size();
  }
  static Note load(const ArtifactReader& in) {
    auto b = in.map("note.txt");
    return {std::string(reinterpret_cast<const char*>(b->data()), b->size())};
  }
};

template <>
struct amphora::materializer<NoteV2> {
  static constexpr std::string_view name = "test.note";
  static constexpr int version = 2;
  static void save(const NoteV2& n, ArtifactWriter& out) { materializer<Note>::save({n.text}, out); }
  static NoteV2 load(const ArtifactReader& in) { return {materializer<Note>::load(in).text}; }
};

static_assert(Materializable<Tensor>);
static_assert(Materializable<Note>);
static_assert(Materializable<int>);  // numbers are built in (amphora/everyday.hpp)
static_assert(!Materializable<long long>);  // no dtype: not int64_t on this platform
static_assert(!Materializable<NotRegistered>);

TEST_CASE("Saving equal values deduplicates and names get increasing versions", "[store]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  Tensor t = test::random_tensor(DType::float64, {10, 10}, 1);
  auto a = store.save(t, {.name = "emb"});
  auto b = store.save(Tensor::Make(t.dtype(), t.shape(), t.buffer()), {.name = "emb"});
  auto c = store.save(test::random_tensor(DType::float64, {10, 10}, 2), {.name = "emb"});
  CHECK(a.created);
  CHECK_FALSE(b.created);
  CHECK(a.digest == b.digest);
  CHECK(a.version == 1);
  CHECK(b.version == 2);
  CHECK(c.version == 3);
  CHECK(store.artifacts().size() == 2);
  auto versions = store.versions("emb");
  REQUIRE(versions.size() == 3);
  CHECK(versions[1].record["digest"] == a.digest.str());
  CHECK(versions[1].record["materializer"] == "amphora.tensor");
  CHECK(versions[1].record.contains("created_at"));
  CHECK(store.names() == std::vector<std::string>{"emb"});
  CHECK(store.names_of(a.digest).size() == 2);
}

TEST_CASE("Refs resolve names, versions, digests and prefixes", "[store][refs]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  auto v1 = store.save(test::random_tensor(DType::int32, {4}, 1), {.name = "model"});
  auto v2 = store.save(test::random_tensor(DType::int32, {4}, 2), {.name = "model"});
  CHECK(store.resolve("model") == v2.digest);
  CHECK(store.resolve("model@1") == v1.digest);
  CHECK(store.resolve(v1.digest.str()) == v1.digest);
  CHECK(store.resolve(v1.digest.hex().substr(0, 8)) == v1.digest);
  CHECK(store.resolve("sha256:" + v2.digest.hex().substr(0, 12)) == v2.digest);

  CHECK_THROWS_WITH(store.resolve("model@3"), Catch::Contains("no version 3") && Catch::Contains("latest is 2"));
  CHECK_THROWS_AS(store.resolve("model@0"), InvalidArgument);
  CHECK_THROWS_AS(store.resolve("model@x"), InvalidArgument);
  CHECK_THROWS_AS(store.resolve("nothing"), NotFound);
  CHECK_THROWS_AS(store.resolve("nothing@1"), NotFound);
  CHECK_THROWS_AS(store.resolve(""), InvalidArgument);
  CHECK_THROWS_AS(store.resolve("sha256:abc"), InvalidArgument);
  CHECK_THROWS_AS(store.resolve("sha256:" + std::string(64, '0')), NotFound);
  CHECK_THROWS_AS(store.resolve("../etc"), InvalidArgument);

  // Two artifacts sharing an 8-digit prefix make that prefix ambiguous; the
  // message lists full digests (short ones could be identical too).
  std::string stem = "abcdef12";
  for (char tail : {'1', '2'}) {
    auto art = dir.path() / "objects/sha256/ab" / (stem + std::string(56, tail));
    fs::create_directories(art);
    test::write_text(art / "manifest.json", "{}");
  }
  CHECK_THROWS_WITH(store.resolve(stem), Catch::Contains("ambiguous") && Catch::Contains("2 artifacts") &&
                                             Catch::Contains("sha256:" + stem + std::string(56, '1')) &&
                                             Catch::Contains("sha256:" + stem + std::string(56, '2')));
  // A directory without a manifest is no artifact: it does not make a prefix ambiguous.
  fs::create_directories(dir.path() / "objects/sha256/ab" / (stem + std::string(55, '3') + "4"));
  CHECK_THROWS_WITH(store.resolve(stem), Catch::Contains("2 artifacts"));
  fs::create_directories(dir.path() / "objects/sha256/cd" / ("cdcdcdcd" + std::string(56, '0')));
  CHECK_THROWS_AS(store.resolve("cdcdcdcd"), NotFound);
  // Too short to be a prefix: say how many digits are needed.
  CHECK_THROWS_WITH(store.resolve(v1.digest.hex().substr(0, 6)), Catch::Contains("at least 8 hex digits"));
  CHECK_THROWS_WITH(store.resolve(v1.digest.hex().substr(0, 7)), Catch::Contains("at least 8 hex digits"));
}

TEST_CASE("Names are validated", "[store][refs]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  Tensor t = Tensor::zeros(DType::int8, {1});
  for (const char* bad : {"a/b", "../x", ".hidden", "x@1", "sp ace", "-dash"})
    CHECK_THROWS_AS(store.save(t, {.name = bad}), InvalidArgument);
  CHECK(store.artifacts().empty());  // rejected before anything was written
  CHECK_NOTHROW(store.save(t, {.name = "ok_name-1.2"}));
}

TEST_CASE("The registry keys by type and by stable name", "[registry]") {
  Registry r;
  r.add<Note>();
  CHECK(r.find("test.note")->version == 1);
  CHECK(r.for_type(typeid(Note))->name == "test.note");
  CHECK_THROWS_WITH(r.add<NoteV2>(), Catch::Contains("registered twice") && Catch::Contains("Note") &&
                                         Catch::Contains("NoteV2"));
  CHECK_THROWS_WITH(r.for_type(typeid(NotRegistered)), Catch::Contains("NotRegistered"));
  MaterializerEntry bad;
  bad.name = "NoDots";
  bad.version = 1;
  bad.save = [](const void*, ArtifactWriter&) {};
  bad.load = [](const ArtifactReader&) { return std::shared_ptr<void>(); };
  CHECK_THROWS_WITH(r.add_entry(bad), Catch::Contains("invalid materializer name"));
  CHECK(r.find("test.note")->name == "test.note");  // unchanged by the failures
  CHECK(r.entries().size() == 1);
}

TEST_CASE("Threads adding the defaults to one registry at once each add them once", "[registry][concurrency]") {
  // A registry is shared between threads; two of them asking for the
  // defaults at once must neither fail ("registered twice") nor add twice.
  const std::size_t expected = Registry::with_defaults()->entries().size();
  REQUIRE(expected > 0);
  for (int round = 0; round < 200; ++round) {
    Registry r;
    std::atomic<int> ready{0};
    std::vector<std::string> failures(2);
    auto add = [&](std::size_t k) {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      try {
        r.add_defaults();
      } catch (const std::exception& e) {
        failures[k] = e.what();
      }
    };
    std::thread a(add, 0), b(add, 1);
    a.join();
    b.join();
    INFO("round " << round);
    CHECK(failures == std::vector<std::string>(2));
    REQUIRE(r.entries().size() == expected);
  }
}

TEST_CASE("Loading checks materializer identity and version", "[store][registry]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  store.registry().add<Note>();
  auto note = store.save(Note{"hello"}, {.name = "greeting"});
  CHECK(store.load<Note>("greeting").text == "hello");
  CHECK(store.open_artifact("greeting").meta()["length"] == 5);
  CHECK_THROWS_WITH(store.load<Tensor>("greeting"), Catch::Contains("test.note") && Catch::Contains("amphora.tensor"));
  // store.save(NotRegistered{}) does not compile (tests/compile_fail).

  // A store opened with a registry lacking the materializer says which one is needed.
  Store bare = Store::open(dir.path());
  CHECK_THROWS_WITH(bare.load_erased("greeting"), Catch::Contains("'test.note'") && Catch::Contains("not registered"));

  // Store::open without a registry has the built-ins; a registry without
  // them says to register them, not to write a materializer.
  auto tensor = store.save(test::random_tensor(DType::int8, {3}, 1), {.name = "t"});
  CHECK(bare.registry().find("amphora.tensor") != nullptr);
  CHECK(bare.registry().find("amphora.record_list") != nullptr);
  CHECK_NOTHROW(bare.load_erased("t"));
  Store empty = Store::open(dir.path(), {.registry = std::make_shared<Registry>()});
  CHECK_THROWS_AS(empty.load_erased("t"), Unsupported);
  CHECK_THROWS_WITH(empty.load_erased("t"), Catch::Contains("one of Amphora's built-ins") &&
                                                Catch::Contains("amphora::register_builtins"));
  CHECK(empty.load<Tensor>("t").num_elements() == 3);  // typed loads need no registry
  (void)tensor;

  // An artifact written by a newer format version is refused, not misread.
  auto registry2 = std::make_shared<Registry>();
  registry2->add<NoteV2>();
  Store newer = Store::open(dir.path(), {.registry = registry2});
  auto v2 = newer.save(NoteV2{"from the future"}, {.name = "future"});
  CHECK_THROWS_WITH(store.load<Note>("future"), Catch::Contains("format version 2") && Catch::Contains("newer"));
  (void)note;
  (void)v2;
}

TEST_CASE("Opening a directory that is not a store fails clearly", "[store]") {
  test::TempDir dir;
  CHECK_THROWS_AS(Store::open(dir / "nope"), NotFound);
  CHECK_THROWS_WITH(Store::open(dir / "nope"), Catch::Contains("amphora init"));
  test::write_text(dir / "amphora-store.json", "{\"format\":\"amphora-store\",\"layout_version\":99}");
  CHECK_THROWS_AS(Store::open(dir.path()), Unsupported);
  test::write_text(dir / "amphora-store.json", "garbage");
  CHECK_THROWS_AS(Store::open(dir.path()), CorruptData);
}

TEST_CASE("verify detects every kind of damage", "[store][verify]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  // 20 MiB raw payload: ten 2 MiB pieces.
  auto big = store.save(test::random_tensor(DType::uint8, {20 << 20}, 9), {.name = "big", .options = TensorOptions{Compression::none}});
  auto small = store.save(test::ramp_tensor(300, 1000, 1), {.name = "small", .options = TensorOptions{Compression::lz4}});
  REQUIRE(store.verify().ok());
  CHECK(store.verify().artifacts == 2);

  auto big_file = test::object_dir(dir.path(), big.digest) / "tensor.npy";
  SECTION("a flipped byte names the file and piece") {
    test::flip_byte(big_file, (2u << 20) * 7 + 100);
    auto report = store.verify();
    REQUIRE(report.problems.size() == 1);
    CHECK_THAT(report.problems[0], Catch::Contains(big.digest.str()) && Catch::Contains("tensor.npy") &&
                                       Catch::Contains("piece 7"));
    CHECK(store.verify(std::string_view("small")).ok());
  }
  SECTION("a truncated file") {
    fs::resize_file(big_file, 1000);
    auto report = store.verify("big");
    REQUIRE_FALSE(report.ok());
    CHECK_THAT(report.problems[0], Catch::Contains("1000 bytes"));
    CHECK_THROWS_AS(store.load<Tensor>("big"), CorruptData);
  }
  SECTION("an extra file") {
    test::write_text(test::object_dir(dir.path(), small.digest) / "extra.bin", "x");
    CHECK_THAT(store.verify().problems.at(0), Catch::Contains("unexpected file 'extra.bin'"));
  }
  SECTION("an edited manifest") {
    auto m = test::object_dir(dir.path(), small.digest) / "manifest.json";
    fs::permissions(m, fs::perms::owner_write, fs::perm_options::add);
    auto text = test::read_text(m);
    text.replace(text.find("\"int32\""), 7, "\"uint32\"");
    test::write_text(m, text);
    CHECK_THAT(store.verify().problems.at(0), Catch::Contains("does not hash to the artifact's digest"));
  }
  SECTION("a name pointing nowhere") {
    fs::remove_all(test::object_dir(dir.path(), small.digest));
    auto report = store.verify();
    REQUIRE(report.problems.size() == 1);
    CHECK_THAT(report.problems[0], Catch::Contains("small@1") && Catch::Contains("missing"));
  }
}

TEST_CASE("gc removes only what no name reaches", "[store][gc]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  auto named = store.save(test::random_tensor(DType::int16, {100}, 1), {.name = "keep"});
  auto loose = store.save(test::random_tensor(DType::int16, {100}, 2));
  // Unnamed but young: the grace period keeps it (a save may be about to name it).
  auto within_grace = store.gc();
  CHECK(within_grace.removed.empty());
  CHECK(within_grace.young == 1);
  CHECK(within_grace.kept == 2);
  const std::chrono::seconds no_grace(0);
  auto dry = store.gc(true, no_grace);
  CHECK(dry.removed == std::vector<Digest>{loose.digest});
  CHECK(dry.bytes_freed > 0);
  CHECK(store.artifacts().size() == 2);
  auto real = store.gc(false, no_grace);
  CHECK(real.removed == std::vector<Digest>{loose.digest});
  CHECK(real.kept == 1);
  CHECK(store.artifacts() == std::vector<Digest>{named.digest});
  CHECK(store.load<Tensor>("keep").num_elements() == 100);
  CHECK(store.verify().ok());
}

TEST_CASE("gc sweeps abandoned staging but not a live writer's", "[store][gc]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  // An abandoned staging area: its lock file is not held by anyone.
  fs::create_directories(dir / "tmp/stage-1-dead/sub");
  test::write_text(dir / "tmp/stage-1-dead/sub/x.bin", std::string(1000, 'x'));
  test::write_text(dir / "tmp/stage-1-dead.lock", "");
  // A live one: the lock is held.
  fs::create_directories(dir / "tmp/stage-2-live");
  test::write_text(dir / "tmp/stage-2-live.lock", "");
  int fd = ::open((dir / "tmp/stage-2-live.lock").c_str(), O_RDWR);
  REQUIRE(::flock(fd, LOCK_EX) == 0);

  auto report = store.gc(false, std::chrono::seconds(0));
  CHECK(report.staging.removed == 1);
  CHECK(report.staging.in_use == 1);
  CHECK_FALSE(fs::exists(dir / "tmp/stage-1-dead"));
  CHECK_FALSE(fs::exists(dir / "tmp/stage-1-dead.lock"));
  CHECK(fs::exists(dir / "tmp/stage-2-live"));
  ::close(fd);
  // With the default grace period even unlocked fresh staging areas stay.
  fs::create_directories(dir / "tmp/stage-3-fresh");
  test::write_text(dir / "tmp/stage-3-fresh.lock", "");
  CHECK(store.gc().staging.removed == 0);
  CHECK(fs::exists(dir / "tmp/stage-3-fresh"));
}

TEST_CASE("gc leaves a staging directory its writer holds locked and sweeps an unheld one", "[store][gc]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  // Staging areas lock their own directory: a held one stays however old,
  // an unheld one goes once past the grace period.
  fs::create_directories(dir / "tmp/stage-4-live/sub");
  int dir_fd = ::open((dir / "tmp/stage-4-live").c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(::flock(dir_fd, LOCK_EX) == 0);
  fs::create_directories(dir / "tmp/stage-5-dead/sub");
  test::write_text(dir / "tmp/stage-5-dead/sub/x.bin", std::string(1000, 'x'));
  auto report = store.gc(false, std::chrono::seconds(0));
  CHECK(report.staging.removed == 1);
  CHECK(report.staging.in_use == 1);
  CHECK(fs::exists(dir / "tmp/stage-4-live/sub"));
  CHECK_FALSE(fs::exists(dir / "tmp/stage-5-dead"));
  ::close(dir_fd);
  CHECK(store.gc(false, std::chrono::seconds(0)).staging.removed == 1);
  CHECK_FALSE(fs::exists(dir / "tmp/stage-4-live"));
  // A real save leaves no lock file behind in tmp/.
  store.save(test::random_tensor(DType::float32, {16}, 1), {.name = "x"});
  for (const auto& e : fs::directory_iterator(dir / "tmp")) CHECK_FALSE(e.path().extension() == ".lock");
}

TEST_CASE("Threads saving under one name get distinct versions", "[store][concurrency]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  constexpr int kThreads = 4, kEach = 10;
  std::vector<std::thread> threads;
  std::vector<std::vector<SaveResult>> results(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i)
        results[t].push_back(store.save(test::random_tensor(DType::float32, {64}, t * 1000 + i), {.name = "shared"}));
    });
  for (auto& th : threads) th.join();
  std::set<std::uint64_t> versions;
  for (const auto& r : results)
    for (const auto& s : r) {
      versions.insert(s.version);
      CHECK(store.resolve("shared@" + std::to_string(s.version)) == s.digest);
    }
  CHECK(versions.size() == kThreads * kEach);
  CHECK(*versions.rbegin() == kThreads * kEach);
  CHECK(store.verify().ok());
}

TEST_CASE("A failing materializer leaves nothing behind", "[store]") {
  struct Broken {};
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  MaterializerEntry e;
  e.name = "test.broken";
  e.version = 1;
  e.type = typeid(Broken);
  e.save = [](const void*, ArtifactWriter& out) {
    out.write_file("part.bin", ConstBytes());
    throw InvalidArgument("materializer gave up");
  };
  e.load = [](const ArtifactReader&) -> std::shared_ptr<void> { return nullptr; };
  store.registry().add_entry(e);
  const Broken broken;
  CHECK_THROWS_WITH(store.save_erased(e, &broken, {.name = "b"}), "materializer gave up");
  CHECK(store.artifacts().empty());
  CHECK(store.names().empty());
  CHECK(fs::is_empty(dir / "tmp"));

  MaterializerEntry escape = e;
  escape.name = "test.escape";
  escape.type = typeid(NotRegistered);
  escape.save = [](const void*, ArtifactWriter& out) { out.write_file("../evil", ConstBytes()); };
  store.registry().add_entry(escape);
  const NotRegistered value;
  CHECK_THROWS_WITH(store.save_erased(escape, &value, {}), Catch::Contains("'..' component"));
  CHECK_FALSE(fs::exists(dir / "evil"));
  CHECK_FALSE(fs::exists(dir / "tmp/evil"));
}

TEST_CASE("A durable store flushes and still behaves the same", "[store]") {
  struct Nested {};
  test::TempDir dir;
  Store store = Store::open(dir.path(), {.create = true, .registry = Registry::with_defaults(), .durable = true});
  MaterializerEntry e;
  e.name = "test.nested";
  e.version = 1;
  e.type = typeid(Nested);
  e.save = [](const void*, ArtifactWriter& out) {
    out.write_file("a/b/c.bin", ConstBytes(reinterpret_cast<const std::byte*>("abc"), 3));
    out.write_file("top.bin", ConstBytes());
  };
  e.load = [](const ArtifactReader& in) -> std::shared_ptr<void> {
    if (in.map("a/b/c.bin")->size() != 3) throw CorruptData("short");
    return std::make_shared<Nested>();
  };
  store.registry().add_entry(e);
  Tensor t = test::random_tensor(DType::float32, {300, 300}, 1);
  auto saved = store.save(t, {.name = "t"});
  const Nested value;
  auto nested = store.save_erased(e, &value, {.name = "n"});
  CHECK(store.load<Tensor>("t").bit_equal(t));
  CHECK(store.load_erased("n") != nullptr);
  CHECK(store.verify().ok());
  fs::remove(test::object_dir(dir.path(), saved.digest) / "tensor.npy");
  CHECK(store.save(t, {.name = "t"}).created);  // repaired
  CHECK(store.verify().ok());
  CHECK(store.gc().kept == 2);
  (void)nested;
}

TEST_CASE("Saving reports progress in uncompressed .npy bytes", "[store]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  for (Compression c : {Compression::none, Compression::lz4}) {
    std::vector<std::uint64_t> seen;
    SaveOptions options;
    options.options = TensorOptions{c};
    options.progress = [&](std::uint64_t done) { seen.push_back(done); };
    Tensor t = test::ramp_tensor(2048, 2048, 3);  // 16 MiB
    auto saved = store.save(t, options);
    REQUIRE_FALSE(seen.empty());
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    // Raw or compressed, progress ends at the size of the .npy the tensor is
    // (what `amphora import` compares it with), not at the bytes written.
    CHECK(seen.back() == 4096 + t.nbytes());
    if (c == Compression::lz4) CHECK(store.open_artifact(saved.digest.str()).manifest().payload_bytes() < t.nbytes());
  }
}

TEST_CASE("Loading and opening by Digest needs no ref parsing", "[store][refs]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  Tensor a = test::random_tensor(DType::int32, {8}, 1), b = test::random_tensor(DType::int32, {8}, 2);
  auto sa = store.save(a);
  // A name that reads as a hex prefix of the first digest shadows it as a ref...
  auto sb = store.save(b, {.name = sa.digest.hex().substr(0, 8)});
  CHECK(store.resolve(sa.digest.hex().substr(0, 8)) == sb.digest);
  // ...but never a Digest.
  CHECK(store.load<Tensor>(sa.digest).bit_equal(a));
  CHECK(store.open_artifact(sa.digest).digest() == sa.digest);
  CHECK(store.open_artifact(sb.digest).meta()["dtype"] == "int32");
  Digest missing(Sha256::of("nothing"));
  CHECK_THROWS_AS(store.load<Tensor>(missing), NotFound);
  CHECK_THROWS_WITH(store.open_artifact(missing), Catch::Contains(missing.str()));
}
