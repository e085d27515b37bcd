// Record collections: JSON-like records round-trip exactly (types, key
// order, missing versus null) through the columnar store and through JSON
// lines; one field whose types disagree falls back to JSON alone; damage and
// bad input are named.

#include "support.hpp"
#include "memory_medium.hpp"

#include <amphora/record_collection.hpp>
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sys/stat.h>
#include <limits>

using namespace amphora;
using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

// COCO-style detections with the awkward cases mixed in.
std::vector<ojson> detections(std::size_t n) {
  std::vector<ojson> out;
  const char* labels[] = {"person", "car", "\xe7\x8c\xab", "\xf0\x9f\x90\xb6 dog"};
  for (std::size_t i = 0; i < n; ++i) {
    ojson r;
    r["filepath"] = "images/" + std::to_string(100000 + i) + ".jpg";
    r["width"] = 640 + static_cast<int>(i % 3);
    r["height"] = 480;
    ojson boxes = ojson::array(), names = ojson::array(), areas = ojson::array();
    for (std::size_t b = 0; b < i % 4; ++b) {
      const double x = static_cast<double>((i * 37 + b * 11) % 600) + 0.25;
      boxes.push_back({x, x / 2, x + 10.5, x + 20.75});
      names.push_back(labels[(i + b) % 4]);
      areas.push_back(10.5 * 20.75 * static_cast<double>(b + 1));
    }
    r["bboxes"] = boxes;
    r["labels"] = names;
    r["areas"] = areas;
    r["iscrowd"] = i % 5 == 0;
    if (i % 3 == 0) r["note"] = nullptr;          // null, present
    if (i % 4 == 1) r["extra"] = {{"k", i}};      // a field most records lack
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<ojson> awkward() {
  std::vector<ojson> v;
  v.push_back(ojson::parse(R"({"b":1,"a":[],"c":{"x":1.5e300,"y":5e-324}})"));
  v.push_back(ojson::parse(R"({"a":[1,2,3],"b":-9223372036854775808,"c":{"y":-0.0,"x":2.2250738585072014e-308}})"));
  v.push_back(ojson::parse(R"({"c":null,"b":9007199254740993})"));
  v.push_back(ojson::parse(R"({"a":[[]],"mixed":"text","b":0})"));
  v.push_back(ojson::parse(R"({"mixed":{"nested":[1,"two",null]},"b":1,"big":18446744073709551615})"));
  v.push_back(ojson::parse(R"({"mixed":3,"b":2,"s":"a\u0000b\n\"q\"\\ \u001f"})"));
  v.push_back(ojson::parse(R"({})"));
  v.push_back(nullptr);
  v.push_back(ojson::parse(R"({"b":3,"deep":)" + std::string(21, '[') + "1" + std::string(21, ']') + "}"));
  return v;
}

void check_equal(const RecordCollection& c, const std::vector<ojson>& expected) {
  REQUIRE(c.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("record " << i);
    CHECK(c.record_json(i) == expected[i].dump());
    CHECK(c.record(i) == expected[i]);
  }
}

const nlohmann::json* field(const nlohmann::json& schema, const std::string& name) {
  for (const auto& f : schema["fields"])
    if (f["name"] == name) return &f;
  return nullptr;
}

}  // namespace

TEST_CASE("Records round-trip exactly through the store", "[records]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  for (const auto& input : {detections(200), awkward()}) {
    const RecordCollection c = RecordCollection::from_json(input);
    check_equal(c, input);
    auto saved = store.save(c, {.name = "r"});
    for (bool eager : {false, true}) {
      const auto back = store.load<RecordCollection>(saved.digest, {.eager = eager});
      check_equal(back, input);
      CHECK(back.equals(c));
      CHECK(back.schema() == c.schema());
    }
    CHECK(store.verify(saved.digest.str()).ok());
    // Same records, same digest; a loaded collection saves to the same bytes.
    CHECK(store.save(RecordCollection::from_json(input)).digest == saved.digest);
    CHECK(store.save(store.load<RecordCollection>(saved.digest)).digest == saved.digest);
  }
}

