// The typed payload helpers of ArtifactWriter/ArtifactReader: round trips
// and every validation failure, on files planted byte by byte.

#include "support.hpp"
#include "memory_medium.hpp"

#include <amphora/npy_format.hpp>
#include <catch2/catch.hpp>
#include <algorithm>

#include <cmath>
#include <cstring>
#include <sys/stat.h>
#include <iterator>
#include <map>
#include <ranges>

using namespace amphora;

namespace {

// Detection records written with the helpers: what a custom materializer
// for a list of records looks like with them.
struct Detections {
  std::vector<std::string> paths;
  std::vector<std::int32_t> widths;
  std::vector<float> scores;
  nlohmann::json info;
};

// Whatever bytes the test wants, under whatever paths: for planting bad files.
struct RawFiles {
  std::map<std::string, std::string> files;
};

std::string bytes_of(const void* p, std::size_t n) { return std::string(static_cast<const char*>(p), n); }

std::string npy(DType dtype, std::vector<std::int64_t> shape, const std::string& data, std::size_t align = 64) {
  return make_npy_header(dtype, shape, align) + data;
}

// A valid header whose data starts 2 bytes past a 64-byte boundary.
std::string misaligned_npy(DType dtype, std::vector<std::int64_t> shape) {
  std::string h = make_npy_header(dtype, shape, 64);
  h.insert(h.size() - 1, "  ");
  std::size_t len = h.size() - 10;
  h[8] = static_cast<char>(len & 0xff);
  h[9] = static_cast<char>(len >> 8);
  return h;
}

}  // namespace

template <>
struct amphora::materializer<Detections> {
  static constexpr std::string_view name = "test.detections";
  static constexpr int version = 1;
  static void save(const Detections& d, ArtifactWriter& out) {
    out.write_strings("paths", d.paths);
    out.write_array<std::int32_t>("widths", d.widths);
    out.write_array<float>("scores", d.scores);
    out.write_json("info.json", d.info);
    out.meta()["count"] = d.paths.size();
  }
  static Detections load(const ArtifactReader& in) {
    auto count = in.meta<std::size_t>("count");
    auto paths = in.read_strings("paths");
    ArrayView widths_file = in.read_array("widths", DType::int32, 1);
    ArrayView scores_file = in.read_array("scores", DType::float32, 1);
    auto widths = widths_file.values<std::int32_t>();
    auto scores = scores_file.values<float>();
    if (paths.size() != count || widths.size() != count || scores.size() != count)
      throw CorruptData(in.label() + ": column lengths disagree");
    return {paths.to_vector(), {widths.begin(), widths.end()}, {scores.begin(), scores.end()}, in.read_json("info.json")};
  }
};

template <>
struct amphora::materializer<RawFiles> {
  static constexpr std::string_view name = "test.raw_files";
  static constexpr int version = 1;
  static void save(const RawFiles& r, ArtifactWriter& out) {
    for (const auto& [path, bytes] : r.files) out.write_file(path, std::as_bytes(std::span<const char>(bytes)));
  }
  static RawFiles load(const ArtifactReader&) { return {}; }
};

