// Amphora writes canonical JSON and parses untrusted JSON with its own fast
// paths; FORMAT.md §3.3 defines canonical text as nlohmann::json's compact
// dump, and parse results must be what nlohmann::json::parse gives. These
// tests hold both paths to nlohmann on random documents and on the texts
// where fast parsers and nlohmann are known to part ways.

#include <amphora/json.hpp>
#include <amphora/error.hpp>
#include <amphora/manifest.hpp>

#include "json_text.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

using amphora::canonical_json;
using amphora::parse_untrusted_json;
using nlohmann::json;

namespace {

std::string nlohmann_canonical(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::strict); }

// Strings mixing every control character, quotes, backslashes, DEL, slashes
// and valid multi-byte UTF-8 (2, 3 and 4 bytes).
std::string random_string(std::mt19937_64& rng) {
  static const char* const pieces[] = {"a", "Z", "0", " ", "\"", "\\", "/", "\x7f", "\xc3\xa9", "\xe2\x82\xac",
                                       "\xf0\x9f\x98\x80", "\xef\xbf\xbf", "layer.", "weight"};
  std::string s;
  std::size_t n = rng() % 12;
  for (std::size_t i = 0; i < n; ++i) {
    if (rng() % 4 == 0) s.push_back(static_cast<char>(rng() % 0x20));
    else s += pieces[rng() % (sizeof pieces / sizeof *pieces)];
  }
  return s;
}

double random_double(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0: return std::ldexp(static_cast<double>(rng() % 1000000), static_cast<int>(rng() % 2100) - 1074);
    case 1: return static_cast<double>(static_cast<std::int64_t>(rng() % 2000001) - 1000000);  // integral
    case 2: return std::round(std::uniform_real_distribution<double>(-1, 1)(rng) * 1000) / 1000;
    case 3: return -0.0;
    case 4: return std::numeric_limits<double>::denorm_min() * static_cast<double>(rng() % 100 + 1);
    case 5: return std::numeric_limits<double>::max() / static_cast<double>(rng() % 100 + 1);
    case 6: return std::pow(10.0, static_cast<int>(rng() % 40) - 20);
    default: {
      std::uint64_t bits = rng();
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return std::isfinite(d) ? d : 1.5;
    }
  }
}