TEST_CASE("The schema is inferred per field, falling back to JSON for one field only", "[records]") {
  const auto schema = RecordCollection::from_json(detections(50)).schema();
  CHECK(schema["kind"] == "object");
  CHECK((*field(schema, "width"))["kind"] == "int");
  CHECK((*field(schema, "iscrowd"))["kind"] == "bool");
  CHECK((*field(schema, "bboxes"))["items"]["items"]["kind"] == "float");
  CHECK((*field(schema, "labels"))["items"]["kind"] == "string");
  CHECK((*field(schema, "note"))["kind"] == "null");
  CHECK((*field(schema, "note"))["optional"] == true);
  CHECK((*field(schema, "extra"))["kind"] == "object");
  CHECK((*field(schema, "extra"))["optional"] == true);
  CHECK((*field(schema, "width"))["optional"] == false);

  // Saved, the schema also carries statistics for `amphora show`.
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const auto saved = store.open_artifact(store.save(RecordCollection::from_json(detections(50))).digest).meta()["schema"];
  CHECK((*field(saved, "width"))["min"] == 640);
  CHECK((*field(saved, "width"))["max"] == 642);
  CHECK((*field(saved, "note"))["null_count"] == 17);
  CHECK((*field(saved, "note"))["missing_count"] == 33);
  CHECK((*field(saved, "bboxes"))["min_length"] == 0);
  CHECK((*field(saved, "bboxes"))["max_length"] == 3);
  CHECK((*field(saved, "bboxes"))["items"]["items"]["min"] == 6.625);
  CHECK((*field(saved, "bboxes"))["items"]["items"]["max"] == 598.0);
  CHECK((*field(saved, "labels"))["items"]["distinct"] == 4);
  CHECK((*field(saved, "extra"))["missing_count"] == 37);
  // Distinct counts only values: not the empty text of a missing key.
  const auto sparse = RecordCollection::from_json(std::vector<ojson>{{{"s", "x"}}, ojson::object(), {{"s", nullptr}}});
  const auto sparse_schema = store.open_artifact(store.save(sparse).digest).meta()["schema"];
  CHECK((*field(sparse_schema, "s"))["distinct"] == 1);
  CHECK((*field(sparse_schema, "s"))["null_count"] == 1);
  CHECK((*field(sparse_schema, "s"))["missing_count"] == 1);

  const auto odd = RecordCollection::from_json(awkward()).schema();
  CHECK(odd["nullable"] == true);  // one record is null
  CHECK((*field(odd, "mixed"))["kind"] == "json");
  CHECK((*field(odd, "b"))["kind"] == "int");
  CHECK((*field(odd, "big"))["dtype"] == "uint64");
  CHECK((*field(odd, "c"))["key_order"] == "per_record");
  CHECK((*field(odd, "a"))["items"]["kind"] == "json");  // ints and lists
  // Nesting beyond the columns' depth is kept as JSON text below that depth.
  const nlohmann::json* deep = field(odd, "deep");
  int levels = 0;
  while ((*deep)["kind"] == "list") {
    deep = &(*deep)["items"];
    ++levels;
  }
  CHECK((*deep)["kind"] == "json");
  CHECK(levels < 21);

  // Integers and floats in one field: JSON, so neither changes type.
  const auto numbers = RecordCollection::from_json(std::vector<ojson>{{{"v", 1}}, {{"v", 1.0}}});
  CHECK((*field(numbers.schema(), "v"))["kind"] == "json");
  CHECK(numbers.record_json(0) == R"({"v":1})");
  CHECK(numbers.record_json(1) == R"({"v":1.0})");
}