TEST_CASE("Helpers round-trip records, arrays, strings and JSON", "[toolkit]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Detections d;
  for (int i = 0; i < 1000; ++i) {
    d.paths.push_back(i % 7 == 0 ? std::string() : "images/" + std::to_string(i) + ".jpg");
    d.widths.push_back(i * 3 - 100);
    d.scores.push_back(static_cast<float>(i) / 7.0f);
  }
  d.paths[5] = std::string("\0\xff binary", 9);  // strings are bytes
  d.info = {{"source", "coco"}, {"classes", {"cat", "dog"}}};
  auto saved = store.save(d, {.name = "det"});
  Detections back = store.load<Detections>("det");
  CHECK(back.paths == d.paths);
  CHECK(back.widths == d.widths);
  CHECK(back.scores == d.scores);
  CHECK(back.info == d.info);

  ArtifactReader in = store.open_artifact("det");
  // Arrays are .npy files with their data 64-byte aligned, mapped in place.
  auto widths = in.read_array("widths");
  CHECK(widths.dtype() == DType::int32);
  CHECK(widths.shape() == std::vector<std::int64_t>{1000});
  CHECK(reinterpret_cast<std::uintptr_t>(widths.bytes().data()) % 64 == 0);
  CHECK_THROWS_AS(widths.values<float>(), InvalidArgument);
  auto paths = in.read_strings("paths");
  CHECK(paths.size() == 1000);
  CHECK(paths[1] == "images/1.jpg");
  CHECK(paths.at(5) == std::string_view("\0\xff binary", 9));
  CHECK_THROWS_AS(paths.at(1000), InvalidArgument);
  std::size_t n = 0;
  for (std::string_view p : paths) n += p.size();
  CHECK(n == paths.total_bytes());
  // Its iterator is a random-access one for the standard algorithms.
  static_assert(std::random_access_iterator<StringsView::iterator>);
  CHECK(std::ranges::distance(paths.begin(), paths.end()) == 1000);
  CHECK(paths.begin()[1] == "images/1.jpg");
  CHECK(*(paths.end() - 995) == paths[5]);
  CHECK(*std::prev(paths.end()) == paths[999]);
  CHECK(*std::next(paths.begin(), 7) == paths[7]);
  CHECK((paths.begin() + 3 < paths.begin() + 4 && 4 + paths.begin() > paths.begin()));
  std::vector<std::string> backwards(std::make_reverse_iterator(paths.end()), std::make_reverse_iterator(paths.begin()));
  REQUIRE(backwards.size() == 1000);
  CHECK(backwards.front() == paths[999]);
  CHECK(backwards.back() == paths[0]);
  static_assert(std::ranges::random_access_range<const StringsView>);
  CHECK(std::count(paths.begin(), paths.end(), std::string_view("images/1.jpg")) == 1);
  // The JSON document is stored canonically.
  auto info = in.map("info.json");
  CHECK(std::string(reinterpret_cast<const char*>(info->data()), info->size()) ==
        R"({"classes":["cat","dog"],"source":"coco"})");
  // Every dtype and shape round-trips, 0-d and empty included.
  for (DType dtype : all_dtypes()) {
    for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{}, {0}, {3, 5}, {2, 0, 4}}) {
      INFO(dtype_name(dtype) << " ndim " << shape.size());
      Tensor t = test::random_tensor(dtype, shape, 5);
      struct OneArray {
        Tensor t;
      };
      MaterializerEntry entry;  // an array materializer for the occasion
      entry.name = "test.one_array";
      entry.version = 1;
      entry.save = [](const void* v, ArtifactWriter& out) {
        const Tensor& t = static_cast<const OneArray*>(v)->t;
        out.write_array("a.npy", t.dtype(), t.shape(), ConstBytes(t.data(), t.nbytes()));
      };
      entry.load = [](const ArtifactReader&) { return std::shared_ptr<void>(); };
      OneArray value{t};
      auto one = store.save_erased(entry, &value, {});
      ArrayView a = store.open_artifact(one.digest).read_array("a.npy", dtype, static_cast<int>(shape.size()));
      CHECK(a.shape() == shape);
      CHECK(a.bytes().size() == t.nbytes());
      CHECK(std::memcmp(a.bytes().data(), t.data(), t.nbytes()) == 0);
    }
  }
  (void)saved;
}

TEST_CASE("Helpers refuse values that cannot be stored exactly", "[toolkit]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Detections d{{"a"}, {1}, {0.5f}, {{"x", std::nan("")}}};
  CHECK_THROWS_AS(store.save(d), InvalidArgument);
  CHECK_THROWS_WITH(store.save(d), Catch::Contains("JSON document 'info.json' at .x holds NaN"));
  d.info = {{"bad", std::string("\xc3\x28")}};
  CHECK_THROWS_WITH(store.save(d), Catch::Contains("JSON document 'info.json' at .bad") &&
                                       Catch::Contains("not valid UTF-8"));
  d.info = {{"inf", INFINITY}};
  CHECK_THROWS_WITH(store.save(d), Catch::Contains("an infinity"));
  CHECK(store.names().empty());
}