json random_json(std::mt19937_64& rng, int depth) {
  switch (rng() % (depth > 4 ? 6 : 8)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: {
      static const std::int64_t edges[] = {0, -1, 1, std::numeric_limits<std::int64_t>::min(),
                                           std::numeric_limits<std::int64_t>::max()};
      return rng() % 3 == 0 ? edges[rng() % 5] : static_cast<std::int64_t>(rng());
    }
    case 3: return rng() % 3 == 0 ? std::numeric_limits<std::uint64_t>::max() - rng() % 3 : std::uint64_t{rng() % 1000};
    case 4: return random_double(rng);
    case 5: return random_string(rng);
    case 6: {
      json a = json::array();
      for (std::size_t n = rng() % 6; n > 0; --n) a.push_back(random_json(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (std::size_t n = rng() % 6; n > 0; --n) o[random_string(rng)] = random_json(rng, depth + 1);
      return o;
    }
  }
}

// Same type, same value, all the way down (json's operator== calls 1 and
// 1u equal; a parse must also keep nlohmann's choice of integer type).
bool same_tree(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_number_float()) {
    double x = a.get<double>(), y = b.get<double>();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
      if (i.key() != j.key() || !same_tree(i.value(), j.value())) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same_tree(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

}  // namespace

TEST_CASE("canonical_json gives nlohmann's compact dump, byte for byte", "[canonical][json_text]") {
  std::mt19937_64 rng(20261123);
  for (int i = 0; i < 3000; ++i) {
    json v = random_json(rng, 0);
    INFO("document " << i << ": " << nlohmann_canonical(v).substr(0, 300));
    REQUIRE(canonical_json(v) == nlohmann_canonical(v));
  }
  CHECK(canonical_json(json(-0.0)) == "-0.0");
  CHECK(canonical_json(json(1e-5)) == "1e-05");
  CHECK(canonical_json(json(1e21)) == "1e+21");
  CHECK(canonical_json(json(std::string("\x1f\x7f\xe2\x82\xac", 5))) == "\"\\u001f\x7f\xe2\x82\xac\"");
  CHECK(canonical_json(json::object()) == "{}");
  CHECK(canonical_json(json::array()) == "[]");
}

TEST_CASE("Every byte that needs escaping is found at every offset of a word", "[canonical][json_text]") {
  // Strings are copied eight bytes at a time while no byte needs a look;
  // each ASCII byte and a multi-byte sequence is tried at offsets 0-16.
  for (int c = 0; c < 0x80; ++c) {
    for (std::size_t at = 0; at < 17; ++at) {
      std::string s(17, 'a');
      s[at] = static_cast<char>(c);
      INFO("byte " << c << " at " << at);
      REQUIRE(canonical_json(json(s)) == nlohmann_canonical(json(s)));
    }
  }
  // Long strings are written a 4 KiB slice at a time: escapes and a
  // multi-byte sequence on and across the slice edges.
  std::string long_text(3 * 4096 + 5, 'c');
  for (std::size_t edge : {4096u, 8192u})
    for (std::size_t k = edge - 3; k < edge + 2; ++k) long_text[k] = k % 2 ? '"' : '\n';
  long_text.replace(4095 + 4096 - 8, 3, "\xe2\x82\xac");
  long_text.replace(2 * 4096 - 1 + 4096 - 20, 4, "\xf0\x9f\x98\x80");
  long_text.replace(4096 - 1 + 20, 3, "\xe2\x82\xac");
  long_text.replace(4094, 3, "\xe2\x82\xac");  // straddles the first edge
  REQUIRE(canonical_json(json(long_text)) == nlohmann_canonical(json(long_text)));
  for (std::size_t at = 0; at < 17; ++at) {
    std::string s(20, 'b');
    s.replace(at, 3, "\xe2\x82\xac");
    REQUIRE(canonical_json(json(s)) == nlohmann_canonical(json(s)));
    s[at + 1] = 'x';  // a broken sequence, wherever it falls
    CHECK_THROWS_AS(canonical_json(json(s)), amphora::InvalidArgument);
  }
}

TEST_CASE("Long arrays, written a block at a time, give the same bytes and the first error", "[canonical][json_text]") {
  std::mt19937_64 rng(11);
  json layers = json::array();
  while (layers.size() < 3000) {
    json item = random_json(rng, 0);
    try {
      amphora::validate_storable_json(item, "item");  // random doubles may overflow to infinity
      layers.push_back(std::move(item));
    } catch (const amphora::InvalidArgument&) {
    }
  }
  json doc = {{"layers", layers}, {"nested", json::array({layers, json::array()})}};
  REQUIRE(canonical_json(doc) == nlohmann_canonical(doc));
  // Blocks are 256 items: a failure in a later block must not hide one in
  // an earlier block, however the threads finish.
  json bad = layers;
  bad[2900] = std::string("\xff");
  bad[700] = NAN;
  CHECK_THROWS_WITH(canonical_json(json{{"layers", bad}}), Catch::Contains(".layers[700] holds NaN"));
  bad[700] = 1;
  CHECK_THROWS_WITH(canonical_json(json{{"layers", bad}}), Catch::Contains(".layers[2900] holds a string that is not valid UTF-8"));
  json deep = 1;
  for (int i = 0; i < 60; ++i) deep = json::array({deep});
  json long_and_deep = json::array();
  for (int i = 0; i < 600; ++i) long_and_deep.push_back(i == 599 ? deep : json(i));
  CHECK_THROWS_WITH(canonical_json(long_and_deep), Catch::Contains("[599]") && Catch::Contains("nests deeper than 60 levels"));
}

TEST_CASE("canonical_json names what JSON cannot hold, and where", "[canonical][json_text]") {
  json bad_key = json::object();
  bad_key["ok"] = {{std::string("\xff"), 1}};
  CHECK_THROWS_WITH(canonical_json(bad_key), Catch::Contains("JSON value at .ok has a key that is not valid UTF-8"));
  CHECK_THROWS_WITH(canonical_json(json{{"a", {1, std::string("\xed\xa0\x80")}}}),
                    Catch::Contains(".a[1] holds a string that is not valid UTF-8"));
  CHECK_THROWS_WITH(canonical_json(json{{"x", {{"y", -INFINITY}}}}), Catch::Contains(".x.y holds an infinity"));
  CHECK_THROWS_WITH(canonical_json(json::binary({1, 2})), Catch::Contains("binary"));
  json deep = 1;
  for (int i = 0; i < 61; ++i) deep = json::array({deep});
  CHECK_THROWS_WITH(canonical_json(deep), Catch::Contains("nests deeper than 60 levels"));
  CHECK_NOTHROW(amphora::validate_storable_json(deep[0], "value"));
  CHECK_THROWS_AS(amphora::validate_storable_json(json{{"x", NAN}}, "value"), amphora::InvalidArgument);
}

TEST_CASE("parse_untrusted_json reads what nlohmann::json::parse reads, with the same types", "[json_text]") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    json v = random_json(rng, 0);
    for (int indent : {-1, 2}) {
      std::string text = v.dump(indent);
      INFO("document " << i << ": " << text.substr(0, 300));
      REQUIRE(same_tree(parse_untrusted_json(text), json::parse(text)));
    }
  }
  // Where a fast parser could differ: a byte-order mark, integers past 64
  // bits, repeated keys (the last wins), escapes and surrogate pairs,
  // whitespace of every kind, exponents and -0.
  for (std::string text : std::initializer_list<std::string>{"\xef\xbb\xbf[1]", "18446744073709551616", "-9223372036854775809", "9223372036854775808",
                           R"({"a":1,"a":2,"b":{"c":3,"c":[4]}})", R"("\u00e9\ud83d\ude00\/\b\f\n\r\t\"\\")",
                           " \t\r\n[ 1 , 2 ]\n", "1E+2", "1e-400", "-0.0", "0.1", "[]", "{}", "\"\"",
                           "123456789012345678901234567890", "1.7976931348623157e308"}) {
    INFO("text " << text);
    REQUIRE(same_tree(parse_untrusted_json(text), json::parse(text)));
  }
  // The one known difference: nlohmann types the integer -0 as signed,
  // simdjson's tape does not keep its sign, so it reads as unsigned 0. Both
  // are the integer zero, and write back as "0".
  CHECK(parse_untrusted_json("-0") == json::parse("-0"));
  CHECK(canonical_json(parse_untrusted_json("[-0]")) == "[0]");
}