TEST_CASE("Record i is read without the others", "[records]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const auto input = detections(1000);
  auto saved = store.save(RecordCollection::from_json(input));
  const auto back = store.load<RecordCollection>(saved.digest);
  for (std::size_t i : {999u, 0u, 513u}) CHECK(back.record(i) == input[i]);
  CHECK_THROWS_WITH(back.record(1000), Catch::Contains("record 1000 is out of range (1000 records)"));
  // Empty collections round-trip too.
  auto empty = store.save(RecordCollection::from_json(std::span<const ojson>{}));
  CHECK(store.load<RecordCollection>(empty.digest).size() == 0);
  CHECK(store.save(RecordCollection()).digest == empty.digest);
  CHECK(store.verify(empty.digest.str()).ok());
}

TEST_CASE("A range of records is read from its part of each column alone", "[records][partial]") {
  test::TempDir dir;
  // Every kind: dictionary and plain strings, lists of lists, nulls and
  // missing fields (bitmaps cut inside a byte), per-record key order, a JSON
  // fallback, decimals, full-range integers, an empty collection's end.
  std::vector<ojson> input = detections(300);
  const auto odd = awkward();
  for (std::size_t i = 0; i < 300; i += 13) input.insert(input.begin() + static_cast<std::ptrdiff_t>(i), odd[i / 13 % odd.size()]);
  for (std::size_t i = 0; i < input.size(); i += 7) input[i]["text"] = "plain text " + std::to_string(i * 7919);
  Store local = test::make_store(dir / "store");
  // A medium that copies what it maps, as a remote one does: ranges are read.
  Store copying = Store::open({.create = true, .medium = testing::make_memory_medium()});
  for (Store* store : {&local, &copying}) {
    auto reader = store->open_artifact(store->save(RecordCollection::from_json(input)).digest);
    for (auto [b, e] : std::vector<std::pair<std::size_t, std::size_t>>{
             {0, input.size()}, {0, 1}, {5, 6}, {13, 14}, {9, 41}, {100, 100}, {input.size() - 3, input.size()}}) {
      INFO("records " << b << ".." << e);
      const RecordCollection part = load_records(reader, {.rows = std::pair{b, e}});
      REQUIRE(part.size() == e - b);
      for (std::size_t i = b; i < e; ++i) {
        CHECK(part.record_json(i - b) == input[i].dump());
        CHECK(part.record(i - b) == input[i]);
      }
    }
    CHECK_THROWS_AS(load_records(reader, {.rows = std::pair<std::size_t, std::size_t>{5, input.size() + 1}}), InvalidArgument);
    CHECK_THROWS_AS(load_records(reader, {.rows = std::pair<std::size_t, std::size_t>{6, 5}}), InvalidArgument);
  }
}

TEST_CASE("A range of records finds the damage in what it reads", "[records][partial][bad-input]") {
  test::TempDir dir;
  std::vector<ojson> input;
  for (int i = 0; i < 64; ++i) input.push_back({{"name", i % 2 ? "odd" : "even"}, {"text", "value " + std::to_string(i)}});
  Store store = test::make_store(dir / "store");
  const auto saved = store.save(RecordCollection::from_json(input));
  const auto reader = store.open_artifact(saved.digest);
  const auto schema = reader.meta()["schema"];
  REQUIRE(field(schema, "name")->at("encoding") == "dictionary");
  REQUIRE(field(schema, "text")->at("encoding") == "plain");
  const fs::path folder = test::object_dir(dir / "store", saved.digest);
  auto poke = [&](const std::string& file, std::uint64_t from_end, const void* bytes, std::size_t n) {
    const fs::path p = folder / file;
    fs::permissions(p, fs::perms::owner_write, fs::perm_options::add);
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(p) - from_end));
    f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
  };
  auto rows = [&](std::size_t b, std::size_t e) {
    return load_records(store.open_artifact(saved.digest), {.rows = std::pair{b, e}});
  };
  // A dictionary code past the dictionary (uint8 codes, one per record, at the file's end).
  const std::uint8_t code = 200;
  poke("records/0.codes.npy", 64 - 5, &code, 1);
  CHECK_THROWS_WITH(rows(3, 9), Catch::Contains("'records/0'") && Catch::Contains("row 5 has code 200"));
  CHECK(rows(10, 20).record_json(0) == input[10].dump());  // only what is read is checked
  CHECK_THROWS_AS(store.load<RecordCollection>(saved.digest), CorruptData);
  // A string offset past the bytes file, then one running backwards (int64 offsets, 65 of them).
  const std::int64_t far = 1 << 30, back = 1;
  poke("records/1.offsets.npy", (65 - 42) * 8, &far, 8);
  CHECK_THROWS_WITH(rows(38, 42), Catch::Contains("records/1.offsets.npy") && Catch::Contains("lie outside"));
  poke("records/1.offsets.npy", (65 - 40) * 8, &back, 8);
  CHECK_THROWS_WITH(rows(38, 42), Catch::Contains("records/1.offsets.npy") && Catch::Contains("offset 40 (1) is below offset 39"));
  // A file shorter than its manifest says.
  fs::resize_file(folder / "records/1.bytes", 10);
  CHECK_THROWS_WITH(rows(50, 52), Catch::Contains("records/1.bytes"));
}

