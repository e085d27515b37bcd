// The store's promises against a hostile store and a careless caller: never
// read or write outside the store, never lose or misreport data, never hang or
// crash, and fail with the right amphora::Error class and a message that says
// what is wrong.

#include "support.hpp"
#include "posix.hpp"
#include "artifact_context.hpp"

#include <amphora/npy.hpp>

#include <catch2/catch.hpp>

#include <csignal>
#include <optional>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

// Fails the test (rather than hanging the suite) if a call blocks.
struct HangGuard {
  explicit HangGuard(unsigned seconds) { ::alarm(seconds); }
  ~HangGuard() { ::alarm(0); }
};

void make_old(const fs::path& p) {
  struct timeval times[2] = {{1000000000, 0}, {1000000000, 0}};
  REQUIRE(::lutimes(p.c_str(), times) == 0);
}

// A materializer for type Tag that only saves, as `save` says.
template <class Tag>
MaterializerEntry saving_entry(std::string name, std::function<void(ArtifactWriter&)> save) {
  MaterializerEntry e;
  e.name = std::move(name);
  e.version = 1;
  e.type = typeid(Tag);
  e.save = [save = std::move(save)](const void*, ArtifactWriter& out) { save(out); };
  e.load = [](const ArtifactReader&) -> std::shared_ptr<void> { return nullptr; };
  return e;
}

// Plants a copy of stored artifact `from` whose payload files are the same
// bytes but whose metadata `lie` has edited, with a correct digest: only a
// structural check can tell it is wrong.
Digest plant_with_edited_meta(const fs::path& store_dir, const Store& store, const Digest& from,
                              const std::function<void(nlohmann::json&)>& lie) {
  Manifest m = store.open_artifact(from).manifest();
  lie(m.meta);
  auto bytes = m.canonical();
  Digest d(Sha256::of(bytes));
  auto obj = test::object_dir(store_dir, d);
  fs::create_directories(obj);
  test::write_text(obj / "manifest.json", bytes);
  for (const auto& f : m.files) fs::copy_file(test::object_dir(store_dir, from) / f.path, obj / f.path);
  return d;
}

struct Unclosed {};
struct BigMeta {};
struct Checked {
  std::string text;
};

}  // namespace

template <>
struct amphora::materializer<Checked> {
  static constexpr std::string_view name = "test.checked";
  static constexpr int version = 1;
  static void save(const Checked& c, ArtifactWriter& out) {
    out.write_file("text.txt", ConstBytes(reinterpret_cast<const std::byte*>(c.text.data()), c.text.size()));
    out.meta()["length"] = c.text.size();
  }
  static Checked load(const ArtifactReader& in) {
    auto b = in.map("text.txt");
    return {std::string(reinterpret_cast<const char*>(b->data()), b->size())};
  }
  // The metadata must agree with the payload: verify runs this.
  static void validate(const ArtifactReader& in) {
    if (in.meta().at("length").get<std::uint64_t>() != in.map("text.txt")->size())
      throw CorruptData(in.label() + ": length in metadata disagrees with text.txt");
  }
};

TEST_CASE("gc never deletes through a symbolic link", "[hardening][symlink]") {
  test::TempDir dir;
  fs::create_directories(dir / "outside/deep");
  test::write_text(dir / "outside/old.txt", "precious");
  test::write_text(dir / "outside/deep/older.txt", "precious too");
  make_old(dir / "outside/old.txt");
  make_old(dir / "outside/deep/older.txt");
  make_old(dir / "outside/deep");

  SECTION("tmp/ replaced by a link, after the store was opened") {
    Store store = test::make_store(dir / "store");
    fs::remove_all(dir / "store/tmp");
    fs::create_directory_symlink(dir / "outside", dir / "store/tmp");
    CHECK_THROWS_AS(store.gc(false, std::chrono::seconds(0)), CorruptData);
    CHECK_THROWS_WITH(store.gc(false, std::chrono::seconds(0)), Catch::Contains("'tmp' is a symbolic link"));
    CHECK(test::read_text(dir / "outside/old.txt") == "precious");
    CHECK(test::read_text(dir / "outside/deep/older.txt") == "precious too");
    // And a store whose structure is a link is refused when opened.
    CHECK_THROWS_WITH(Store::open(dir / "store"), Catch::Contains("'tmp' is a symbolic link"));
    CHECK_THROWS_AS(Store::open(dir / "store"), CorruptData);
  }
  SECTION("tmp/ entries named like staging areas that are links or FIFOs") {
    Store store = test::make_store(dir / "store");
    // gc locks a staging directory before sweeping it: it must never open
    // (and so never lock, follow or block on) what only looks like one.
    fs::create_directory_symlink(dir / "outside", dir / "store/tmp/stage-1-link");
    fs::create_symlink(dir / "outside/old.txt", dir / "store/tmp/stage-2-link.lock");
    REQUIRE(::mkfifo((dir / "store/tmp/stage-3-fifo").c_str(), 0644) == 0);
    auto report = store.gc(false, std::chrono::seconds(0));
    CHECK(report.staging.in_use == 0);
    CHECK(fs::is_empty(dir / "store/tmp"));
    CHECK(test::read_text(dir / "outside/old.txt") == "precious");
    CHECK(test::read_text(dir / "outside/deep/older.txt") == "precious too");
  }
  SECTION("an objects/sha256/XX fan directory replaced by a link") {
    Store store = test::make_store(dir / "store");
    auto victim = dir / "outside" / ("ab" + std::string(62, '0'));
    fs::create_directories(victim);
    test::write_text(victim / "data", "keep me");
    fs::create_directory_symlink(dir / "outside", dir / "store/objects/sha256/ab");
    CHECK_THROWS_WITH(store.gc(), Catch::Contains("objects/sha256/ab is a symbolic link"));
    CHECK(test::read_text(victim / "data") == "keep me");
    auto report = store.verify();
    CHECK_FALSE(report.ok());
  }
}

