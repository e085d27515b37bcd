#include "support.hpp"
#include "artifact_context.hpp"

#include <bit>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

using namespace amphora;

TEST_CASE("SHA-256 matches the standard test vectors", "[digest]") {
  CHECK(Sha256::of("").hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256::of("abc").hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 h;
  h.update("a", 1);
  h.update("bc", 2);
  CHECK(h.finish() == Sha256::of("abc"));
  CHECK(h.finish() == Sha256::of(""));  // finish() resets
}

TEST_CASE("Digest strings parse strictly", "[digest]") {
  std::string hex(64, 'a');
  CHECK(Digest::parse("sha256:" + hex).hex() == hex);
  CHECK(Digest::is_digest("sha256:" + hex));
  CHECK_FALSE(Digest::is_digest("sha256:" + hex.substr(1)));
  CHECK_FALSE(Digest::is_digest("md5:" + hex));
  CHECK_THROWS_AS(Digest::parse("sha256:" + std::string(64, 'A')), InvalidArgument);
  CHECK_THROWS_WITH(Digest::parse("sha256:xyz"), Catch::Contains("sha256:xyz"));
}

namespace {
Manifest sample_manifest() {
  Manifest m;
  m.materializer = "test.sample";
  m.materializer_version = 2;
  m.files.push_back({"a.bin", 5000, 4096, {Sha256::of("x"), Sha256::of("y")}});
  m.files.push_back({"dir/b.bin", 0, 4096, {Sha256::of("")}});
  m.meta = {{"zeta", 1}, {"alpha", {{"y", 2.5}, {"x", "text"}}}};
  return m;
}
}  // namespace

TEST_CASE("Manifests have one canonical form with sorted keys", "[manifest]") {
  Manifest m = sample_manifest();
  std::string text = m.canonical();
  CHECK(text.find(' ') == std::string::npos);
  CHECK(text.rfind("{\"children\":[],\"files\":[{\"path\":\"a.bin\",\"piece_size\":4096,\"sha256\":[", 0) == 0);
  CHECK(text.find("\"meta\":{\"alpha\":{\"x\":\"text\",\"y\":2.5},\"zeta\":1}") != std::string::npos);
  Manifest back = Manifest::parse(text, "test");
  CHECK(back.canonical() == text);
  CHECK(back.digest() == m.digest());
  CHECK(m.digest().value() == Sha256::of(text));
  CHECK(back.find("dir/b.bin") != nullptr);
  CHECK(back.find("missing") == nullptr);
  CHECK(back.payload_bytes() == 5000);
}

namespace {
// The document a manifest's canonical text is the canonical_json of
// (FORMAT.md §3.3), built as a reader would see it.
nlohmann::json manifest_document(const Manifest& m) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : m.files) {
    nlohmann::json pieces = nlohmann::json::array();
    for (const auto& p : f.pieces) pieces.push_back(p.hex());
    files.push_back({{"path", f.path}, {"piece_size", f.piece_size}, {"sha256", pieces}, {"size", f.size}});
  }
  nlohmann::json doc = {{"manifest_version", m.manifest_version},
                        {"materializer", {{"name", m.materializer}, {"version", m.materializer_version}}},
                        {"files", files},
                        {"meta", m.meta}};
  if (m.manifest_version >= 2) {
    doc["children"] = nlohmann::json::array();
    for (const auto& c : m.children) doc["children"].push_back({{"digest", c.digest.str()}, {"role", c.role}});
  }
  return doc;
}
}  // namespace