TEST_CASE("parse_untrusted_json refuses what nlohmann refuses, with its message, as CorruptData", "[json_text][errors]") {
  for (std::string text : std::initializer_list<std::string>{"", "[1,]", "{\"a\":}", "[1 2]", "nul", "\"\xff\"", "\"\xc0\xaf\"", "01", "[1]x",
                           "{'a':1}", "\"a\nb\"", "1e400", "[\"\\ud800\"]", "NaN", "[1"}) {
    INFO("text " << text);
    std::string want;
    try {
      json parsed = json::parse(text);
      want = "accepted: " + parsed.dump();
    } catch (const json::exception& e) {
      want = e.what();
    }
    std::string got;
    try {
      json parsed = parse_untrusted_json(text);
      got = "accepted: " + parsed.dump();
    } catch (const amphora::CorruptData& e) {  // an amphora::Error, never nlohmann's own
      got = e.what();
    }
    CHECK(got == want);
  }
  std::string deep(65, '[');
  deep += std::string(65, ']');
  CHECK_THROWS_WITH(parse_untrusted_json(deep), Catch::Contains("nesting deeper than 64"));
  CHECK_THROWS_AS(parse_untrusted_json(deep), amphora::CorruptData);
  std::string ok(64, '[');
  ok += std::string(64, ']');
  CHECK_NOTHROW(parse_untrusted_json(ok));
  // Objects and arrays count alike, also behind a syntax error later on.
  auto objects = [](int depth, const std::string& tail) {
    std::string t;
    for (int i = 0; i < depth; ++i) t += i % 2 ? "[" : "{\"k\":";
    t += "1";
    for (int i = depth - 1; i >= 0; --i) t += i % 2 ? "]" : "}";
    return t + tail;
  };
  CHECK(parse_untrusted_json(objects(64, "")).is_object());
  CHECK_THROWS_WITH(parse_untrusted_json(objects(65, "")), Catch::Contains("nesting deeper than 64"));
  CHECK_THROWS_WITH(parse_untrusted_json(objects(65, ",")), Catch::Contains("nesting deeper than 64"));
  CHECK_THROWS_WITH(parse_untrusted_json(objects(64, ",")), Catch::Contains("parse error"));
  // A raw NUL ends neither parser's input early, where nlohmann stops at it:
  // "[1]\0..." is not [1].
  using namespace std::string_literals;
  CHECK_THROWS_WITH(parse_untrusted_json("[1]\0garbage"s), Catch::Contains("a NUL byte at offset 3"));
  CHECK_THROWS_WITH(parse_untrusted_json("{\"a\":\"x\0y\"}"s), Catch::Contains("a NUL byte at offset 7"));
  CHECK_THROWS_AS(parse_untrusted_json("[1]\0"s), amphora::CorruptData);
  CHECK(parse_untrusted_json("[\"x\\u0000y\"]")[0].get<std::string>() == "x\0y"s);
}

