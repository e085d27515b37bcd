// Importing JSON lines by streaming them (Store::import_file, `amphora
// import`) stores exactly what read_jsonl plus save stores, across chunks and
// for every kind of place in the schema; bad files are refused as read_jsonl
// refuses them.

#include "support.hpp"

#include <amphora/everyday.hpp>
#include <amphora/record_collection.hpp>
#include <catch2/catch.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

using namespace amphora;

namespace {

Digest same_both_ways(Store& store, const test::TempDir& dir, const std::string& text) {
  const auto file = dir / "r.jsonl";
  test::write_text(file, text);
  const RecordCollection whole = RecordCollection::read_jsonl(file);
  const SaveResult streamed = store.import_file(file);
  const SaveResult saved = store.save(whole);
  CHECK(streamed.digest == saved.digest);
  if (streamed.digest != saved.digest) {
    INFO("streamed meta " << store.open_artifact(streamed.digest).meta().dump());
    INFO("saved meta    " << store.open_artifact(saved.digest).meta().dump());
    CHECK(false);
  }
  CHECK(store.load<RecordCollection>(streamed.digest).equals(whole));
  return streamed.digest;
}

}  // namespace

TEST_CASE("A streamed JSON lines import stores what read_jsonl and save store", "[records][jsonl][import]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  SECTION("every kind of place") {
    same_both_ways(store, dir,
                   R"({"path":"a.jpg","w":640,"h":480,"boxes":[[1.5,2.25,3,4.125]],"labels":["cat"],"crowd":false,"score":0.5})" "\n"
                   R"({"path":"b.jpg","w":null,"boxes":[],"labels":[],"crowd":true,"extra":{"x":1,"y":[1,"two",null]},"score":1e300})" "\n"
                   "\n"
                   R"({"labels":["dog","cat"],"path":"","w":18446744073709551615,"boxes":[[0,0,1,1],[2,2,3,3]],"score":-0.1})" "\n"
                   R"(null)" "\n"
                   R"({"path":"c.jpg","mixed":1,"deep":[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]],"score":2})" "\n"
                   R"({"path":"d.jpg","mixed":"one","nothing":null,"empty":{},"score":0.30000000000000004})" "\n");
  }
  SECTION("no records") { same_both_ways(store, dir, ""); }
  SECTION("scalars at the root") { same_both_ways(store, dir, "1\n2\n-3\n"); }
  SECTION("many records in several chunks, with repeated words and varying key order") {
    std::string text;
    for (int i = 0; i < 120000; ++i) {
      const std::string word = "\"word" + std::to_string(i * 7 % 101) + "\"";
      const std::string id = std::to_string(i);
      if (i % 3 == 0)
        text += "{\"id\":" + id + ",\"w\":" + word + ",\"v\":" + std::to_string(i % 1000) + ".25,\"t\":[" + id + "]}\n";
      else
        text += "{\"w\":" + word + ",\"id\":" + id + ",\"v\":" + std::to_string(i) + ".5,\"u\":\"unique" + id + "\"}\n";
    }
    REQUIRE(text.size() > (std::size_t{4} << 20));
    const Digest d = same_both_ways(store, dir, text);
    const auto schema = store.open_artifact(d).meta()["schema"];
    CHECK(schema["key_order"] == "per_record");
  }
}

TEST_CASE("A streamed JSON lines import refuses bad files as read_jsonl does", "[records][jsonl][import][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  test::write_text(dir / "bad.jsonl", "{\"a\":1}\n{\"a\":\n");
  CHECK_THROWS_WITH(store.import_file(dir / "bad.jsonl"), Catch::Contains("bad.jsonl") && Catch::Contains(":2"));
  test::write_text(dir / "bad.jsonl", "{\"a\":1,\"a\":2}\n");
  CHECK_THROWS_WITH(store.import_file(dir / "bad.jsonl"), Catch::Contains("repeats the key"));
  CHECK(store.artifacts().empty());
}

TEST_CASE("Records of more distinct places than a collection holds are refused at the line that passes the cap",
          "[records][jsonl][import][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  // The root is one place, each key one more: key k16383 on line 16384 is the 16,385th.
  std::string text;
  for (int i = 0; i < 16390; ++i) text += "{\"k" + std::to_string(i) + "\":[" + std::to_string(i) + "]}\n";
  test::write_text(dir / "keys.jsonl", text);
  const std::string why =
      "keys.jsonl:8192, key \"k8191\": brings the distinct fields and lists, nested ones included, past 16384";
  CHECK_THROWS_WITH(store.import_file(dir / "keys.jsonl"), Catch::Contains(why));
  CHECK_THROWS_WITH(RecordCollection::read_jsonl(dir / "keys.jsonl"), Catch::Contains(why));
  CHECK(store.artifacts().empty());
  // Within the cap, a chunk of the streamed import holds fewer records the
  // more places there are, and every value comes back.
  text.clear();
  for (int i = 0; i < 3000; ++i) text += "{\"k" + std::to_string(i) + "\":" + std::to_string(i) + "}\n";
  test::write_text(dir / "some.jsonl", text);
  const Digest d = store.import_file(dir / "some.jsonl").digest;
  const auto back = store.load<RecordCollection>(d);
  REQUIRE(back.size() == 3000);
  for (std::size_t i = 0; i < 3000; i += 7) CHECK(back.record_json(i) == "{\"k" + std::to_string(i) + "\":" + std::to_string(i) + "}");
  CHECK(back.equals(RecordCollection::read_jsonl(dir / "some.jsonl")));
}