TEST_CASE("Short decimals are stored as scaled integers, other floats as they are", "[records]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::vector<ojson> coarse, fine;
  for (int i = 0; i < 1000; ++i) {
    coarse.push_back({{"x", (i * 7 % 64000) / 100.0}});
    fine.push_back({{"x", std::sqrt(static_cast<double>(i) + 0.5)}});
  }
  auto a = store.save(RecordCollection::from_json(coarse));
  auto b = store.save(RecordCollection::from_json(fine));
  const nlohmann::json enc = store.open_artifact(a.digest).meta()["encodings"]["records/0.npy"];
  CHECK(enc["transforms"] == nlohmann::json({"decimal", "squeeze"}));
  CHECK(enc["stored_dtype"] == "uint16");
  const auto fine_meta = store.open_artifact(b.digest).meta();
  CHECK_FALSE((fine_meta.contains("encodings") && fine_meta["encodings"].contains("records/0.npy")));
  check_equal(store.load<RecordCollection>(a.digest), coarse);
  check_equal(store.load<RecordCollection>(b.digest), fine);
}

TEST_CASE("JSON lines import and export", "[records][jsonl]") {
  test::TempDir dir;
  const auto file = dir / "in.jsonl";
  test::write_text(file, "{\"a\":1,\"b\":[1.5,2]}\r\n\n   \n{\"b\":[],\"a\":-2,\"c\":\"\\u00e9\\ud83d\\ude00\"}\n7\n\"s\"\n[1,{\"x\":null}]");
  const auto c = RecordCollection::read_jsonl(file);
  REQUIRE(c.size() == 5);
  CHECK(c.record_json(0) == R"({"a":1,"b":[1.5,2]})");
  CHECK(c.record_json(1) == "{\"b\":[],\"a\":-2,\"c\":\"\xc3\xa9\xf0\x9f\x98\x80\"}");
  CHECK(c.record_json(2) == "7");
  CHECK(c.record_json(4) == R"([1,{"x":null}])");
  const auto out = dir / "out.jsonl";
  c.write_jsonl(out);
  const auto again = RecordCollection::read_jsonl(out);
  CHECK(again.equals(c));
  CHECK(test::read_text(out) == c.record_json(0) + "\n" + c.record_json(1) + "\n7\n\"s\"\n" + c.record_json(4) + "\n");
  // A byte order mark before the first line is skipped, as editors write one.
  test::write_text(dir / "bom.jsonl", "\xEF\xBB\xBF{\"a\":1}\n{\"a\":2}\n");
  CHECK(RecordCollection::read_jsonl(dir / "bom.jsonl").record_json(0) == R"({"a":1})");
  // Progress counts both passes.
  std::uint64_t last = 0;
  (void)RecordCollection::read_jsonl(file, [&](std::uint64_t done) { last = done; });
  CHECK(last == 2 * test::fs::file_size(file));
  // The same records built in memory are the same collection.
  const auto input = detections(300);
  std::string text;
  for (const auto& r : input) text += r.dump() + "\n";
  test::write_text(file, text);
  check_equal(RecordCollection::read_jsonl(file), input);
  test::TempDir sdir;
  Store store = test::make_store(sdir / "store");
  CHECK(store.save(RecordCollection::read_jsonl(file)).digest == store.save(RecordCollection::from_json(input)).digest);
}