TEST_CASE("Writes and reads never go through a link elsewhere", "[hardening][symlink]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor t = test::random_tensor(DType::int32, {16}, 1);
  fs::create_directories(dir / "outside");

  SECTION("names/NAME linked outside receives nothing") {
    fs::create_directory_symlink(dir / "outside", dir / "store/names/evil");
    CHECK_THROWS_AS(store.save(t, {.name = "evil"}), CorruptData);
    CHECK(fs::is_empty(dir / "outside"));
    auto scan = store.scan_names();
    REQUIRE(scan.problems.size() == 1);
    CHECK_THAT(scan.problems[0], Catch::Contains("evil"));
  }
  SECTION("a dangling locks/gc.lock link does not create its target") {
    fs::remove(dir / "store/locks/gc.lock");
    fs::create_symlink(dir / "outside/created-by-amphora", dir / "store/locks/gc.lock");
    CHECK_THROWS_AS(store.save(t, {.name = "x"}), CorruptData);
    CHECK_THROWS_AS(store.gc(), CorruptData);
    CHECK_FALSE(fs::exists(dir / "outside/created-by-amphora"));
  }
  SECTION("a name record linked to another file is not read") {
    store.save(t, {.name = "n"});
    test::write_text(dir / "outside/secret.json", "SECRET-CONTENT not json");
    fs::create_symlink(dir / "outside/secret.json", dir / "store/names/n/2.json");
    auto scan = store.scan_names();
    REQUIRE(scan.problems.size() == 1);
    CHECK_THAT(scan.problems[0], Catch::Contains("symbolic link") && !Catch::Contains("SECRET"));
    CHECK(scan.versions.size() == 1);
    CHECK_THROWS_WITH(store.resolve("n"), Catch::Contains("symbolic link") && !Catch::Contains("SECRET"));
    CHECK(store.resolve("n@1") == store.scan_names().versions[0].digest);
  }
  SECTION("the store marker as a link is refused without echoing its target") {
    test::write_text(dir / "outside/marker", "SECRET-CONTENT");
    fs::remove(dir / "store/amphora-store.json");
    fs::create_symlink(dir / "outside/marker", dir / "store/amphora-store.json");
    CHECK_THROWS_AS(Store::open(dir / "store"), CorruptData);
    CHECK_THROWS_WITH(Store::open(dir / "store"), Catch::Contains("symbolic link") && !Catch::Contains("SECRET"));
  }
}

TEST_CASE("A payload replaced by a link of the right size is named as a link", "[hardening][symlink]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor t = test::random_tensor(DType::float32, {64}, 3);
  auto saved = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
  auto payload = test::object_dir(dir / "store", saved.digest) / "tensor.npy";
  // The outside copy holds exactly the right bytes: only the link check can fire.
  fs::copy_file(payload, dir / "copy.npy");
  fs::remove(payload);
  fs::create_symlink(dir / "copy.npy", payload);
  auto report = store.verify("t");
  REQUIRE(report.problems.size() == 1);
  CHECK_THAT(report.problems[0], Catch::Contains("'tensor.npy' is a symbolic link") &&
                                     !Catch::Contains("unexpected") && !Catch::Contains(".."));
  CHECK_THROWS_AS(store.load<Tensor>("t"), CorruptData);
  CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains("'tensor.npy' is a symbolic link"));
  // An unlisted link is reported as an unexpected link, by its own name.
  fs::create_symlink("/etc/passwd", test::object_dir(dir / "store", saved.digest) / "extra");
  auto again = store.verify("t");
  CHECK(std::any_of(again.problems.begin(), again.problems.end(), [](const std::string& p) {
    return p.find("unexpected entry 'extra', a symbolic link") != std::string::npos;
  }));
}