TEST_CASE("Helpers name what is wrong with a damaged file", "[toolkit][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::vector<std::int64_t> offsets_ok = {0, 2, 5};
  const std::string offsets_bytes = bytes_of(offsets_ok.data(), 24);
  std::vector<float> three = {1, 2, 3};
  const std::string floats = bytes_of(three.data(), 12);

  auto open_with = [&](std::map<std::string, std::string> files) {
    return store.open_artifact(store.save(RawFiles{std::move(files)}).digest);
  };
  auto fails = [](auto&& read, const std::string& text) {
    CHECK_THROWS_AS(read(), CorruptData);
    CHECK_THROWS_WITH(read(), Catch::Contains(text));
  };

  SECTION("arrays") {
    auto in = open_with({
        {"short.npy", npy(DType::float32, {3}, floats.substr(0, 8))},
        {"long.npy", npy(DType::float32, {3}, floats + "x")},
        {"ints.npy", npy(DType::int32, {3}, floats)},
        {"misaligned.npy", misaligned_npy(DType::float32, {3}) + floats},
        {"matrix.npy", npy(DType::float32, {1, 3}, floats)},
        {"not-npy", "hello, world"},
        {"bools.npy", npy(DType::bool_, {3}, std::string("\x00\x01\x02", 3))},
        {"big.npy", npy(DType::float32, {1ll << 40, 1ll << 40}, floats)},
    });
    fails([&] { return in.read_array("short.npy"); }, "holds 8 bytes of data, but its shape needs 12 (truncated)");
    fails([&] { return in.read_array("long.npy"); }, "(trailing bytes)");
    fails([&] { return in.read_array("ints.npy", DType::float32); }, "'ints.npy' holds int32 elements, expected float32");
    fails([&] { return in.read_array("misaligned.npy"); }, "not aligned for float32 elements");
    fails([&] { return in.read_array("matrix.npy", DType::float32, 1); }, "has 2 dimensions, expected 1");
    fails([&] { return in.read_array("not-npy"); }, "not a .npy file");
    fails([&] { return in.read_array("bools.npy"); }, "bool element 2 is byte 2");
    fails([&] { return in.read_array("big.npy"); }, "overflows");
    CHECK_THROWS_AS(in.read_array("absent.npy"), NotFound);
    CHECK_THROWS_WITH(in.read_array("short.npy"), Catch::Contains(in.label()));
  }
  SECTION("merged strings") {
    std::vector<std::int64_t> decreasing = {0, 4, 2, 5}, past = {0, 2, 9}, late_start = {1, 2, 5};
    auto in = open_with({
        {"ok.offsets.npy", npy(DType::int64, {3}, offsets_bytes)},
        {"ok.bytes", "abcde"},
        {"down.offsets.npy", npy(DType::int64, {4}, bytes_of(decreasing.data(), 32))},
        {"down.bytes", "abcde"},
        {"past.offsets.npy", npy(DType::int64, {3}, bytes_of(past.data(), 24))},
        {"past.bytes", "abcde"},
        {"start.offsets.npy", npy(DType::int64, {3}, bytes_of(late_start.data(), 24))},
        {"start.bytes", "abcde"},
        {"empty.offsets.npy", npy(DType::int64, {0}, "")},
        {"empty.bytes", ""},
        {"wide.offsets.npy", npy(DType::int32, {3}, bytes_of(std::vector<std::int32_t>{0, 2, 5}.data(), 12))},
        {"wide.bytes", "abcde"},
        {"nobytes.offsets.npy", npy(DType::int64, {3}, offsets_bytes)},
    });
    auto ok = in.read_strings("ok");
    CHECK(ok.to_vector() == std::vector<std::string>{"ab", "cde"});
    fails([&] { return in.read_strings("down"); }, "offset 2 (2) is below offset 1 (4)");
    fails([&] { return in.read_strings("past"); }, "the last offset is 9, but 'past.bytes' holds 5 bytes");
    fails([&] { return in.read_strings("start"); }, "the first offset is 1, not 0");
    fails([&] { return in.read_strings("empty"); }, "is empty; it holds at least the offset 0");
    fails([&] { return in.read_strings("wide"); }, "holds int32 elements, expected int64");
    CHECK_THROWS_AS(in.read_strings("nobytes"), NotFound);
  }
  SECTION("JSON documents") {
    auto in = open_with({{"bad.json", "{\"a\": "}, {"deep.json", std::string(100, '[') + std::string(100, ']')}});
    fails([&] { return in.read_json("bad.json"); }, "'bad.json' is not valid JSON");
    fails([&] { return in.read_json("deep.json"); }, "nesting deeper than 64");
  }
}