TEST_CASE("Bad JSON lines are refused naming the line", "[records][jsonl][bad-input]") {
  test::TempDir dir;
  const auto file = dir / "bad.jsonl";
  auto refused = [&](const std::string& text, const std::string& what) {
    test::write_text(file, text);
    CHECK_THROWS_AS(RecordCollection::read_jsonl(file), InvalidArgument);
    CHECK_THROWS_WITH(RecordCollection::read_jsonl(file), Catch::Contains(file.string() + ":") && Catch::Contains(what));
  };
  refused("{\"a\":1}\n{\"a\":\n", ":2, key \"a\": is not valid JSON");
  refused("{\"a\":1}\n\n{\"a\":1} {\"a\":2}\n", ":3:");
  refused("1, 2\n", "more than one JSON value");
  refused("{\"a\":1}]\n", ":1:");
  refused("{\"a\":\"\xff\"}\n", ":1: is not valid JSON");
  refused("{\"a\":1,\"a\":2}\n", "repeats the key \"a\"");
  refused("[1e400]\n", ":1: holds the number 1e400, which no int64, uint64 or float64 holds");
  refused("{\"a\":1}\n{\"n\":12345678901234567890123}\n",
          ":2, key \"n\": holds the number 12345678901234567890123, which no int64, uint64 or float64 holds");
  refused("{\"n\":{\"deep\":-92233720368547758080}}\n", ":1, key \"deep\": holds the number -92233720368547758080");
  // 256 levels are taken, 257 refused even when the innermost is empty.
  refused(std::string(257, '[') + std::string(257, ']') + "\n", "nests deeper than 256 levels");
  refused(std::string(256, '[') + "{}" + std::string(256, ']') + "\n", "nests deeper than 256 levels");
  test::write_text(file, std::string(255, '[') + "{}" + std::string(255, ']') + "\n");
  CHECK(RecordCollection::read_jsonl(file).record_json(0) == std::string(255, '[') + "{}" + std::string(255, ']'));
  refused("{\"a\":NaN}\n", ":1, key \"a\": is not valid JSON");
  refused(std::string(300, '[') + std::string(300, ']') + "\n", "nests deeper than 256 levels");
  CHECK_THROWS_AS(RecordCollection::read_jsonl(dir / "absent.jsonl"), NotFound);
  // Only regular files: a FIFO is refused at once, not waited on (also behind
  // a link), and so is a directory.
  REQUIRE(::mkfifo((dir / "fifo.jsonl").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(RecordCollection::read_jsonl(dir / "fifo.jsonl"), Catch::Contains("is not a regular file (a FIFO)"));
  test::fs::create_symlink(dir / "fifo.jsonl", dir / "link.jsonl");
  CHECK_THROWS_AS(RecordCollection::read_jsonl(dir / "link.jsonl"), InvalidArgument);
  test::fs::create_directory(dir / "d.jsonl");
  CHECK_THROWS_AS(RecordCollection::read_jsonl(dir / "d.jsonl"), InvalidArgument);
  // A line longer than 256 MiB (a sparse file of zeros) is refused before it is parsed.
  test::write_text(file, "{\"a\":1}\n");
  test::fs::resize_file(file, (std::uint64_t{256} << 20) + (std::uint64_t{9} << 20));
  CHECK_THROWS_WITH(RecordCollection::read_jsonl(file), Catch::Contains(":2: the line is longer than 256 MiB"));
  test::write_text(file, "");
  CHECK(RecordCollection::read_jsonl(file).size() == 0);

  CHECK_THROWS_WITH(RecordCollection::from_json(std::vector<ojson>{{{"a", 1}}, {{"a", std::nan("")}}}),
                    Catch::Contains("record 1, key \"a\": holds NaN"));
  CHECK_THROWS_WITH(RecordCollection::from_json(std::vector<ojson>{{{"a", "\xc3"}}}),
                    Catch::Contains("record 0: holds a string that is not valid UTF-8"));
}

TEST_CASE("A damaged or lying record collection is corrupt, naming the column", "[records][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const RecordCollection real = RecordCollection::from_json(detections(40));
  int nothing = 0;
  auto forge = [&](std::function<void(ArtifactWriter&)> edit) {
    MaterializerEntry forged;
    forged.name = "amphora.records";
    forged.version = 1;
    forged.save = [&real, edit](const void*, ArtifactWriter& out) {
      materializer<RecordCollection>::save(real, out);
      edit(out);
    };
    forged.load = [](const ArtifactReader&) { return std::shared_ptr<void>(); };
    return store.save_erased(forged, &nothing, {}).digest;
  };
  // A count that does not match the columns.
  auto more = forge([](ArtifactWriter& out) { out.meta()["count"] = 41; });
  CHECK_THROWS_AS(store.load<RecordCollection>(more), CorruptData);
  CHECK_THROWS_WITH(store.load<RecordCollection>(more), Catch::Contains("records column 'records/0'") &&
                                                             Catch::Contains("where the schema has 41"));
  CHECK_FALSE(store.verify(more.str()).ok());
  auto absurd = forge([](ArtifactWriter& out) { out.meta()["count"] = std::uint64_t{1} << 62; });
  CHECK_THROWS_WITH(store.load<RecordCollection>(absurd), Catch::Contains("claims"));
  // A schema that names a kind this version does not know.
  auto unknown = forge([](ArtifactWriter& out) { out.meta()["schema"]["fields"][0]["kind"] = "decimal128"; });
  CHECK_THROWS_AS(store.load<RecordCollection>(unknown), Unsupported);
  // A field that says it is nullable where no bitmap exists.
  auto nullable = forge([](ArtifactWriter& out) { out.meta()["schema"]["fields"][1]["nullable"] = true; });
  CHECK_THROWS_AS(store.load<RecordCollection>(nullable), CorruptData);
  // List items marked missing, and a list without its items.
  auto items = forge([](ArtifactWriter& out) { out.meta()["schema"]["fields"][3]["items"]["optional"] = true; });
  CHECK_THROWS_WITH(store.load<RecordCollection>(items), Catch::Contains("only an object's fields can be missing"));
  auto no_items = forge([](ArtifactWriter& out) { out.meta()["schema"]["fields"][3].erase("items"); });
  CHECK_THROWS_WITH(store.load<RecordCollection>(no_items), Catch::Contains("without 'items'"));
}

TEST_CASE("A stored collection whose files were cut short or swapped for links is refused", "[records][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto saved = store.save(RecordCollection::from_json(detections(60)));
  const auto obj = test::object_dir(dir / "store", saved.digest);
  test::fs::permissions(obj / "records", test::fs::perms::owner_all, test::fs::perm_options::add);
  SECTION("a column file truncated") {
    const auto victim = obj / "records" / "0.offsets.npy";
    test::fs::permissions(victim, test::fs::perms::owner_write, test::fs::perm_options::add);
    test::fs::resize_file(victim, test::fs::file_size(victim) - 8);
    CHECK_THROWS_AS(store.load<RecordCollection>(saved.digest), CorruptData);
    CHECK_FALSE(store.verify(saved.digest.str()).ok());
  }
  SECTION("a column file replaced by a link out of the store") {
    const auto victim = obj / "records" / "1.npy";
    const auto outside = dir / "outside.npy";
    test::fs::copy_file(victim, outside);
    test::fs::remove(victim);
    test::fs::create_symlink(outside, victim);
    CHECK_THROWS_AS(store.load<RecordCollection>(saved.digest), CorruptData);
    CHECK_THROWS_WITH(store.load<RecordCollection>(saved.digest), Catch::Contains("records/1.npy"));
    CHECK_FALSE(store.verify(saved.digest.str()).ok());
  }
}

TEST_CASE("Hand-made record columns that break the rules are corrupt", "[records][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  int nothing = 0;
  auto forge = [&](nlohmann::json schema, std::size_t count, std::function<void(ArtifactWriter&)> files) {
    MaterializerEntry forged;
    forged.name = "amphora.records";
    forged.version = 1;
    forged.save = [=](const void*, ArtifactWriter& out) {
      files(out);
      out.meta()["count"] = count;
      out.meta()["schema"] = schema;
    };
    forged.load = [](const ArtifactReader&) { return std::shared_ptr<void>(); };
    return store.save_erased(forged, &nothing, {}).digest;
  };
  const nlohmann::json ints = {{"kind", "int"}, {"dtype", "int64"}, {"nullable", false}, {"optional", false}};
  const nlohmann::json list = {{"kind", "list"}, {"nullable", false}, {"optional", false}, {"items", ints}};
  // Well formed first, so the failures below are the rule each breaks.
  auto good = forge(list, 2, [](ArtifactWriter& out) {
    out.write_array<std::int64_t>("records.offsets.npy", std::vector<std::int64_t>{0, 1, 3});
    out.write_array<std::int64_t>("records/items.npy", std::vector<std::int64_t>{7, 8, 9});
  });
  CHECK(store.load<RecordCollection>(good).record_json(1) == "[8,9]");
  auto decreasing = forge(list, 2, [](ArtifactWriter& out) {
    out.write_array<std::int64_t>("records.offsets.npy", std::vector<std::int64_t>{0, 3, 1});
    out.write_array<std::int64_t>("records/items.npy", std::vector<std::int64_t>{7});
  });
  CHECK_THROWS_AS(store.load<RecordCollection>(decreasing), CorruptData);
  auto short_items = forge(list, 2, [](ArtifactWriter& out) {
    out.write_array<std::int64_t>("records.offsets.npy", std::vector<std::int64_t>{0, 1, 3});
    out.write_array<std::int64_t>("records/items.npy", std::vector<std::int64_t>{7, 8});
  });
  CHECK_THROWS_WITH(store.load<RecordCollection>(short_items),
                    Catch::Contains("records column 'records/items'") && Catch::Contains("where the schema has 3"));
  // Strings whose offsets run past their bytes.
  const nlohmann::json strings = {{"kind", "string"}, {"encoding", "plain"}, {"nullable", false}, {"optional", false}};
  auto past_end = forge(strings, 2, [](ArtifactWriter& out) {
    out.write_array<std::int64_t>("records.offsets.npy", std::vector<std::int64_t>{0, 2, 9});
    out.write_file("records.bytes", ConstBytes(reinterpret_cast<const std::byte*>("abcd"), 4));
  });
  CHECK_THROWS_AS(store.load<RecordCollection>(past_end), CorruptData);
  // A null column must carry its bitmap, or nothing would bound its slots.
  auto unbounded = forge({{"kind", "null"}, {"nullable", false}, {"optional", false}}, 5, [](ArtifactWriter&) {});
  CHECK_THROWS_WITH(store.load<RecordCollection>(unbounded), Catch::Contains("lacks the validity bitmap"));
  // A JSON column holding text that is not JSON.
  auto not_json = forge({{"kind", "json"}, {"nullable", false}, {"optional", false}}, 2, [](ArtifactWriter& out) {
    out.write_strings("records", std::vector<std::string>{"1", "{\"unclosed"});
  });
  CHECK_THROWS_WITH(store.load<RecordCollection>(not_json), Catch::Contains("records column 'records': slot 1 is not JSON"));
  CHECK_FALSE(store.verify(not_json.str()).ok());
}