TEST_CASE("FIFOs in a store fail fast instead of blocking", "[hardening][fifo]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor t = test::random_tensor(DType::int32, {64}, 1);
  auto saved = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
  HangGuard guard(60);

  // A FIFO as a payload file: test_bad_input.cpp, "Hostile store contents...".
  SECTION("as a manifest, or a manifest linked out of the store") {
    auto manifest = test::object_dir(dir / "store", saved.digest) / "manifest.json";
    fs::copy_file(manifest, dir / "outside-manifest.json");
    for (bool fifo : {true, false}) {
      fs::remove(manifest);
      if (fifo)
        REQUIRE(::mkfifo(manifest.c_str(), 0644) == 0);
      else
        fs::create_symlink(dir / "outside-manifest.json", manifest);  // the right bytes, outside
      CHECK_THROWS_AS(store.load<Tensor>("t"), CorruptData);
      CHECK_THROWS_WITH(store.load<Tensor>("t"), Catch::Contains(fifo ? "is a FIFO" : "is a symbolic link"));
      CHECK_FALSE(store.verify().ok());
    }
  }
  SECTION("as a name record") {
    REQUIRE(::mkfifo((dir / "store/names/t/2.json").c_str(), 0644) == 0);
    auto scan = store.scan_names();
    REQUIRE(scan.problems.size() == 1);
    CHECK_THAT(scan.problems[0], Catch::Contains("2.json is a FIFO"));
    CHECK(store.names() == std::vector<std::string>{"t"});
    CHECK_FALSE(store.verify().ok());
    CHECK_THROWS_AS(store.gc(), CorruptData);
  }
  SECTION("as the store marker") {
    fs::remove(dir / "store/amphora-store.json");
    REQUIRE(::mkfifo((dir / "store/amphora-store.json").c_str(), 0644) == 0);
    CHECK_THROWS_AS(Store::open(dir / "store"), CorruptData);
    CHECK_THROWS_WITH(Store::open(dir / "store"), Catch::Contains("is a FIFO"));
  }
}

TEST_CASE("Re-saving identical content repairs a copy with a flipped byte", "[hardening][repair]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor t = test::random_tensor(DType::uint8, {5 << 20}, 7);  // three pieces
  auto first = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
  test::flip_byte(test::object_dir(dir / "store", first.digest) / "tensor.npy", (2u << 20) + 12345);
  REQUIRE_FALSE(store.verify("t").ok());
  auto again = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
  CHECK(again.digest == first.digest);
  CHECK(again.created);  // not "identical content was already stored"
  CHECK(store.verify().ok());
  CHECK(store.load<Tensor>("t@1").bit_equal(t));
  // An intact copy is left alone.
  CHECK_FALSE(store.save(t, {.name = "t", .options = TensorOptions{Compression::none}}).created);
}

TEST_CASE("A directory removed while it is listed is NotFound, not an I/O failure", "[hardening][repair]") {
  // What a save checking a damaged copy meets when another thread's repair
  // swaps that copy out and deletes it between the open and the listing.
  test::TempDir dir;
  fs::create_directory(dir / "doomed");
  std::ofstream(dir / "doomed" / "file") << "x";
  amphora::detail::Fd fd(::open((dir / "doomed").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd);
  fs::remove_all(dir / "doomed");
  CHECK_THROWS_AS(amphora::detail::list_names_at(fd.get(), dir / "doomed"), NotFound);
  CHECK_THROWS_WITH(amphora::detail::list_names_at(fd.get(), dir / "doomed"),
                    Catch::Contains("was removed while it was being listed"));
}

TEST_CASE("Two threads repairing one damaged artifact at once", "[hardening][repair][concurrency]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor t = test::random_tensor(DType::float32, {1 << 20}, 5);
  for (int round = 0; round < 3; ++round) {
    auto saved = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
    fs::remove(test::object_dir(dir / "store", saved.digest) / "tensor.npy");
    std::vector<SaveResult> results(2);
    std::thread a([&] { results[0] = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}}); });
    std::thread b([&] { results[1] = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}}); });
    a.join();
    b.join();
    CHECK((results[0].created || results[1].created));
    CHECK(results[0].digest == results[1].digest);
    CHECK(store.verify().ok());
    CHECK(store.load<Tensor>("t").bit_equal(t));
  }
  CHECK(store.gc(false, std::chrono::seconds(0)).kept == 1);
  CHECK(store.verify().ok());
}

