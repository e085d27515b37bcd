#include "support.hpp"

#include <amphora/describe.hpp>
#include <amphora/everyday.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

using namespace amphora;
namespace fs = std::filesystem;

namespace {

// A composite with two tensor children and an inline label.
struct Pair {
  Tensor first, second;
  std::string label;
};

// A pair whose second child is saved with options of its own.
struct SortedPair {
  Tensor values, sorted_ids;
};

// A chain `depth` children deep.
struct Chain {
  int depth = 0;
};

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace

template <>
struct amphora::materializer<Pair> {
  static constexpr std::string_view name = "test.pair";
  static constexpr int version = 1;
  static void save(const Pair& p, ArtifactWriter& out) {
    out.save_child("first", p.first);
    out.save_child("second", p.second);
    out.meta()["label"] = p.label;
  }
  static Pair load(const ArtifactReader& in) {
    return {in.load_child<Tensor>("first"), in.load_child<Tensor>("second"), in.meta<std::string>("label")};
  }
};

template <>
struct amphora::materializer<SortedPair> {
  static constexpr std::string_view name = "test.sorted_pair";
  static constexpr int version = 1;
  static void save(const SortedPair& p, ArtifactWriter& out) {
    out.save_child("values", p.values);
    out.save_child("sorted_ids", p.sorted_ids,
                   TensorOptions{.compression = Compression::lz4, .encoding = {.delta = true, .squeeze = true}});
  }
  static SortedPair load(const ArtifactReader& in) {
    return {in.load_child<Tensor>("values"), in.load_child<Tensor>("sorted_ids")};
  }
};

template <>
struct amphora::materializer<Chain> {
  static constexpr std::string_view name = "test.chain";
  static constexpr int version = 1;
  static void save(const Chain& c, ArtifactWriter& out) {
    out.meta()["depth"] = c.depth;
    if (c.depth > 0) out.save_child("next", Chain{c.depth - 1});
  }
  static Chain load(const ArtifactReader& in) {
    int depth = in.meta<int>("depth");
    if (depth > 0 && in.load_child<Chain>("next").depth != depth - 1) throw CorruptData("chain out of order");
    return Chain{depth};
  }
};

TEST_CASE("A composite round-trips and its manifest lists its children", "[composite]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Pair p{test::random_tensor(DType::float32, {16, 4}, 1), test::random_tensor(DType::int64, {3}, 2), "pair"};
  auto saved = store.save(p, {.name = "pair"});

  Pair back = store.load<Pair>("pair");
  CHECK(same_tensor(back.first, p.first));
  CHECK(same_tensor(back.second, p.second));
  CHECK(back.label == "pair");

  ArtifactReader reader = store.open_artifact("pair");
  CHECK(reader.manifest().manifest_version == 2);
  REQUIRE(reader.children().size() == 2);
  CHECK(reader.children()[0].role == "first");
  CHECK(reader.children()[1].role == "second");
  CHECK(reader.children()[0].digest == store.save(p.first).digest);
  CHECK(reader.children()[1].digest == store.save(p.second).digest);
  CHECK(store.artifacts().size() == 3);

  // The parent's digest covers its tree: a change in one child changes it,
  // and leaves the other child's artifact as it was.
  Pair changed = p;
  changed.second = test::random_tensor(DType::int64, {3}, 3);
  auto other = store.save(changed);
  CHECK(other.digest != saved.digest);
  CHECK(store.open_artifact(other.digest).children()[0].digest == reader.children()[0].digest);
  CHECK(store.artifacts().size() == 5);

  // Saving it again changes nothing.
  auto again = store.save(p);
  CHECK(again.digest == saved.digest);
  CHECK_FALSE(again.created);
  CHECK(store.verify().ok());
}

TEST_CASE("The same value twice in one composite is stored once", "[composite]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor shared = test::random_tensor(DType::uint8, {64, 64, 3}, 9);
  auto saved = store.save(Pair{shared, shared, "twice"}, {.name = "twice"});
  ArtifactReader reader = store.open_artifact(saved.digest);
  REQUIRE(reader.children().size() == 2);
  CHECK(reader.children()[0].digest == reader.children()[1].digest);
  // One parent, one tensor: two object directories on disk.
  std::size_t dirs = 0;
  for (const auto& fan : fs::directory_iterator(dir / "store/objects/sha256"))
    for (const auto& e : fs::directory_iterator(fan.path())) {
      (void)e;
      ++dirs;
    }
  CHECK(dirs == 2);
  Pair back = store.load<Pair>("twice");
  CHECK(same_tensor(back.first, shared));
  CHECK(same_tensor(back.second, shared));
}

TEST_CASE("tree_size counts each distinct artifact of a tree once, within a budget", "[composite]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  // Ten lists, each holding the same three vectors: 1 + 1 + 3 distinct artifacts.
  const std::vector<std::vector<float>> items = {{1.5f}, {2.5f, 3.5f}, {4.5f, 5.5f, 6.5f}};
  const auto d = store.save(std::vector<std::vector<std::vector<float>>>(10, items)).digest;
  const auto whole = store.tree_size(d);
  CHECK(whole.complete);
  CHECK(whole.artifacts == 5);
  std::uint64_t bytes = 0;
  for (const auto& a : store.artifacts()) bytes += store.open_artifact(a).manifest().payload_bytes();
  CHECK(whole.payload_bytes == bytes);
  const auto part = store.tree_size(d, 2);
  CHECK_FALSE(part.complete);
  CHECK(part.artifacts <= 2);
}

TEST_CASE("gc keeps the children of named artifacts, transitively", "[composite][gc]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const std::chrono::seconds no_grace(0);
  auto chain = store.save(Chain{5}, {.name = "chain"});
  auto pair = store.save(Pair{test::random_tensor(DType::int8, {5}, 1), test::random_tensor(DType::int8, {6}, 2), "p"},
                         {.name = "pair"});
  CHECK(store.artifacts().size() == 6 + 3);
  auto report = store.gc(false, no_grace);
  CHECK(report.removed.empty());
  CHECK(report.kept == 9);
  CHECK(store.load<Chain>("chain").depth == 5);

  // Dropping the name lets gc take the whole tree, and only it.
  fs::remove(dir / "store/names/chain/1.json");
  CHECK(store.gc(false).removed.empty());  // young, within the default grace period
  report = store.gc(false, no_grace);
  CHECK(report.removed.size() == 6);
  CHECK(store.artifacts().size() == 3);
  CHECK(store.load<Pair>("pair").label == "p");
  CHECK(store.verify().ok());
  (void)chain;
  (void)pair;
}

TEST_CASE("gc --keep-last that refuses drops no version", "[composite][gc]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  for (int v = 1; v <= 3; ++v) (void)store.save(std::string("version ") + std::to_string(v), {.name = "notes"});
  const auto chain = store.save(Chain{3}, {.name = "chain"});
  // The named composite's manifest no longer hashes to its digest: which
  // children it keeps alive is unknown, so gc refuses.
  test::flip_byte(test::object_dir(dir / "store", chain.digest) / "manifest.json", 5);
  for (bool dry_run : {true, false}) {
    CHECK_THROWS_AS(store.gc(dry_run, std::chrono::seconds(0), 1), CorruptData);
    CHECK_THROWS_WITH(store.gc(dry_run, std::chrono::seconds(0), 1), Catch::Contains("gc refused"));
    CHECK(store.version_numbers("notes") == std::vector<std::uint64_t>{1, 2, 3});
    CHECK(store.load<std::string>("notes@1") == "version 1");
  }
}

TEST_CASE("A saved-again child is young again, so gc spares it until its parent is named", "[composite][gc]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor t = test::random_tensor(DType::float64, {32}, 4);
  auto loose = store.save(t);
  // Age it past any grace period.
  auto old = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(test::object_dir(dir / "store", loose.digest) / "manifest.json", old);
  CHECK(store.gc(true).removed == std::vector<Digest>{loose.digest});
  // A save that reuses it as a child makes it young again.
  store.save(Pair{t, t, "reuse"});
  CHECK(store.gc(true).removed.empty());
}

TEST_CASE("verify reports a missing or damaged child, and its parents", "[composite][verify]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor a = test::random_tensor(DType::int32, {1000}, 1), b = test::random_tensor(DType::int32, {1000}, 2);
  auto saved = store.save(Pair{a, b, "x"}, {.name = "pair", .options = TensorOptions{Compression::none}});
  auto first = store.save(a).digest, second = store.save(b).digest;

  SECTION("a damaged child") {
    test::flip_byte(test::object_dir(dir / "store", second) / "tensor.npy", 4096 + 10);
    for (auto report : {store.verify(), store.verify("pair")}) {
      CHECK_FALSE(report.ok());
      std::string all;
      for (const auto& p : report.problems) all += p + "\n";
      INFO(all);
      CHECK_THAT(all, Catch::Contains("artifact " + second.str() + ": file 'tensor.npy' piece 0"));
      CHECK_THAT(all, Catch::Contains("artifact " + saved.digest.str() + ": child 'second' (" + second.str() +
                                      ") is damaged"));
      CHECK_THAT(all, !Catch::Contains(first.str() + ": "));
    }
  }
  SECTION("a child whose manifest is damaged") {
    auto manifest = test::object_dir(dir / "store", first) / "manifest.json";
    test::flip_byte(manifest, 20);
    auto report = store.verify("pair");
    std::string all;
    for (const auto& p : report.problems) all += p + "\n";
    INFO(all);
    CHECK_THAT(all, Catch::Contains("does not hash to the artifact's digest"));
    CHECK_THAT(all, Catch::Contains("child 'first' (" + first.str() + ") is damaged"));
    CHECK_THROWS_AS(store.load<Pair>("pair"), CorruptData);
    CHECK_THROWS_WITH(store.load<Pair>("pair"), Catch::Contains("child 'first'") && Catch::Contains("does not hash"));
  }
  SECTION("a missing child") {
    fs::remove_all(test::object_dir(dir / "store", first));
    for (auto report : {store.verify(), store.verify("pair")}) {
      REQUIRE(report.problems.size() == 1);
      CHECK(report.problems[0] ==
            "artifact " + saved.digest.str() + ": child 'first' (" + first.str() + ") is missing");
    }
    CHECK_THROWS_AS(store.load<Pair>("pair"), CorruptData);
    CHECK_THROWS_WITH(store.load<Pair>("pair"), Catch::Contains("child 'first'") && Catch::Contains("missing"));
    // gc does not mind: there is nothing to delete there.
    CHECK(store.gc(false, std::chrono::seconds(0)).removed.empty());
  }
}

TEST_CASE("A chain 64 children deep saves and loads; 65 is refused", "[composite]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  CHECK(store.load<Chain>(store.save(Chain{kMaxChildDepth}).digest).depth == kMaxChildDepth);
  CHECK_THROWS_AS(store.save(Chain{kMaxChildDepth + 1}), InvalidArgument);
  CHECK_THROWS_WITH(store.save(Chain{kMaxChildDepth + 1}), Catch::Contains("deeper than 64"));
}

namespace {
// A link to an artifact already stored: chains of any depth are built one
// save at a time (each save nests one level), as a crafted store could hold.
struct Link {
  std::optional<Digest> next;
};
}  // namespace

template <>
struct amphora::materializer<Link> {
  static constexpr std::string_view name = "test.link";
  static constexpr int version = 1;
  static void save(const Link& l, ArtifactWriter& out) {
    out.meta()["linked"] = l.next.has_value();
    if (l.next) out.add_child("next", *l.next);
  }
  // Reads its own metadata only, as a list does before its items are asked for.
  static Link load(const ArtifactReader& in) {
    (void)in.meta<bool>("linked");
    return Link{};
  }
};

TEST_CASE("verify applies the nesting limit loads apply, once per artifact", "[composite][verify]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto chain = [&](int levels) {
    std::vector<Digest> made{store.save(Link{}).digest};
    for (int i = 0; i < levels; ++i) made.push_back(store.save(Link{made.back()}).digest);
    return made;  // made[k] has k levels of children below it
  };
  SECTION("64 levels are whole, 65 are not") {
    auto made = chain(kMaxChildDepth + 1);
    CHECK(store.verify(made[kMaxChildDepth].str()).ok());
    auto report = store.verify(made.back().str());
    CHECK_FALSE(report.ok());
    REQUIRE(report.problems.size() == 1);
    CHECK_THAT(report.problems[0], Catch::Contains(made.back().str()) &&
                                       Catch::Contains("nests children 65 levels deep, deeper than the 64"));
  }
  SECTION("a chain 1,000 deep: each artifact past the limit says so, once") {
    auto made = chain(1000);
    auto report = store.verify();
    CHECK(report.problems.size() == 1000 - kMaxChildDepth);
    for (const auto& line : report.problems) CHECK_THAT(line, Catch::Contains("levels deep, deeper than the 64"));
  }
  SECTION("a chain 3,000 deep missing its bottom: every level says so, once") {
    auto made = chain(3000);
    fs::remove_all(test::object_dir(dir / "store", made[0]));
    auto report = store.verify(made[kMaxChildDepth - 1].str());
    CHECK(report.problems.size() == static_cast<std::size_t>(kMaxChildDepth - 1));
    CHECK_THAT(report.problems.front(), Catch::Contains("child 'next' (" + made[0].str() + ") is missing"));
    std::set<std::string> distinct(report.problems.begin(), report.problems.end());
    CHECK(distinct.size() == report.problems.size());
  }
}