TEST_CASE("A manifest's canonical text is canonical_json of its document, whatever it holds", "[manifest][canonical]") {
  std::mt19937 rng(20261129);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  // Strings that need escaping or are multi-byte, beside plain ones; the
  // first seven are safe artifact paths, so a manifest of them reads back.
  const std::vector<std::string> words = {"a", "x.bin", "col \"q\"", "caf\xc3\xa9", "\xe2\x82\xac/\xf0\x9f\x99\x82",
                                          "deep/er/path.npy", std::string(300, 'w'), "back\\slash", "tab\there",
                                          "ctl\x01\x1f", "new\nline", "del\x7f"};
  constexpr std::size_t kSafeWords = 7;
  const std::vector<int> versions = {1, 2, 3, 0, -1, std::numeric_limits<int>::max(), std::numeric_limits<int>::min()};
  const std::vector<std::uint64_t> sizes = {0, 1, 3000, 1ull << 33, std::numeric_limits<std::uint64_t>::max()};
  for (int round = 0; round < 80; ++round) {
    INFO("round " << round);
    // Even rounds are manifests a store writes (safe paths, piece counts
    // that match, versions a reader accepts); odd ones anything the type can
    // hold, which canonical() writes all the same.
    const bool valid = round % 2 == 0;
    auto word = [&] { return words[pick(valid ? kSafeWords : words.size())]; };
    Manifest m;
    m.materializer = word();
    m.materializer_version = valid ? 1 + static_cast<int>(pick(4)) : versions[pick(versions.size())];
    m.manifest_version = valid ? 1 + static_cast<int>(pick(2)) : versions[pick(versions.size())];
    // Up to 700 files: past 512 the canonical writer splits an array into
    // blocks for the worker threads.
    const std::size_t nfiles = round % 10 >= 8 ? 700 : pick(8);
    for (std::size_t i = 0; i < nfiles; ++i) {
      FileEntry f{word() + std::to_string(i), 0, 0, {}};
      f.size = valid ? pick(3) * 3000ull : sizes[pick(sizes.size())];
      f.piece_size = valid ? 4096ull << pick(3) : (pick(2) ? 4096 : std::numeric_limits<std::uint64_t>::max());
      for (auto k = valid ? piece_count(f.size, f.piece_size) : pick(3); k > 0; --k) f.pieces.push_back(Sha256::of(std::to_string(rng())));
      m.files.push_back(std::move(f));
    }
    std::sort(m.files.begin(), m.files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    if (m.manifest_version >= 2)
      for (std::size_t i = pick(4); i > 0; --i) m.children.push_back({word() + std::to_string(i), Digest(Sha256::of(std::to_string(i)))});
    std::sort(m.children.begin(), m.children.end(), [](const auto& a, const auto& b) { return a.role < b.role; });
    m.meta = {{"shape", {pick(100), pick(100)}}, {"name", word()}, {"loss", 0.1 * static_cast<double>(pick(1000))},
              {"nested", {{"z", nullptr}, {"a", {true, false, -static_cast<std::int64_t>(pick(99))}}}}};
    if (round % 5 == 0) m.meta = nlohmann::json::object();
    if (!valid && round % 5 == 1) {
      const std::vector<nlohmann::json> others = {nullptr, 3.5, "text", -7, true, nlohmann::json::array()};
      m.meta = others[pick(others.size())];
      if (m.meta.is_array())
        for (int i = 0; i < 600; ++i) m.meta.push_back(i % 2 ? nlohmann::json(word()) : nlohmann::json(i));
    }
    const std::string text = m.canonical();
    REQUIRE(text == canonical_json(manifest_document(m)));
    if (valid) CHECK(Manifest::parse(text, "test").canonical() == text);
  }
}

TEST_CASE("A manifest that JSON cannot hold exactly is refused with the key path of what is wrong", "[manifest][canonical]") {
  Manifest m = sample_manifest();
  m.files[1].path = "dir/b\xff.bin";
  CHECK_THROWS_AS(m.canonical(), InvalidArgument);
  CHECK_THROWS_WITH(m.canonical(), Catch::Equals("manifest at .files[1].path holds a string that is not valid UTF-8"));
  m = sample_manifest();
  m.materializer = "bad\xc0\x80";
  CHECK_THROWS_WITH(m.canonical(), Catch::Equals("manifest at .materializer.name holds a string that is not valid UTF-8"));
  m = sample_manifest();
  m.children = {{"ok", Digest(Sha256::of("a"))}, {"r\xed\xa0\x80", Digest(Sha256::of("b"))}};
  CHECK_THROWS_WITH(m.canonical(), Catch::Equals("manifest at .children[1].role holds a string that is not valid UTF-8"));
  m = sample_manifest();
  m.meta["alpha"]["y"] = std::nan("");
  CHECK_THROWS_WITH(m.canonical(), Catch::Equals("manifest at .meta.alpha.y holds NaN, which JSON cannot represent"));
  m = sample_manifest();
  m.meta["list"] = {1, std::string("\xfe")};
  CHECK_THROWS_WITH(m.canonical(), Catch::Equals("manifest at .meta.list[1] holds a string that is not valid UTF-8"));
  m = sample_manifest();
  m.meta["k\xff"] = 1;
  CHECK_THROWS_WITH(m.canonical(), Catch::Equals("manifest at .meta has a key that is not valid UTF-8"));
  // With several problems, the first in key order is named: children,
  // files, materializer, meta.
  m = sample_manifest();
  m.meta["alpha"]["y"] = std::nan("");
  m.materializer = "bad\xff";
  CHECK_THROWS_WITH(m.canonical(), Catch::StartsWith("manifest at .materializer.name "));
  m.files[0].path = "a\xff";
  CHECK_THROWS_WITH(m.canonical(), Catch::StartsWith("manifest at .files[0].path "));
  m.children = {{"r\xff", Digest(Sha256::of("b"))}};
  CHECK_THROWS_WITH(m.canonical(), Catch::StartsWith("manifest at .children[0].role "));
  // In a long array the first bad item is named, wherever it falls.
  m = sample_manifest();
  m.files.clear();
  for (int i = 0; i < 1500; ++i) m.files.push_back({"f" + std::to_string(i), 0, 4096, {Sha256::of("")}});
  m.files[1400].path += "\xff";
  m.files[1450].path += "\xff";
  CHECK_THROWS_WITH(m.canonical(), Catch::Equals("manifest at .files[1400].path holds a string that is not valid UTF-8"));
  m.meta = nlohmann::json::array();
  for (int i = 0; i < 1500; ++i) m.meta.push_back(i == 900 || i == 1300 ? std::nan("") : 1.0);
  m.files[1400].path = "ok";
  m.files[1450].path = "ok2";
  CHECK_THROWS_WITH(m.canonical(), Catch::Equals("manifest at .meta[900] holds NaN, which JSON cannot represent"));
}

TEST_CASE("Manifest parsing rejects malformed and unsafe manifests", "[manifest]") {
  auto doc = nlohmann::json::parse(sample_manifest().canonical());
  auto expect_corrupt = [](const nlohmann::json& j, const std::string& fragment) {
    CHECK_THROWS_AS(Manifest::parse(j.dump(), "artifact X"), CorruptData);
    CHECK_THROWS_WITH(Manifest::parse(j.dump(), "artifact X"), Catch::Contains(fragment) && Catch::Contains("artifact X"));
  };
  CHECK_THROWS_WITH(Manifest::parse("{not json", "artifact X"), Catch::Contains("not valid JSON"));
  CHECK_THROWS_AS(Manifest::parse("[]", "artifact X"), CorruptData);

  for (auto [path, reason] : {std::pair{"../escape", "'..' component"}, std::pair{"/etc/passwd", "absolute"},
                              std::pair{"dir/.hidden", "hidden"}, std::pair{"manifest.json", "reserved"}}) {
    auto bad_path = doc;
    bad_path["files"][0]["path"] = path;
    expect_corrupt(bad_path, reason);
  }
  auto j = doc;
  j["files"][0]["sha256"].erase(1);
  expect_corrupt(j, "piece digests");
  j = doc;
  std::swap(j["files"][0], j["files"][1]);
  expect_corrupt(j, "not sorted");
  j = doc;
  j["extra"] = 1;
  expect_corrupt(j, "unknown field \"extra\"");
  j = doc;
  j["files"][0]["size"] = -5;
  expect_corrupt(j, "non-negative integer");
  j = doc;
  j["files"][0]["piece_size"] = 7;
  expect_corrupt(j, "piece_size");
  j = doc;
  j["piece_size"] = 4096;  // belongs to each file, not the manifest
  expect_corrupt(j, "unknown field \"piece_size\"");
  j = doc;
  j["files"][0]["sha256"][0] = "zz";
  expect_corrupt(j, "64 digits");
  j = doc;
  j["manifest_version"] = 3;
  CHECK_THROWS_AS(Manifest::parse(j.dump(), "artifact X"), Unsupported);
  CHECK_THROWS_WITH(Manifest::parse(j.dump(), "artifact X"), Catch::Contains("newer Amphora"));
}

TEST_CASE("Payload paths are confined to the artifact", "[manifest]") {
  for (const char* ok : {"tensor.npy", "columns/a.npy", "a-b_c.d"}) CHECK_NOTHROW(validate_artifact_path(ok, "w"));
  for (const char* bad : {"", "/abs", "a//b", "a/./b", "..", "a/../b", ".x", "a\\b", "a/", "tab\there"})
    CHECK_THROWS_AS(validate_artifact_path(bad, "w"), CorruptData);
}

TEST_CASE("parallel_for runs every index once and propagates the first error", "[parallel]") {
  std::vector<std::atomic<int>> hits(1000);
  parallel_for(hits.size(), [&](std::size_t i) { hits[i]++; });
  for (auto& h : hits) CHECK(h.load() == 1);

  // Nested loops cannot deadlock because the caller takes part.
  std::atomic<int> total{0};
  parallel_for(8, [&](std::size_t) { parallel_for(8, [&](std::size_t) { total++; }); });
  CHECK(total.load() == 64);

  CHECK_THROWS_WITH(parallel_for(100,
                                 [](std::size_t i) {
                                   if (i == 37) throw InvalidArgument("index 37 failed");
                                 }),
                    "index 37 failed");
}

TEST_CASE("A thread waiting for its loop helps with the loops nested beneath it", "[parallel]") {
  const std::size_t threads = parallel_threads();
  if (threads < 2) {
    WARN("one thread: there is nobody to help");
    return;
  }
  // One worker runs a nested loop; every other worker is held inside the
  // outer loop until the nested one is done, and the calling thread's own
  // index returns at once. Only the caller, waiting for the outer loop, is
  // free to take the nested loop's indices, and it must.
  const auto caller = std::this_thread::get_id();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto wait_for = [&](const std::atomic<bool>& flag) {
    while (!flag.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    return flag.load();
  };
  std::atomic<bool> nested_started{false}, nested_done{false}, runner_taken{false};
  std::atomic<int> by_caller{0}, nested_total{0};
  parallel_for(threads, [&](std::size_t) {
    if (std::this_thread::get_id() == caller) {
      wait_for(nested_started);
      return;
    }
    if (runner_taken.exchange(true)) {
      wait_for(nested_done);
      return;
    }
    nested_started = true;
    parallel_for(64, [&](std::size_t) {
      if (std::this_thread::get_id() == caller) by_caller++;
      nested_total++;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    nested_done = true;
  });
  CHECK(nested_total.load() == 64);
  CHECK(by_caller.load() > 0);
}

TEST_CASE("Piece digests are plain SHA-256 of each piece, however the parts are cut", "[digest][pieces]") {
  test::TempDir dir;
  auto medium = open_local_medium(dir.path(), true);
  detail::ArtifactArea artifacts(medium);
  std::mt19937 rng(5);
  // 70 pieces of 4 KiB: enough for the sixteen-lane path on every thread count up to 4.
  const std::size_t piece = 4096, total = 70 * piece + 123;
  std::vector<std::byte> bytes(total);
  for (auto& b : bytes) b = static_cast<std::byte>(rng());
  for (std::size_t cut : {std::size_t{1}, std::size_t{63}, std::size_t{4096}, std::size_t{10007}, total}) {
    INFO("parts of " << cut << " bytes");
    std::vector<ConstBytes> parts;
    for (std::size_t at = 0; at < total; at += cut) parts.emplace_back(bytes.data() + at, std::min(cut, total - at));
    auto owned = detail::ArtifactAccess::writer(artifacts.begin(), {}, piece);
    ArtifactWriter& writer = *owned;
    writer.write_file("data.bin", std::span<const ConstBytes>(parts));
    FileStream stream = writer.open_stream("stream.bin");
    stream.append(std::span<const ConstBytes>(parts));
    stream.close();
    Manifest m = detail::ArtifactAccess::finish(writer, "test.pieces", 1);
    detail::ArtifactAccess::publish(writer, artifacts, m.digest());  // the same bytes every time: later rounds deduplicate
    static const Digest first_digest = m.digest();
    CHECK(m.digest() == first_digest);
    for (const char* file : {"data.bin", "stream.bin"}) {
      const FileEntry* e = m.find(file);
      REQUIRE(e->size == total);
      REQUIRE(e->pieces.size() == 71);
      for (std::size_t k = 0; k < e->pieces.size(); ++k)
        REQUIRE(e->pieces[k] == Sha256::of(bytes.data() + k * piece, std::min(piece, total - k * piece)));
      auto mapped = artifacts.map_listed(m.digest(), file, total);
      REQUIRE(std::memcmp(mapped->data(), bytes.data(), total) == 0);
    }
  }
}

TEST_CASE("Files get at most 256 pieces of at least 2 MiB", "[digest][pieces]") {
  constexpr std::uint64_t MiB = 1u << 20;
  CHECK(Manifest::piece_size_for(0) == 2 * MiB);
  CHECK(Manifest::piece_size_for(512 * MiB) == 2 * MiB);
  CHECK(Manifest::piece_size_for(512 * MiB + 1) == 4 * MiB);
  CHECK(Manifest::piece_size_for(1024 * MiB) == 4 * MiB);
  CHECK(Manifest::piece_size_for(1ull << 40) == 4096 * MiB);
  for (std::uint64_t size : {std::uint64_t{1}, 100 * MiB, 3000 * MiB, std::uint64_t{(1ull << 40) + 5}})
    CHECK(piece_count(size, Manifest::piece_size_for(size)) <= Manifest::kMaxPieces);
  CHECK(Manifest::piece_size_for(100, 4096) == 4096);
}

TEST_CASE("Files of 256 KiB to 2 MiB get at most four pieces, so that both cores hash them", "[digest][pieces]") {
  constexpr std::uint64_t KiB = 1u << 10, MiB = 1u << 20;
  CHECK(Manifest::piece_size_for(256 * KiB) == 2 * MiB);  // one piece: sha256sum of the file
  CHECK(Manifest::piece_size_for(256 * KiB + 1) == 128 * KiB);
  CHECK(Manifest::piece_size_for(512 * KiB) == 128 * KiB);
  CHECK(Manifest::piece_size_for(512 * KiB + 1) == 256 * KiB);
  CHECK(Manifest::piece_size_for(819'200 + 128) == 256 * KiB);  // 50 images of 128 x 128 bytes with their header
  CHECK(Manifest::piece_size_for(1 * MiB + 1) == 512 * KiB);
  CHECK(Manifest::piece_size_for(2 * MiB) == 512 * KiB);
  CHECK(Manifest::piece_size_for(2 * MiB + 1) == 2 * MiB);  // two pieces of the usual size
  for (std::uint64_t size = 256 * KiB + 1; size <= 2 * MiB; size += 4093) {
    const std::uint64_t piece = Manifest::piece_size_for(size);
    CHECK(std::has_single_bit(piece));
    CHECK(piece_count(size, piece) <= Manifest::kSmallFilePieces);
    CHECK(piece_count(size, piece / 2) > Manifest::kSmallFilePieces);  // the smallest such size
  }
  // A store's own smaller piece size (tests use it) is kept as it was.
  CHECK(Manifest::piece_size_for(300 * KiB, 4096) == 4096);
}

TEST_CASE("canonical_json and json_digest are stable and strict", "[canonical]") {
  using amphora::canonical_json;
  using amphora::json_digest;
  auto a = nlohmann::json::parse(R"({"b": [3, 1.5, "é"], "a": {"z": null, "y": true}, "B": -7})");
  auto b = nlohmann::json::parse(R"({"B": -7, "a": {"y": true, "z": null}, "b": [3, 1.5, "é"]})");
  CHECK(canonical_json(a) == R"({"B":-7,"a":{"y":true,"z":null},"b":[3,1.5,"é"]})");
  CHECK(canonical_json(a) == canonical_json(b));  // key order in the source does not matter
  CHECK(json_digest(a) == json_digest(b));
  CHECK(json_digest(a).value() == amphora::Sha256::of(canonical_json(a)));
  // Integers and floats stay distinct; array order matters.
  CHECK(json_digest(nlohmann::json(1)) != json_digest(nlohmann::json(1.0)));
  CHECK(canonical_json(nlohmann::json(1.0)) == "1.0");
  CHECK(json_digest(nlohmann::json::array({1, 2})) != json_digest(nlohmann::json::array({2, 1})));
  CHECK(canonical_json(nlohmann::json("a\"\\\n\x01/")) == "\"a\\\"\\\\\\n\\u0001/\"");
  // What JSON cannot represent, or could not be read back, is refused.
  CHECK_THROWS_AS(canonical_json(nlohmann::json{{"x", std::nan("")}}), amphora::InvalidArgument);
  CHECK_THROWS_WITH(canonical_json(nlohmann::json{{"x", {1, INFINITY}}}), Catch::Contains(".x[1]"));
  CHECK_THROWS_AS(canonical_json(nlohmann::json(std::string("\xc3\x28"))), amphora::InvalidArgument);
  // The manifest digest is this function applied to the manifest document.
  amphora::Manifest m;
  m.materializer = "test.x";
  m.materializer_version = 1;
  m.meta = {{"k", 1}};
  CHECK(m.digest().value() == amphora::Sha256::of(m.canonical()));
  CHECK(m.canonical() == canonical_json(nlohmann::json::parse(m.canonical())));
}