TEST_CASE("gc racing writers loses no named artifact", "[hardening][gc][concurrency]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::atomic<bool> done{false};
  std::vector<std::vector<SaveResult>> saved(2);
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w)
    writers.emplace_back([&, w] {
      for (int i = 0; i < 20; ++i) {
        saved[w].push_back(store.save(test::random_tensor(DType::float32, {4096}, w * 1000 + i),
                                      {.name = "w" + std::to_string(w)}));
        store.save(test::random_tensor(DType::float32, {256}, 50000 + w * 1000 + i));  // unnamed: collectable
      }
    });
  std::thread collector([&] {
    while (!done) store.gc(false, std::chrono::seconds(0));
  });
  for (auto& w : writers) w.join();
  done = true;
  collector.join();
  for (const auto& list : saved)
    for (const auto& r : list) CHECK(store.load<Tensor>(r.name + "@" + std::to_string(r.version)).num_elements() == 4096);
  CHECK(store.verify().ok());
}

TEST_CASE("verify runs the materializer's structural validation", "[hardening][verify]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  store.registry().add<Checked>();
  auto good = store.save(Checked{"hello"}, {.name = "c"});
  CHECK(store.verify().ok());

  Digest lying = plant_with_edited_meta(dir / "store", store, good.digest, [](nlohmann::json& meta) { meta["length"] = 99; });
  auto report = store.verify(lying.str());
  REQUIRE(report.problems.size() == 1);
  CHECK_THAT(report.problems[0], Catch::Contains("length in metadata disagrees"));

  // Without the materializer registered, only hashes can be checked: said so.
  Store bare = Store::open(dir / "store");
  auto unchecked = bare.verify(lying.str());
  CHECK(unchecked.ok());
  CHECK(unchecked.structure_unchecked == 1);
}

TEST_CASE("A tensor whose metadata contradicts its payload fails verify", "[hardening][verify]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto saved = store.save(test::random_tensor(DType::float32, {64}, 2), {.options = TensorOptions{Compression::none}});
  // Same size, wrong dtype: the .npy header disagrees.
  Digest lying = plant_with_edited_meta(dir / "store", store, saved.digest, [](nlohmann::json& meta) { meta["dtype"] = "int32"; });
  auto report = store.verify(lying.str());
  REQUIRE(report.problems.size() == 1);
  CHECK_THAT(report.problems[0], Catch::Contains("header does not match"));
}

TEST_CASE("Newer formats are reported as unsupported, not as damage", "[hardening][verify]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::string manifest = R"({"children":[],"files":[],"manifest_version":3,"materializer":{"name":"x.y","version":1},"meta":{}})";
  Digest d(Sha256::of(manifest));
  fs::create_directories(test::object_dir(dir / "store", d));
  test::write_text(test::object_dir(dir / "store", d) / "manifest.json", manifest);
  auto report = store.verify();
  CHECK(report.ok());
  REQUIRE(report.unsupported.size() == 1);
  CHECK_THAT(report.unsupported[0], Catch::Contains("manifest version 3") && Catch::Contains("newer"));
  CHECK_THROWS_AS(store.open_artifact(d.str()), Unsupported);
}

TEST_CASE("Directories without a manifest are reported by verify", "[hardening][verify]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto stray = dir / "store/objects/sha256/12" / ("12" + std::string(62, 'a'));
  fs::create_directories(stray);
  auto report = store.verify();
  REQUIRE(report.problems.size() == 1);
  CHECK_THAT(report.problems[0], Catch::Contains("has no manifest.json"));
}