namespace {
// Children listed by digest under roles of the caller's choosing.
struct Roles {
  std::vector<std::pair<std::string, Digest>> children;
};
}  // namespace

template <>
struct amphora::materializer<Roles> {
  static constexpr std::string_view name = "test.roles";
  static constexpr int version = 1;
  static void save(const Roles& r, ArtifactWriter& out) {
    for (const auto& [role, digest] : r.children) out.add_child(role, digest);
  }
  static Roles load(const ArtifactReader&) { return Roles{}; }
};

TEST_CASE("verify reports members that export would write to one path", "[composite][verify]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const Digest text = store.save(std::string("a string")).digest;  // exported as ROLE.txt
  const Digest link = store.save(Link{}).digest;                    // no file format: a directory ROLE
  SECTION("a string 'a' beside a directory 'a.txt'") {
    auto saved = store.save(Roles{{{"a", text}, {"a.txt", link}}});
    auto report = store.verify(saved.digest.str());
    REQUIRE_FALSE(report.ok());
    CHECK_THAT(report.problems.front(), Catch::Contains("child 'a.txt' and child 'a'") &&
                                            Catch::Contains("would both be exported as 'a.txt'"));
  }
  SECTION("a string 'a' beside a directory 'a.txt/b' needs a directory where a file goes") {
    auto saved = store.save(Roles{{{"a", text}, {"a.txt/b", link}}});
    auto report = store.verify(saved.digest.str());
    REQUIRE_FALSE(report.ok());
    CHECK_THAT(report.problems.front(), Catch::Contains("needs a directory where child 'a' is exported, 'a.txt'"));
  }
  SECTION("distinct paths are fine") {
    auto saved = store.save(Roles{{{"a", text}, {"b", link}, {"items/0", text}, {"items/1", link}}});
    CHECK(store.verify(saved.digest.str()).ok());
  }
}