TEST_CASE("Helpers refuse malformed arrays at save time", "[toolkit]") {
  struct Bad {
    int kind;
  };
  MaterializerEntry entry;
  entry.name = "test.bad_array";
  entry.version = 1;
  entry.save = [](const void* v, ArtifactWriter& out) {
    std::vector<std::byte> bytes(12, std::byte{2});
    std::vector<std::int64_t> shape = {3};
    if (static_cast<const Bad*>(v)->kind == 0) out.write_array("a.npy", DType::float64, shape, bytes);
    if (static_cast<const Bad*>(v)->kind == 1) out.write_array("a.npy", DType::bool_, std::vector<std::int64_t>{12}, bytes);
    if (static_cast<const Bad*>(v)->kind == 2) out.write_array("a.npy", DType::int8, std::vector<std::int64_t>{-1}, bytes);
  };
  entry.load = [](const ArtifactReader&) { return std::shared_ptr<void>(); };
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Bad size{0}, bools{1}, negative{2};
  CHECK_THROWS_WITH(store.save_erased(entry, &size, {}), Catch::Contains("12 bytes given, but 3 float64 elements take 24"));
  CHECK_THROWS_WITH(store.save_erased(entry, &bools, {}), Catch::Contains("holds byte 2 at element 0"));
  CHECK_THROWS_WITH(store.save_erased(entry, &negative, {}), Catch::Contains("negative"));
  CHECK(store.artifacts().empty());
}

TEST_CASE("Helpers read only regular files inside the artifact", "[toolkit][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto saved = store.save(Detections{{"a", "b"}, {1, 2}, {0.5f, 0.25f}, {{"k", 1}}});
  auto art = test::object_dir(dir / "store", saved.digest);
  ArtifactReader in = store.open_artifact(saved.digest);

  SECTION("a symbolic link out of the store, of the right size, is not followed") {
    test::write_text(dir / "outside", test::read_text(art / "paths.bytes"));
    std::filesystem::remove(art / "paths.bytes");
    std::filesystem::create_symlink(dir / "outside", art / "paths.bytes");
    CHECK_THROWS_AS(in.read_strings("paths"), CorruptData);
    CHECK_THROWS_WITH(in.read_strings("paths"), Catch::Contains("'paths.bytes' is a symbolic link"));
    CHECK_FALSE(store.verify(saved.digest.str()).ok());
  }
  SECTION("a FIFO is refused at once, not waited on") {
    std::filesystem::remove(art / "info.json");
    REQUIRE(::mkfifo((art / "info.json").c_str(), 0644) == 0);
    CHECK_THROWS_AS(in.read_json("info.json"), CorruptData);
    CHECK_THROWS_WITH(in.read_json("info.json"), Catch::Contains("is a FIFO, not a regular file"));
  }
  SECTION("a file cut short after it was stored") {
    std::filesystem::resize_file(art / "widths", 70);
    CHECK_THROWS_AS(in.read_array("widths", DType::int32, 1), CorruptData);
    CHECK_THROWS_WITH(in.read_array("widths", DType::int32, 1), Catch::Contains("but the manifest says"));
  }
}

namespace {
struct EncodedColumns {
  std::vector<std::int64_t> values;
};
}  // namespace

template <>
struct amphora::materializer<EncodedColumns> {
  static constexpr std::string_view name = "test.encoded_columns";
  static constexpr int version = 1;
  static void save(const EncodedColumns& e, ArtifactWriter& out) {
    out.write_array<std::int64_t>("plain.npy", e.values);
    out.write_array<std::int64_t>("squeeze.npy", e.values, {.squeeze = true});
    out.write_array<std::int64_t>("delta.npy", e.values, {.delta = true, .squeeze = true});
    out.write_array<std::int64_t>("shuffle.npy", e.values, {.shuffle = true});
    const std::int64_t grid[] = {50, 100};
    out.write_array("grid.npy", DType::int64, grid, std::as_bytes(std::span<const std::int64_t>(e.values)), {.squeeze = true});
  }
  static EncodedColumns load(const ArtifactReader&) { return {}; }
};