TEST_CASE("Saves that could not be read back are refused before publishing", "[hardening][save]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor t = test::random_tensor(DType::int8, {8}, 1);

  SECTION("a stream the materializer forgot to close") {
    store.registry().add_entry(saving_entry<Unclosed>("test.unclosed", [](ArtifactWriter& out) {
      out.write_file("a.bin", ConstBytes());
      auto stream = out.open_stream("forgotten.bin");
      stream.append(ConstBytes(reinterpret_cast<const std::byte*>("data"), 4));
    }));
    CHECK_THROWS_AS(test::save_registered(store, Unclosed{}, {.name = "u"}), InvalidArgument);
    CHECK_THROWS_WITH(test::save_registered(store, Unclosed{}, {.name = "u"}), Catch::Contains("'forgotten.bin'") && Catch::Contains("close"));
  }
  SECTION("provenance over the record limit") {
    SaveOptions options{.name = "big"};
    options.provenance = {{"notes", std::string(1100000, 'x')}};
    CHECK_THROWS_AS(store.save(t, options), InvalidArgument);
    CHECK_THROWS_WITH(store.save(t, options), Catch::Contains("1048576"));
  }
  SECTION("a manifest over the manifest limit") {
    store.registry().add_entry(saving_entry<BigMeta>(
        "test.bigmeta", [](ArtifactWriter& out) { out.meta()["blob"] = std::string(Manifest::kMaxBytes, 'm'); }));
    CHECK_THROWS_AS(test::save_registered(store, BigMeta{}), InvalidArgument);
    CHECK_THROWS_WITH(test::save_registered(store, BigMeta{}), Catch::Contains("Manifest::kMaxBytes"));
  }
  SECTION("NaN, infinity or invalid UTF-8 in provenance") {
    SaveOptions nan{.name = "p"};
    nan.provenance = {{"loss", std::nan("")}};
    CHECK_THROWS_WITH(store.save(t, nan), Catch::Contains("provenance at .loss holds NaN"));
    SaveOptions inf{.name = "p"};
    inf.provenance = {{"deep", {{"x", {1.0, INFINITY}}}}};
    CHECK_THROWS_WITH(store.save(t, inf), Catch::Contains(".deep.x[1] holds an infinity"));
    SaveOptions bad{.name = "p"};
    bad.provenance = {{"who", std::string("caf\xe9")}};
    CHECK_THROWS_AS(store.save(t, bad), InvalidArgument);
    CHECK_THROWS_WITH(store.save(t, bad), Catch::Contains("not valid UTF-8"));
  }
  SECTION("NaN or invalid UTF-8 in a materializer's metadata") {
    for (nlohmann::json v : {nlohmann::json(std::nan("")), nlohmann::json(std::string("\xff\xfe"))}) {
      auto registry = std::make_shared<Registry>();
      registry->add_entry(saving_entry<BigMeta>("test.badmeta", [v](ArtifactWriter& out) { out.meta()["value"] = v; }));
      Store s = Store::open(dir / "store", {.registry = registry});
      CHECK_THROWS_AS(test::save_registered(s, BigMeta{}), InvalidArgument);
      CHECK_THROWS_WITH(test::save_registered(s, BigMeta{}), Catch::Contains("metadata at .value"));
    }
  }
  SECTION("a bad payload path is the materializer's mistake, not damaged data") {
    store.registry().add_entry(
        saving_entry<BigMeta>("test.escape", [](ArtifactWriter& out) { out.write_file("../escape", ConstBytes()); }));
    CHECK_THROWS_AS(test::save_registered(store, BigMeta{}), InvalidArgument);
  }
  // Whatever failed, nothing was published or named.
  CHECK(store.artifacts().empty());
  CHECK(store.scan_names().versions.empty());
}

TEST_CASE("One bad name record does not take the store down", "[hardening][names]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto good = store.save(test::random_tensor(DType::int16, {8}, 1), {.name = "good"});
  store.save(test::random_tensor(DType::int16, {8}, 2), {.name = "other"});
  fs::create_directories(dir / "store/names/-x");
  test::write_text(dir / "store/names/-x/1.json", "{}");
  test::write_text(dir / "store/names/other/2.json", "not json");
  test::write_text(dir / "store/names/other/3.json", std::string(2u << 20, ' '));
  fs::create_directories(dir / "store/names/other/4.json");
  test::write_text(dir / "store/names/other/5.json", std::string(200, '[') + std::string(200, ']'));
  test::write_text(dir / "store/names/other/6.json", R"({"digest":"sha256:nothex"})");

  auto scan = store.scan_names();
  CHECK(scan.versions.size() == 2);
  REQUIRE(scan.problems.size() == 6);
  CHECK_THAT(scan.problems[0], Catch::Contains("names/-x") && Catch::Contains("not a valid name"));
  CHECK_THAT(scan.problems[1], Catch::Contains("2.json is not valid JSON"));
  CHECK_THAT(scan.problems[2], Catch::Contains("3.json") && Catch::Contains("more than the 1048576 allowed"));
  CHECK_THAT(scan.problems[3], Catch::Contains("4.json is a directory"));
  CHECK_THAT(scan.problems[4], Catch::Contains("nesting deeper"));
  CHECK_THAT(scan.problems[5], Catch::Contains("other@6 has no valid digest"));
  CHECK(store.names() == std::vector<std::string>{"good", "other"});
  std::vector<std::string> problems;
  CHECK(store.names_of(good.digest, &problems).size() == 1);
  CHECK(problems.size() == 6);
  CHECK(store.load<Tensor>("good").num_elements() == 8);
  CHECK(store.verify().problems.size() == 6);
  CHECK_THROWS_AS(store.gc(), CorruptData);
  CHECK_THROWS_WITH(store.gc(), Catch::Contains("gc refused") && Catch::Contains("names/-x"));
  CHECK(store.artifacts().size() == 2);
}