namespace {
struct RoleProbe {
  std::string role;
  bool twice = false;
  std::optional<Digest> existing;
};
}  // namespace

template <>
struct amphora::materializer<RoleProbe> {
  static constexpr std::string_view name = "test.role_probe";
  static constexpr int version = 1;
  static void save(const RoleProbe& p, ArtifactWriter& out) {
    if (p.existing) {
      out.add_child(p.role, *p.existing);
      return;
    }
    out.save_child(p.role, Chain{0});
    if (p.twice) out.save_child(p.role, Chain{1});
  }
  static RoleProbe load(const ArtifactReader& in) { return {in.children().at(0).role, false, in.children().at(0).digest}; }
};

TEST_CASE("Bad roles and unknown children are refused before anything is published", "[composite]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  for (const char* bad : {"", "../up", "/abs", "a//b", ".hidden", "a/./b"}) {
    INFO(bad);
    CHECK_THROWS_AS(store.save(RoleProbe{bad, false, std::nullopt}), InvalidArgument);
    CHECK_THROWS_WITH(store.save(RoleProbe{bad, false, std::nullopt}), Catch::Contains("invalid child role"));
  }
  CHECK_THROWS_WITH(store.save(RoleProbe{"x", true, std::nullopt}), Catch::Contains("child role 'x' is used twice"));
  Digest nowhere = json_digest(nlohmann::json("no such artifact"));
  CHECK_THROWS_AS(store.save(RoleProbe{"x", false, nowhere}), NotFound);
  // The failures left only the children saved before them (unnamed, collectable).
  CHECK(store.names().empty());
  CHECK(store.gc(false, std::chrono::seconds(0)).kept == 0);

  auto chain = store.save(Chain{2}).digest;
  auto probe = store.save(RoleProbe{"linked", false, chain}, {.name = "probe"});
  CHECK(store.load<RoleProbe>("probe").existing == chain);
  CHECK(store.gc(false, std::chrono::seconds(0)).kept == 4);  // the probe, and the chain it lists
  (void)probe;
}