TEST_CASE("Ranges of arrays read their elements alone, or the whole file where the encoding needs it", "[toolkit][partial]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  EncodedColumns e;
  for (std::int64_t i = 0; i < 5000; ++i) e.values.push_back(i * 7 + (i % 7));  // rising: delta applies
  const auto reader = store.open_artifact(store.save(e).digest);
  std::string ints;
  for (std::int32_t i = 0; i < 1000; ++i) ints += bytes_of(&i, 4);
  // Headers of 128 bytes, of 2 KiB (read a second time) and of 70,400 bytes
  // (a version 2.0 header too long to chase: read whole).
  std::string huge_header = std::string("\x93NUMPY\x02\x00", 8);
  const std::uint32_t huge_length = 70400 - 12;
  huge_header += bytes_of(&huge_length, 4);
  huge_header += "{'descr': '<i4', 'fortran_order': False, 'shape': (1000,), }";
  huge_header += std::string(70400 - 1 - huge_header.size(), ' ') + "\n";
  RawFiles raw{{{"short.npy", npy(DType::int32, {1000}, ints)},
                {"long.npy", npy(DType::int32, {1000}, ints, 2048)},
                {"huge.npy", huge_header + ints},
                {"two_d.npy", npy(DType::int32, {10, 100}, ints)}}};
  const auto raw_reader = store.open_artifact(store.save(raw).digest);

  for (auto [b, e2] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 1000}, {0, 1}, {999, 1000}, {17, 530}, {400, 400}}) {
    INFO("elements " << b << ".." << e2);
    for (const char* file : {"plain.npy", "squeeze.npy", "delta.npy", "shuffle.npy"}) {
      const ArrayView part = reader.read_array_range(file, DType::int64, 5000, b, e2);
      REQUIRE(part.size() == e2 - b);
      for (std::uint64_t i = b; i < e2; ++i) CHECK(part.values<std::int64_t>()[i - b] == e.values[i]);
    }
    for (const char* file : {"short.npy", "long.npy", "huge.npy"}) {
      INFO(file);
      const ArrayView part = raw_reader.read_array_range(file, DType::int32, 1000, b, e2);
      REQUIRE(part.size() == e2 - b);
      for (std::uint64_t i = b; i < e2; ++i) CHECK(part.values<std::int32_t>()[i - b] == static_cast<std::int32_t>(i));
    }
  }
  CHECK(reader.array_length("delta.npy") == 5000);
  CHECK(raw_reader.array_length("long.npy") == 1000);
  CHECK(raw_reader.array_length("huge.npy") == 1000);
  // Wrong expectations are named, not read past.
  CHECK_THROWS_WITH(raw_reader.read_array_range("short.npy", DType::int32, 999, 0, 10), Catch::Contains("1000 elements where 999"));
  CHECK_THROWS_WITH(raw_reader.read_array_range("short.npy", DType::int64, 1000, 0, 10), Catch::Contains("expected int64"));
  CHECK_THROWS_AS(raw_reader.read_array_range("two_d.npy", DType::int32, 1000, 0, 10), CorruptData);
  CHECK_THROWS_WITH(reader.read_array_range("grid.npy", DType::int64, 5000, 0, 10), Catch::Contains("2 dimensions"));
  CHECK_THROWS_AS(raw_reader.read_array_range("short.npy", DType::int32, 1000, 10, 1001), InvalidArgument);
  CHECK_THROWS_AS(raw_reader.read_array_range("short.npy", DType::int32, 1000, 11, 10), InvalidArgument);
  CHECK_THROWS_AS(raw_reader.read_array_range("absent.npy", DType::int32, 1000, 0, 1), NotFound);
  CHECK_THROWS_AS(raw_reader.array_length("two_d.npy"), CorruptData);
}