TEST_CASE("Errors carry the right class", "[hardening][errors]") {
  test::TempDir dir;
  SECTION("a missing store says it is missing and how to create one") {
    CHECK_THROWS_AS(Store::open(dir / "absent"), NotFound);
    CHECK_THROWS_WITH(Store::open(dir / "absent"), Catch::Contains("does not exist") && Catch::Contains(".create = true"));
    fs::create_directories(dir / "empty");
    CHECK_THROWS_WITH(Store::open(dir / "empty"), Catch::Contains("not an Amphora store") && Catch::Contains(".create = true"));
  }
  SECTION("a file where a store should be is an invalid argument, created or not, and left alone") {
    test::write_text(dir / "file", "mine");
    for (bool create : {false, true}) {
      CHECK_THROWS_AS(Store::open(dir / "file", {.create = create}), InvalidArgument);
      CHECK_THROWS_WITH(Store::open(dir / "file", {.create = create}),
                        Catch::Contains("is a regular file, not a directory") && !Catch::Contains("create one"));
      CHECK_THROWS_AS(Store::open(dir / "file" / "store", {.create = create}), InvalidArgument);
      CHECK_THROWS_WITH(Store::open(dir / "file" / "store", {.create = create}),
                        Catch::Contains("a component of the path is not a directory") && !Catch::Contains("create one"));
    }
    CHECK(test::read_text(dir / "file") == "mine");
  }
  SECTION("a layout version at or above 2^63 is newer, not invalid") {
    fs::create_directories(dir / "s");
    test::write_text(dir / "s/amphora-store.json", R"({"format":"amphora-store","layout_version":9223372036854775808})");
    CHECK_THROWS_AS(Store::open(dir / "s"), Unsupported);
    CHECK_THROWS_WITH(Store::open(dir / "s"), Catch::Contains("newer"));
    test::write_text(dir / "s/amphora-store.json", R"({"format":"amphora-store","layout_version":0})");
    CHECK_THROWS_AS(Store::open(dir / "s"), CorruptData);
  }
  SECTION("out of memory is OutOfResources, not a usage error") {
    CHECK_THROWS_AS(Buffer::allocate(std::size_t{1} << 60), OutOfResources);
  }
  SECTION("an artifact collected while open is not found, not damaged") {
    Store store = test::make_store(dir / "store");
    auto saved = store.save(test::random_tensor(DType::int32, {64}, 1), {.options = TensorOptions{Compression::none}});
    ArtifactReader reader = store.open_artifact(saved.digest.str());
    store.gc(false, std::chrono::seconds(0));
    CHECK_THROWS_AS(materializer<Tensor>::load(reader), NotFound);
    CHECK_THROWS_WITH(materializer<Tensor>::load(reader), Catch::Contains("removed"));
  }
}

TEST_CASE("A payload that shrinks while verify hashes it is an error, not a crash", "[hardening][sigbus]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor t = test::random_tensor(DType::uint8, {64 << 20}, 11);
  for (int round = 0; round < 3; ++round) {
    auto saved = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
    auto payload = test::object_dir(dir / "store", saved.digest) / "tensor.npy";
    std::thread truncator([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2 + 5 * round));
      ::truncate(payload.c_str(), 3 << 20);
    });
    auto report = store.verify("t");
    truncator.join();
    // Either the size check or the short read caught it; on a busy machine
    // the truncation may also come only after verify finished, and then the
    // next verify sees it.
    if (report.ok()) report = store.verify("t");
    CHECK_FALSE(report.ok());
    fs::remove_all(test::object_dir(dir / "store", saved.digest));
  }
  // The primitive itself: a file that shrinks after opening reads as CorruptData.
  auto saved = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
  auto file = detail::ArtifactArea(open_local_medium(dir / "store", false)).open(saved.digest, "tensor.npy");
  ::truncate((test::object_dir(dir / "store", saved.digest) / "tensor.npy").c_str(), 100);
  std::vector<std::byte> buf(4096);
  CHECK_THROWS_AS(file->read_at(0, buf.size(), buf.data()), CorruptData);
  CHECK_THROWS_WITH(file->read_at(0, buf.size(), buf.data()), Catch::Contains("shrank"));
}

TEST_CASE("A forked child can save and load", "[hardening][fork]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor big = test::random_tensor(DType::float32, {4 << 20}, 3);  // 16 MiB: parallel hashing
  store.save(big, {.name = "parent", .options = TensorOptions{Compression::lz4}});
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(60);  // a deadlock fails the test instead of hanging it
    int status = 1;
    try {
      Tensor t = test::random_tensor(DType::float32, {4 << 20}, 4);
      auto saved = store.save(t, {.name = "child", .options = TensorOptions{Compression::lz4}});
      status = store.load<Tensor>(saved.digest.str()).bit_equal(t) && store.verify("child").ok() ? 0 : 2;
    } catch (...) {
      status = 3;
    }
    ::_exit(status);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // And the parent's pool still works afterwards.
  CHECK(store.load<Tensor>("parent").bit_equal(big));
  CHECK(store.load<Tensor>("child").num_elements() == big.num_elements());
}