TEST_CASE("Metadata accessors name the artifact and the key", "[composite][meta]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto saved = store.save(Chain{0}, {.name = "c"});
  ArtifactReader in = store.open_artifact("c");
  CHECK(in.meta<int>("depth") == 0);
  CHECK(in.meta<std::uint8_t>("depth") == 0);
  CHECK(in.format_version() == 1);
  CHECK_THROWS_AS(in.meta<int>("absent"), CorruptData);
  CHECK_THROWS_WITH(in.meta<int>("absent"), Catch::Contains("artifact c (") && Catch::Contains("'absent' is missing"));
  CHECK_THROWS_AS(in.meta<std::string>("depth"), CorruptData);
  CHECK_THROWS_WITH(in.meta<std::string>("depth"), Catch::Contains("'depth' does not hold the expected type"));
  CHECK_THROWS_AS(in.meta<bool>("depth"), CorruptData);
  CHECK_THROWS_AS(in.open_child("next"), CorruptData);
  CHECK_THROWS_WITH(in.open_child("next"), Catch::Contains("lists no child 'next'"));
  // A child loaded as the wrong type is named as such.
  auto pair = store.save(Pair{test::random_tensor(DType::int8, {2}, 1), test::random_tensor(DType::int8, {2}, 2), ""});
  CHECK_THROWS_AS(store.open_artifact(pair.digest).load_child<Chain>("first"), TypeMismatch);
  CHECK_THROWS_WITH(store.open_artifact(pair.digest).load_child<Chain>("first"),
                    Catch::Contains("child 'first'") && Catch::Contains("holds a 'amphora.tensor' artifact, not a 'test.chain'"));
  (void)saved;
}