TEST_CASE("A JSON lines file that changes while it is imported is refused", "[records][jsonl][import][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const auto file = dir / "r.jsonl";
  auto import_while_changing = [&](const std::string& before, const std::string& after) {
    const test::ChangedImport seen = test::import_while_changing(store, file, before, after);
    CHECK(seen.rewritten);
    CHECK_THAT(seen.error, Catch::Contains("r.jsonl") && Catch::Contains("changed"));
  };
  import_while_changing("{\"a\":1}\n{\"a\":2}\n", "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");  // a record more
  import_while_changing("{\"a\":1}\n{\"a\":2}\n", "{\"a\":1}\n");                      // a record less
  import_while_changing("{\"a\":1}\n{\"a\":2}\n", "{\"a\":1}\n{\"a\":\"x\"}\n");        // another type
  CHECK(store.artifacts().empty());
}

TEST_CASE("A .json document nested past 60 levels is refused naming that limit and the JSON lines one",
          "[records][jsonl][import][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  // Past the 64 levels the parser takes, and between 60 and 64 (which the
  // store's writer refused with another message): one limit, one message.
  for (int levels : {61, 63, 64, 65, 200}) {
    INFO(levels << " levels");
    test::write_text(dir / "deep.json", std::string(levels, '[') + "1" + std::string(levels, ']'));
    CHECK_THROWS_WITH(store.import_file(dir / "deep.json"),
                      Catch::Contains("deep.json: nests lists or objects deeper than 60 levels, the most a JSON "
                                      "document holds (records imported from JSON lines, .jsonl, may nest 256)") &&
                          !Catch::Contains("json.exception") && !Catch::Contains("not valid JSON"));
  }
  const std::string deepest = std::string(60, '[') + "1" + std::string(60, ']');
  test::write_text(dir / "deep.json", deepest);
  CHECK(store.load<nlohmann::json>(store.import_file(dir / "deep.json").digest).dump() == deepest);
  test::write_text(dir / "bad.json", "[1,");
  CHECK_THROWS_WITH(store.import_file(dir / "bad.json"), Catch::Contains("bad.json is not valid JSON"));
}

TEST_CASE("JSON lines numbers read as the float64 nearest what is written, however many digits", "[records][jsonl]") {
  // Debian's simdjson 3.0 reads a decimal of more than 19 digits with a zero
  // integer part wrongly (0.4444444444444444444444 as 0.0017); found by
  // fuzz_jsonl. Each value must be the one std::from_chars (correctly
  // rounded) gives, as Python's float() and pandas give.
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  const std::vector<std::string> numbers = {
      "0.4444444444444444444444",
      "0.95000000000000000000",
      "0." + std::string(129, '4') + "1",
      "-0.00000000000000000000000000012345678901234567890123",
      "1000000000.000000001",
      "123456789012345678901234567890.5",
      "9007199254740993.0",
      "2.4703282292062328e-324",  // just past half the smallest subnormal: rounds up to it
      "1e-400",                   // underflows to zero, as Python reads it
      "-0.0",
  };
  std::string text;
  for (const auto& n : numbers) text += "{\"x\":" + n + "}\n";
  test::write_text(dir / "numbers.jsonl", text);
  const auto records = RecordCollection::read_jsonl(dir / "numbers.jsonl");
  const auto stored = store.load<RecordCollection>(store.import_file(dir / "numbers.jsonl").digest);
  REQUIRE(records.size() == numbers.size());
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    double want = 0;
    const auto& n = numbers[i];
    auto [end, error] = std::from_chars(n.data(), n.data() + n.size(), want);
    if (error == std::errc::result_out_of_range) want = std::strtod(n.c_str(), nullptr);
    INFO(n);
    for (const auto* collection : {&records, &stored}) {
      const auto got = collection->record(i)["x"].get<double>();
      CHECK(std::memcmp(&got, &want, sizeof got) == 0);
    }
  }
  CHECK(records.record(0)["x"].get<double>() == 0.4444444444444444);
  CHECK(std::signbit(records.record(9)["x"].get<double>()));
}

TEST_CASE("A float column whose decimals reach 2^53 imports whole, streaming as in one piece", "[records][jsonl]") {
  // 855.5555 then a 13-digit decimal: the streaming import's decimal scan
  // and its write pass once disagreed on 855.5555's scaled integer and
  // refused the file as changed (found by fuzz_jsonl).
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  test::write_text(dir / "w.jsonl", "{\"w\":855.5555}\n{\"w\":255.5555500030005000300000000000000000037}\n");
  const auto stored = store.load<RecordCollection>(store.import_file(dir / "w.jsonl").digest);
  REQUIRE(stored.size() == 2);
  CHECK(stored.record(0)["w"].get<double>() == 855.5555);
  CHECK(stored.record(1)["w"].get<double>() == 255.5555500030005);
  CHECK(stored.record(1) == RecordCollection::read_jsonl(dir / "w.jsonl").record(1));
}