namespace {
struct Columns {
  std::vector<std::string> values;  // one payload file each, written concurrently
};
}  // namespace

template <>
struct amphora::materializer<Columns> {
  static constexpr std::string_view name = "test.columns";
  static constexpr int version = 1;
  static void save(const Columns& c, ArtifactWriter& out) {
    std::vector<std::thread> writers;
    for (std::size_t i = 0; i < c.values.size(); ++i)
      writers.emplace_back([&, i] {
        auto path = "cols/part" + std::to_string(i % 3) + "/c" + std::to_string(i) + ".bin";
        const auto& v = c.values[i];
        if (i % 2)
          out.write_file(path, ConstBytes(reinterpret_cast<const std::byte*>(v.data()), v.size()));
        else {
          auto stream = out.open_stream(path, v.size());
          stream.append(ConstBytes(reinterpret_cast<const std::byte*>(v.data()), v.size()));
          stream.close();
        }
      });
    for (auto& w : writers) w.join();
    out.meta()["count"] = c.values.size();
  }
  static Columns load(const ArtifactReader& in) {
    Columns c;
    for (std::size_t i = 0; i < in.meta().at("count").get<std::size_t>(); ++i) {
      auto b = in.map("cols/part" + std::to_string(i % 3) + "/c" + std::to_string(i) + ".bin");
      c.values.emplace_back(reinterpret_cast<const char*>(b->data()), b->size());
    }
    return c;
  }
};

TEST_CASE("Payload files written from several threads at once", "[hardening][concurrency]") {
  test::TempDir dir;
  Columns c;
  std::mt19937 rng(3);
  for (int i = 0; i < 8; ++i) {
    std::string v((i + 1) * 700000, '\0');  // some span several hashing pieces
    for (auto& ch : v) ch = static_cast<char>(rng());
    c.values.push_back(std::move(v));
  }
  std::optional<Digest> first;
  for (bool durable : {false, true}) {
    auto registry = Registry::with_defaults();
    registry->add<Columns>();
    Store store = Store::open(dir / (durable ? "durable" : "plain"), {.create = true, .registry = registry, .durable = durable});
    for (int round = 0; round < 3; ++round) {
      auto saved = store.save(c, {.name = "cols"});
      if (!first) first = saved.digest;
      CHECK(saved.digest == *first);  // whatever order the threads finished in
    }
    CHECK(store.load<Columns>("cols").values == c.values);
    CHECK(store.verify().ok());
  }
}

TEST_CASE("gc removes a crafted deep tree with few descriptors", "[hardening][gc]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  // 3000 levels: far past PATH_MAX, built one level at a time from descriptors.
  int fd = ::open((dir / "store/tmp").c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  REQUIRE(::mkdirat(fd, "deep", 0755) == 0);
  int level = ::openat(fd, "deep", O_RDONLY | O_DIRECTORY);
  ::close(fd);
  for (int i = 0; i < 3000; ++i) {
    REQUIRE(::mkdirat(level, "d", 0755) == 0);
    int next = ::openat(level, "d", O_RDONLY | O_DIRECTORY);
    ::close(level);
    REQUIRE(next >= 0);
    level = next;
  }
  int leaf = ::openat(level, "f", O_WRONLY | O_CREAT, 0644);
  ::close(leaf);
  ::close(level);
  make_old(dir / "store/tmp/deep");
  struct rlimit old {}, low {};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  low = old;
  low.rlim_cur = 128;  // far fewer than the depth
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  GcReport report;
  CHECK_NOTHROW(report = store.gc(false, std::chrono::seconds(0)));
  ::setrlimit(RLIMIT_NOFILE, &old);
  CHECK(report.staging.removed >= 1);
  CHECK(fs::is_empty(dir / "store/tmp"));
}

TEST_CASE("A digest slot holding a link or a file is repaired by the next save", "[hardening][repair]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor t = test::random_tensor(DType::int32, {256}, 9);
  auto saved = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
  auto slot = test::object_dir(dir / "store", saved.digest);
  fs::create_directories(dir / "outside");
  test::write_text(dir / "outside/keep.txt", "keep");
  for (bool as_link : {true, false}) {
    fs::remove_all(slot);
    if (as_link)
      fs::create_directory_symlink(dir / "outside", slot);
    else
      test::write_text(slot, "not a directory");
    CHECK_THROWS_AS(store.load<Tensor>("t"), CorruptData);
    auto again = store.save(t, {.name = "t", .options = TensorOptions{Compression::none}});
    CHECK(again.created);
    CHECK(store.load<Tensor>("t").bit_equal(t));
    CHECK(store.verify().ok());
    CHECK(test::read_text(dir / "outside/keep.txt") == "keep");
  }
}

namespace {
struct Throwing {};
}  // namespace

TEST_CASE("A materializer's own exceptions leave Store as amphora errors", "[hardening][errors]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  MaterializerEntry e = saving_entry<Throwing>("test.throwing", [](ArtifactWriter& out) {
    out.meta()["n"] = 1;
    if (out.options().name == "bad") throw std::out_of_range("index 7 past the end");
  });
  e.load = [](const ArtifactReader&) -> std::shared_ptr<void> { throw std::runtime_error("cannot make sense of it"); };
  store.registry().add_entry(e);
  CHECK_THROWS_AS(test::save_registered(store, Throwing{}, {.name = "bad"}), InvalidArgument);
  CHECK_THROWS_WITH(test::save_registered(store, Throwing{}, {.name = "bad"}), Catch::Contains("index 7 past the end"));
  auto saved = test::save_registered(store, Throwing{}, {.name = "good"});
  CHECK_THROWS_AS(store.load_erased("good"), CorruptData);
  auto report = store.verify();  // the failing structural check is a problem, not an abort
  REQUIRE(report.problems.size() == 1);
  CHECK_THAT(report.problems[0], Catch::Contains("cannot make sense of it"));
  (void)saved;
}