TEST_CASE("Children saved from several threads at once", "[composite][threads]") {
  struct Many {
    std::vector<Tensor> items;
  };
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::vector<Tensor> items;
  for (int i = 0; i < 8; ++i) items.push_back(test::random_tensor(DType::float32, {256, 64}, static_cast<std::uint64_t>(i)));
  // Through the erased interface, as a generic container materializer would.
  MaterializerEntry entry;
  entry.name = "test.many";
  entry.version = 1;
  entry.type = typeid(Many);
  entry.save = [](const void* value, ArtifactWriter& out) {
    const auto& many = *static_cast<const Many*>(value);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < many.items.size(); ++i)
      threads.emplace_back([&, i] { out.save_child("items/" + std::to_string(i), many.items[i]); });
    for (auto& t : threads) t.join();
  };
  entry.load = [](const ArtifactReader& in) -> std::shared_ptr<void> {
    auto many = std::make_shared<Many>();
    for (std::size_t i = 0; i < in.children().size(); ++i)
      many->items.push_back(in.load_child<Tensor>("items/" + std::to_string(i)));
    return many;
  };
  const Many many{items};
  auto saved = store.save_erased(entry, &many, {});
  auto again = store.save_erased(entry, &many, {});
  CHECK(again.digest == saved.digest);
  REQUIRE(store.open_artifact(saved.digest).children().size() == 8);
  auto back = std::static_pointer_cast<Many>(entry.load(store.open_artifact(saved.digest)));
  for (std::size_t i = 0; i < items.size(); ++i) CHECK(same_tensor(back->items[i], items[i]));
}