TEST_CASE("Strings at scattered indices are read in a few reads, nearby ones together", "[toolkit][partial]") {
  auto reads = std::make_shared<testing::ReadCount>();
  Store store = Store::open({.create = true, .medium = testing::make_memory_medium("memory", reads)});
  Detections d;
  for (int i = 0; i < 100000; ++i) {
    d.paths.push_back(i % 11 == 0 ? std::string() : "word-" + std::to_string(i));
    d.widths.push_back(i);
    d.scores.push_back(0);
  }
  const auto reader = store.open_artifact(store.save(d).digest);
  const std::vector<std::uint64_t> indices{0, 5, 6, 7, 9, 11, 50000, 99999};
  reads->calls = 0;
  const StringsView some = reader.read_strings_at("paths", 100000, indices);
  REQUIRE(some.size() == indices.size());
  for (std::size_t k = 0; k < indices.size(); ++k) CHECK(some[k] == d.paths[indices[k]]);
  // The offsets' header (which holds the first run), two more runs of
  // offsets, and three of bytes: not three reads a string.
  CHECK(reads->calls <= 6);
  CHECK(reader.read_strings_at("paths", 100000, std::vector<std::uint64_t>{}).size() == 0);
  CHECK(reader.read_strings_at("paths", 100000, std::vector<std::uint64_t>{0, 11}).size() == 2);  // two empty strings
  CHECK_THROWS_AS(reader.read_strings_at("paths", 100000, std::vector<std::uint64_t>{7, 5}), InvalidArgument);
  CHECK_THROWS_AS(reader.read_strings_at("paths", 100000, std::vector<std::uint64_t>{5, 5}), InvalidArgument);
  CHECK_THROWS_WITH(reader.read_strings_at("paths", 100000, std::vector<std::uint64_t>{100000}),
                    Catch::Contains("index 100000 lies outside its 100000"));
  CHECK_THROWS_WITH(reader.read_strings_at("paths", 99999, std::vector<std::uint64_t>{5}),
                    Catch::Contains("100001 elements where 100000"));
}

TEST_CASE("Strings at indices find damaged offsets in what they read", "[toolkit][partial][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::string offsets;
  for (std::int64_t o : {0, 3, 6, 2, 12, 1000}) offsets += bytes_of(&o, 8);
  RawFiles raw{{{"w.offsets.npy", npy(DType::int64, {6}, offsets)}, {"w.bytes", "abcdefghijkl"}}};
  const auto reader = store.open_artifact(store.save(raw).digest);
  const StringsView fine = reader.read_strings_at("w", 5, std::vector<std::uint64_t>{0, 1});
  CHECK(fine[0] == "abc");
  CHECK(fine[1] == "def");
  CHECK_THROWS_WITH(reader.read_strings_at("w", 5, std::vector<std::uint64_t>{2}),
                    Catch::Contains("w.offsets.npy") && Catch::Contains("offset 3 (2) is below offset 2 (6)"));
  CHECK_THROWS_WITH(reader.read_strings_at("w", 5, std::vector<std::uint64_t>{4}),
                    Catch::Contains("lie outside 'w.bytes' (12 bytes)"));
  // Strings far apart (read in runs of their own) whose offsets go back:
  // every word would span the whole bytes file, read once per word.
  std::string back;
  for (std::int64_t k = 0; k <= 20000; ++k) {
    const std::int64_t o = k <= 10000 ? k : k - 10000;
    back += bytes_of(&o, 8);
  }
  RawFiles rewound{{{"r.offsets.npy", npy(DType::int64, {20001}, back)}, {"r.bytes", std::string(10000, 'x')}}};
  const auto rewound_reader = store.open_artifact(store.save(rewound).digest);
  CHECK(rewound_reader.read_strings_at("r", 20000, std::vector<std::uint64_t>{0, 9999}).size() == 2);
  CHECK_THROWS_WITH(rewound_reader.read_strings_at("r", 20000, std::vector<std::uint64_t>{9999, 19000}),
                    Catch::Contains("r.offsets.npy") && Catch::Contains("offset 19000 (9000) is below offset 10000 (10000)"));
}