TEST_CASE("Running out of descriptors is OutOfResources, not a bad record", "[hardening][errors]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  store.save(test::random_tensor(DType::int8, {4}, 1), {.name = "a"});
  struct rlimit old {}, low {};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  low = old;
  low.rlim_cur = 3;  // stdin, stdout, stderr: not one more
  for (int fd = 3; fd < 1024; ++fd)
    if (::fcntl(fd, F_GETFD) != -1) low.rlim_cur = static_cast<rlim_t>(fd + 1);  // whatever is open already
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> fillers;  // take every free descriptor below the limit too
  for (int fd; (fd = ::open("/dev/null", O_RDONLY)) >= 0;) fillers.push_back(fd);
  std::exception_ptr caught;
  try {
    store.gc();
  } catch (...) {
    caught = std::current_exception();
  }
  // Looked at only once descriptors are back: sanitizer runtimes need some
  // to check a virtual call.
  for (int fd : fillers) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &old);
  REQUIRE(caught);
  bool out_of_resources = false;
  std::string message;
  try {
    std::rethrow_exception(caught);
  } catch (const OutOfResources& e) {
    out_of_resources = true;
    message = e.what();
  } catch (const std::exception& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(out_of_resources);
  CHECK_THAT(message, Catch::Contains("Too many open files"));
}

TEST_CASE("Storage keys with '..' and device nodes are refused without opening", "[hardening][symlink]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto saved = store.save(test::random_tensor(DType::int32, {64}, 1), {.options = TensorOptions{Compression::none}});
  detail::ArtifactArea artifacts(open_local_medium(dir / "store", false));
  CHECK_THROWS_AS(artifacts.open(saved.digest, "../../../../amphora-store.json"), InvalidArgument);
  CHECK_THROWS_AS(artifacts.map_listed(saved.digest, "sub/../tensor.npy", 1), InvalidArgument);
  if (::geteuid() != 0) {
    WARN("skipped the device-node case: creating one needs root");
    return;
  }
  auto payload = test::object_dir(dir / "store", saved.digest) / "tensor.npy";
  fs::remove(payload);
  REQUIRE(::mknod(payload.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) == 0);  // like /dev/null
  CHECK_THROWS_WITH(store.load<Tensor>(saved.digest), Catch::Contains("is a device or socket"));
  auto report = store.verify(saved.digest.str());
  REQUIRE(report.problems.size() == 1);
  CHECK_THAT(report.problems[0], Catch::Contains("is a device or socket"));
}

TEST_CASE("A stream kept after its writer is gone is safe", "[hardening][save]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::optional<FileStream> kept;
  {
    auto writer = detail::ArtifactAccess::writer(detail::ArtifactArea(open_local_medium(dir / "store", false)).begin(),
                                                 SaveOptions{});
    kept.emplace(writer->open_stream("kept.bin"));
    kept->append(ConstBytes(reinterpret_cast<const std::byte*>("abc"), 3));
  }
  CHECK_THROWS_AS(kept->append(ConstBytes(reinterpret_cast<const std::byte*>("d"), 1)), InvalidArgument);
  CHECK_THROWS_WITH(kept->close(), Catch::Contains("'kept.bin' outlived its artifact writer"));
  kept.reset();  // and destroying it touches nothing that is gone
  CHECK(store.artifacts().empty());
  CHECK(fs::is_empty(dir / "store/tmp"));  // the staging area went with the last owner
}