TEST_CASE("Materializer options reach the children of a composite", "[composite][options]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Pair p{test::ramp_tensor(512, 512, 1), test::ramp_tensor(256, 256, 2), "ramps"};
  for (auto [compression, encoding] : {std::pair{Compression::lz4, "npy.lz4"}, std::pair{Compression::none, "npy"}}) {
    auto saved = store.save(p, {.options = TensorOptions{.compression = compression}});
    ArtifactReader in = store.open_artifact(saved.digest);
    for (const auto& c : in.children()) CHECK(store.open_artifact(c.digest).meta()["encoding"] == encoding);
  }
  // Options of a type nobody reads are carried and ignored.
  struct Unused {
    int x = 0;
  };
  MaterializerOptions options = Unused{5};
  options.set(TensorOptions{.compression = Compression::none});
  CHECK(options.has<Unused>());
  CHECK(options.get<Unused>().x == 5);
  CHECK(options.get<TensorOptions>().compression == Compression::none);
  CHECK_FALSE(MaterializerOptions{}.has<TensorOptions>());
  CHECK(MaterializerOptions{}.get<TensorOptions>().compression == Compression::automatic);
  CHECK_NOTHROW(store.save(p, {.options = options}));
}

TEST_CASE("A child saved with options of its own uses them; its siblings keep the save's", "[composite]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::vector<std::int64_t> ids(5000);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i * 3);
  SortedPair p{test::random_tensor(DType::float32, {64}, 4), Tensor::from_values({5000}, ids)};
  auto saved = store.save(p, {.options = TensorOptions{.compression = Compression::none}});

  auto reader = store.open_artifact(saved.digest);
  auto values = reader.open_child("values");
  auto sorted = reader.open_child("sorted_ids");
  CHECK(values.has_file("tensor.npy"));
  REQUIRE(sorted.has_file("tensor.npy.lz4"));
  // Delta and squeeze made the ids one byte each before LZ4 shrank them.
  CHECK(sorted.manifest().payload_bytes() < 2000);
  auto back = store.load<SortedPair>(saved.digest);
  CHECK(same_tensor(back.values, p.values));
  CHECK(same_tensor(back.sorted_ids, p.sorted_ids));
  CHECK(back.sorted_ids.dtype() == DType::int64);
}

namespace {

// A leaf value with an identity, counting its materializer's saves.
struct Counted {
  std::shared_ptr<const int> value;  // copies share it, as tensors share buffers
};
std::atomic<int> counted_saves{0};

// A part whose save always fails.
struct Failing {
  std::shared_ptr<const int> value;
};

// A materializer that reuses one scratch tensor for two children, refilling
// it in between: plain save_child, so each child has its own content.
struct Scratch {
  std::uint8_t first = 0, second = 0;
};

}  // namespace

template <>
struct amphora::materializer<Counted> {
  static constexpr std::string_view name = "test.counted";
  static constexpr int version = 1;
  static void save(const Counted& c, ArtifactWriter& out) {
    ++counted_saves;
    out.meta()["value"] = *c.value;
  }
  static Counted load(const ArtifactReader& in) { return {std::make_shared<const int>(in.meta<int>("value"))}; }
  static ValueIdentity identity(const Counted& c) {
    return {c.value, std::to_string(reinterpret_cast<std::uintptr_t>(c.value.get()))};
  }
};

template <>
struct amphora::materializer<Failing> {
  static constexpr std::string_view name = "test.failing";
  static constexpr int version = 1;
  static void save(const Failing&, ArtifactWriter&) { throw InvalidArgument("this part cannot be saved"); }
  static Failing load(const ArtifactReader&) { return {}; }
  static ValueIdentity identity(const Failing& f) {
    return {f.value, std::to_string(reinterpret_cast<std::uintptr_t>(f.value.get()))};
  }
};

template <>
struct amphora::materializer<Scratch> {
  static constexpr std::string_view name = "test.scratch";
  static constexpr int version = 1;
  static void save(const Scratch& s, ArtifactWriter& out) {
    Tensor scratch = Tensor::zeros(DType::uint8, {1024});
    std::memset(scratch.mutable_data(), s.first, scratch.nbytes());
    out.save_child("first", scratch);
    std::memset(scratch.mutable_data(), s.second, scratch.nbytes());
    out.save_child("second", scratch);
  }
  static Scratch load(const ArtifactReader& in) {
    return {in.load_child<Tensor>("first").values<std::uint8_t>()[0], in.load_child<Tensor>("second").values<std::uint8_t>()[0]};
  }
};