// The typed encoding (FORMAT.md §3.7): what pipelines key on.
namespace {

std::string typed_hex(const nlohmann::json& v) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : amphora::typed_encoding(v)) hex += digits[c >> 4], hex += digits[c & 15];
  return hex;
}

}  // namespace

TEST_CASE("The typed encoding is exact about types and bits", "[canonical][typed]") {
  using amphora::typed_digest;
  // Its bytes, spelled out.
  CHECK(typed_hex(nullptr) == "6e");
  CHECK(typed_hex(true) == "74");
  CHECK(typed_hex(-2) == "69feffffffffffffff");
  CHECK(typed_hex(1.0) == "64000000000000f03f");
  CHECK(typed_hex("h\xc3\xa9") == "730300000000000000" "68c3a9");
  CHECK(typed_hex(nlohmann::json::array({1})) == "610100000000000000" "690100000000000000");
  CHECK(typed_hex(nlohmann::json{{"k", false}}) == "6f0100000000000000" "0100000000000000" "6b" "66");
  // 1, 1.0 and "1" are three keys; so are 0.0 and -0.0.
  CHECK(typed_digest(1) != typed_digest(1.0));
  CHECK(typed_digest(1) != typed_digest("1"));
  CHECK(typed_digest(1.0) != typed_digest("1"));
  CHECK(typed_digest(0.0) != typed_digest(-0.0));
  // One integer is one key however it was parsed; every NaN is one NaN.
  CHECK(typed_digest(nlohmann::json(std::uint64_t{5})) == typed_digest(nlohmann::json(std::int64_t{5})));
  CHECK(typed_hex(nlohmann::json(std::uint64_t{1} << 63)) == "75" "0000000000000080");
  const double quiet = std::numeric_limits<double>::quiet_NaN();
  double payload;
  const std::uint64_t bits = 0xFFF0000000000123ull;
  std::memcpy(&payload, &bits, sizeof payload);
  CHECK(typed_digest(quiet) == typed_digest(payload));
  CHECK(typed_digest(quiet) != typed_digest(std::numeric_limits<double>::infinity()));
  // Key order does not matter; where a string ends does.
  CHECK(typed_digest(nlohmann::json::parse(R"({"b":1,"a":[2,3]})")) ==
        typed_digest(nlohmann::json::parse(R"({"a":[2,3],"b":1})")));
  CHECK(typed_digest(nlohmann::json::array({"ab", "c"})) != typed_digest(nlohmann::json::array({"a", "bc"})));
  CHECK(typed_digest(nlohmann::json::array({nlohmann::json::array()})) != typed_digest(nlohmann::json::array()));
}

TEST_CASE("The typed encoding's worked example in FORMAT.md holds", "[canonical][typed]") {
  // The same value and digest as the example in docs/FORMAT.md §3.7, which
  // the format_doc test recomputes in Python.
  nlohmann::json params = {{"top_k", 500}, {"min_df", 0.5}, {"lowercase", true}, {"stop", {"a", "the"}},
                           {"note", nullptr}, {"zero", -0.0}};
  CHECK(amphora::typed_digest(params).str() ==
        "sha256:f0dbbcb7df8fd9af0c5ba1a1696dea161267ff9db26682bc472653e996e1d8a1");
}