namespace {

struct TwoCounted {
  Counted a, b;
};
AMPHORA_MATERIALIZE(TwoCounted, "test.two_counted", 1, a, b)

struct TwoFailing {
  Failing a, b;
};
AMPHORA_MATERIALIZE(TwoFailing, "test.two_failing", 1, a, b)

}  // namespace

TEST_CASE("A part met twice in one save is saved once and listed twice", "[composite][parts]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto one = std::make_shared<const int>(7);
  counted_saves = 0;
  auto saved = store.save(TwoCounted{{one}, {one}});
  CHECK(counted_saves == 1);
  auto reader = store.open_artifact(saved.digest);
  REQUIRE(reader.children().size() == 2);
  CHECK(reader.children()[0].digest == reader.children()[1].digest);
  auto back = store.load<TwoCounted>(saved.digest);
  CHECK(*back.a.value == 7);
  CHECK(*back.b.value == 7);

  // Equal content in two objects: each saved, one artifact stored.
  counted_saves = 0;
  auto apart = store.save(TwoCounted{{one}, {std::make_shared<const int>(7)}});
  CHECK(counted_saves == 2);
  CHECK(apart.digest == saved.digest);

  // The memory lasts one save: the next save of the same object saves it again.
  counted_saves = 0;
  store.save(TwoCounted{{one}, {one}});
  CHECK(counted_saves == 1);

  // 200 list items referring to 3 objects, saved side by side on all cores.
  std::vector<Counted> many;
  std::vector<std::shared_ptr<const int>> objects = {std::make_shared<const int>(1), std::make_shared<const int>(2),
                                                     std::make_shared<const int>(3)};
  for (int i = 0; i < 200; ++i) many.push_back({objects[static_cast<std::size_t>(i) % 3]});
  counted_saves = 0;
  auto list = store.save(many);
  CHECK(counted_saves == 3);
  auto items = store.load<std::vector<Counted>>(list.digest);
  REQUIRE(items.size() == 200);
  for (std::size_t i = 0; i < items.size(); ++i) CHECK(*items[i].value == static_cast<int>(i % 3) + 1);
}

TEST_CASE("A tensor referenced from two fields is written once", "[composite][parts]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Tensor weights = test::random_tensor(DType::float32, {256, 256}, 3);
  std::uint64_t reported = 0;
  auto saved = store.save(Pair{weights, weights, "shared"}, {.progress = [&](std::uint64_t n) { reported = n; }});
  // Pair's materializer uses save_child: both children written, one stored.
  const std::uint64_t twice = reported;
  auto reader = store.open_artifact(saved.digest);
  CHECK(reader.children()[0].digest == reader.children()[1].digest);

  // A struct of AMPHORA_MATERIALIZE saves its fields as parts: once.
  using Both = std::pair<Tensor, Tensor>;
  reported = 0;
  auto pair = store.save(Both{weights, weights}, {.progress = [&](std::uint64_t n) { reported = n; }});
  CHECK(reported > 0);
  CHECK(reported * 2 <= twice + 8192);
  CHECK(reported >= weights.nbytes());
  auto back = store.load<Both>(pair.digest);
  CHECK(same_tensor(back.first, weights));
  CHECK(same_tensor(back.second, weights));

  // Two views of different rows of one buffer are different parts.
  Tensor top = weights.rows(0, 128), bottom = weights.rows(128, 256);
  auto halves = store.save(Both{top, bottom});
  auto halves_back = store.load<Both>(halves.digest);
  CHECK(same_tensor(halves_back.first, top));
  CHECK(same_tensor(halves_back.second, bottom));
  CHECK_FALSE(same_tensor(halves_back.first, halves_back.second));
}

TEST_CASE("save_child never answers from an earlier child: a scratch value refilled between children keeps both contents",
          "[composite][parts]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto saved = store.save(Scratch{1, 2});
  auto back = store.load<Scratch>(saved.digest);
  CHECK(back.first == 1);
  CHECK(back.second == 2);
}

TEST_CASE("A part that fails fails the save for every field that refers to it", "[composite][parts]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto one = std::make_shared<const int>(1);
  CHECK_THROWS_WITH(store.save(TwoFailing{{one}, {one}}, {.name = "failing"}),
                    Catch::Contains("this part cannot be saved"));
  CHECK(store.names().empty());
}