TEST_CASE("The typed encoding refuses what it cannot hold, naming where", "[canonical][typed]") {
  CHECK_THROWS_WITH(amphora::typed_encoding(nlohmann::json{{"a", {{"b", "\xff"}}}}),
                    Catch::Contains("'/a/b'") && Catch::Contains("not valid UTF-8"));
  CHECK_THROWS_WITH(amphora::typed_encoding(nlohmann::json{{"k\xff", 1}}), Catch::Contains("not valid UTF-8"));
  CHECK_THROWS_WITH(amphora::typed_encoding(nlohmann::json::binary({1, 2})), Catch::Contains("binary"));
  nlohmann::json deep = 1;
  for (int i = 0; i < 70; ++i) deep = nlohmann::json::array({deep});
  CHECK_THROWS_WITH(amphora::typed_encoding(deep), Catch::Contains("nests deeper than 64 levels"));
}

TEST_CASE("Records are written as nlohmann's indented dump, byte for byte, at any depth", "[json_text]") {
  auto text = [](const json& v, int indent) {
    std::string out = "keep:";  // appended to, never replaced
    amphora::detail::append_json_text(out, v, indent, "a record");
    return out;
  };
  std::mt19937_64 rng(20261126);
  for (int i = 0; i < 2000; ++i) {
    json v = random_json(rng, 0);
    try {
      amphora::validate_storable_json(v, "document");
    } catch (const amphora::InvalidArgument&) {
      continue;  // random doubles may overflow to infinity
    }
    for (int indent : {-1, 0, 1, 2, 4}) {
      INFO("document " << i << " indent " << indent << ": " << nlohmann_canonical(v).substr(0, 300));
      REQUIRE(text(v, indent) == "keep:" + v.dump(indent, ' ', false, json::error_handler_t::strict));
    }
  }
  // A run record's steps: long enough to be written a block at a time.
  json steps = json::array();
  for (int i = 0; i < 1500; ++i)
    steps.push_back({{"name", "s" + std::to_string(i)}, {"inputs", json::object()}, {"outputs", json::array({i, "x"})}});
  json record = {{"steps", steps}, {"empty", json::array()}, {"none", json::object()}};
  REQUIRE(text(record, 1) == "keep:" + record.dump(1));
  // Deeper than canonical text allows: a step's parameters sit four levels
  // down in a run record.
  json deep = 1;
  for (int i = 0; i < 70; ++i) deep = json{{"k", deep}};
  CHECK(text(deep, 2) == "keep:" + deep.dump(2));
  CHECK_THROWS_WITH(text(json{{"bad", std::string("\xff")}}, 1),
                    Catch::Contains("a record at .bad") && Catch::Contains("not valid UTF-8"));
  CHECK_THROWS_WITH(text(json{{"steps", json::array({NAN})}}, 1), Catch::Contains("a record at .steps[0] holds NaN"));
}

TEST_CASE("printable escapes what would drive or reorder a terminal, and keeps other text", "[json_text]") {
  using amphora::printable;
  CHECK(printable("plain caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "plain caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(printable("\x1b[2J\x07\x7f") == "\\x1b[2J\\x07\\x7f");
  CHECK(printable("\xc2\x9b" "31m") == "\\u009b31m");
  // A right-to-left override makes "exe.txt" read as "txt.exe".
  CHECK(printable("report\xe2\x80\xaetxt.exe") == "report\\u202etxt.exe");
  for (const char* control : {"\xd8\x9c", "\xe2\x80\x8e", "\xe2\x80\x8f", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaa",
                              "\xe2\x80\xab", "\xe2\x80\xac", "\xe2\x80\xad", "\xe2\x81\xa6", "\xe2\x81\xa7", "\xe2\x81\xa8",
                              "\xe2\x81\xa9"}) {
    INFO(control);
    CHECK_THAT(printable(control), Catch::StartsWith("\\u"));
  }
  CHECK(printable("\xe2\x80\x8d") == "\xe2\x80\x8d");  // a zero-width joiner builds emoji; it reorders nothing
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");
}
