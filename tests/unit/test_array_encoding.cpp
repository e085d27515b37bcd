// The array encodings: each transform round-trips on edge values, refuses
// what it cannot encode, and a damaged recipe or payload is reported.

#include "support.hpp"

#include <amphora/array_encoding.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>

using namespace amphora;

namespace {

template <class T>
ConstBytes bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(T)};
}

template <class T>
std::vector<T> values(const std::vector<std::byte>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// Encodes and decodes `v` with `e`; checks the round trip and returns the encoding.
template <class T>
EncodedArray round_trip(const std::vector<T>& v, ArrayEncoding e) {
  EncodedArray enc = encode_array(dtype_of<T>::value, bytes(v), e);
  CHECK(enc.bytes.size() == v.size() * dtype_size(enc.stored_dtype));
  CHECK(enc.recipe["stored_dtype"] == dtype_name(enc.stored_dtype));
  auto back = decode_array(enc.recipe, ConstBytes(enc.bytes.data(), enc.bytes.size()), "test");
  CHECK(values<T>(back) == v);
  return enc;
}

template <class T>
void edges_of_width() {
  using L = std::numeric_limits<T>;
  CAPTURE(dtype_name(dtype_of<T>::value));
  const std::vector<std::vector<T>> cases = {{}, {T{0}}, {L::min()}, {L::max()}, {L::min(), L::max()},
                                             {L::max(), L::min(), T{0}}, {T{1}, T{2}, T{3}}};
  for (const auto& v : cases)
    for (bool delta : {false, true})
      for (bool squeeze : {false, true})
        for (bool shuffle : {false, true}) round_trip(v, {.delta = delta, .squeeze = squeeze, .shuffle = shuffle});
  // Delta across the whole range, up and down (differences wrap as unsigned).
  for (const auto& v : std::vector<std::vector<T>>{{L::min(), T{0}, T{0}, L::max()}, {L::max(), T{0}, L::min()}})
    for (bool squeeze : {false, true}) round_trip(v, {.delta = true, .squeeze = squeeze, .shuffle = true});
}

}  // namespace

TEST_CASE("Every integer width round-trips its extremes through every transform", "[encoding]") {
  edges_of_width<std::int8_t>();
  edges_of_width<std::int16_t>();
  edges_of_width<std::int32_t>();
  edges_of_width<std::int64_t>();
  edges_of_width<std::uint8_t>();
  edges_of_width<std::uint16_t>();
  edges_of_width<std::uint32_t>();
  edges_of_width<std::uint64_t>();
}

TEST_CASE("Squeeze picks the narrowest width that holds the values", "[encoding]") {
  CHECK(round_trip<std::int64_t>({0, 255, 7}, {.squeeze = true}).stored_dtype == DType::uint8);
  CHECK(round_trip<std::int64_t>({-1, 127}, {.squeeze = true}).stored_dtype == DType::int8);
  CHECK(round_trip<std::int64_t>({-129, 5}, {.squeeze = true}).stored_dtype == DType::int16);
  CHECK(round_trip<std::int64_t>({0, 65536}, {.squeeze = true}).stored_dtype == DType::uint32);
  CHECK(round_trip<std::int64_t>({-1, 1ll << 40}, {.squeeze = true}).stored_dtype == DType::int64);
  CHECK(round_trip<std::uint64_t>({0, ~0ull}, {.squeeze = true}).stored_dtype == DType::uint64);
  CHECK(round_trip<std::int32_t>({}, {.squeeze = true}).stored_dtype == DType::uint8);
  // Sorted ids: delta leaves small gaps, squeeze stores them in a byte each.
  std::vector<std::int64_t> ids(1000);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = 1'000'000'000'000 + static_cast<std::int64_t>(3 * i);
  auto enc = round_trip(ids, {.delta = true, .squeeze = true});
  CHECK(enc.stored_dtype == DType::uint8);
  CHECK(enc.bytes.size() == 1000);
  CHECK(enc.recipe["first"] == 1'000'000'000'000);
}

TEST_CASE("Shuffle stores byte planes of any element width", "[encoding]") {
  std::vector<double> v = {1.0, -0.0, std::numeric_limits<double>::quiet_NaN(), 1e308, 5e-324};
  auto enc = encode_array(DType::float64, bytes(v), {.shuffle = true});
  CHECK(enc.stored_dtype == DType::float64);
  // Byte plane 7 (the sign and top exponent bits) comes last.
  for (std::size_t i = 0; i < v.size(); ++i)
    CHECK(enc.bytes[7 * v.size() + i] == reinterpret_cast<const std::byte*>(&v[i])[7]);
  auto back = decode_array(enc.recipe, ConstBytes(enc.bytes.data(), enc.bytes.size()), "t");
  CHECK(std::memcmp(back.data(), v.data(), back.size()) == 0);  // NaN and -0.0 bit for bit
  std::vector<std::uint8_t> one = {9};
  CHECK(values<std::uint8_t>(decode_array(encode_array(DType::uint8, bytes(one), {.shuffle = true}).recipe,
                                          bytes(one), "t")) == one);
}

TEST_CASE("Transforms that do not apply are refused with the reason", "[encoding][bad-input]") {
  std::vector<float> f = {1, 2};
  CHECK_THROWS_WITH(encode_array(DType::float32, bytes(f), {.squeeze = true}),
                    Catch::Contains("squeezing needs an integer dtype, not float32"));
  CHECK_THROWS_WITH(encode_array(DType::float32, bytes(f), {.delta = true}),
                    Catch::Contains("delta coding needs an integer dtype"));
  std::vector<std::uint8_t> odd = {1, 2, 3};
  CHECK_THROWS_AS(encode_array(DType::int16, bytes(odd), {}), InvalidArgument);
}

TEST_CASE("A damaged recipe or stored array is reported, never misread", "[encoding][bad-input]") {
  std::vector<std::int64_t> v = {10, 20, 300};
  const auto enc = encode_array(DType::int64, bytes(v), {.delta = true, .squeeze = true});
  const ConstBytes stored(enc.bytes.data(), enc.bytes.size());
  auto fails = [&](nlohmann::json recipe, ConstBytes data, const std::string& text) {
    CHECK_THROWS_AS(decode_array(recipe, data, "col.npy"), CorruptData);
    CHECK_THROWS_WITH(decode_array(recipe, data, "col.npy"), Catch::StartsWith("col.npy") && Catch::Contains(text));
  };
  auto with = [&](const char* key, nlohmann::json value) {
    auto r = enc.recipe;
    if (value.is_discarded()) r.erase(key); else r[key] = value;
    return r;
  };
  fails(with("transforms", {"squeeze", "delta"}), stored, "out of order");
  fails(with("transforms", {"delta", "delta"}), stored, "out of order");
  fails(with("transforms", {"rot13"}), stored, "unknown transform");
  fails(with("dtype", "int65"), stored, "names no dtype");
  fails(with("dtype", "float64"), stored, "apply to integers");
  fails(with("count", 4), stored, "are not 4 uint16 elements");
  fails(with("count", -1), stored, "'count' is not a count");
  fails(with("first", nlohmann::json::value_t::discarded), stored, "'first' is missing");
  fails(with("stored_dtype", "uint64"), stored, "are not 3 uint64 elements");
  fails(nlohmann::json::array(), stored, "not a JSON object");
  fails(enc.recipe, stored.first(stored.size() - 1), "are not 3");
  // A squeezed int8 value widened to uint8 cannot be negative.
  std::vector<std::int8_t> neg = {-1};
  nlohmann::json r = {{"dtype", "uint8"}, {"stored_dtype", "int8"}, {"count", 1}, {"transforms", {"squeeze"}}};
  fails(r, bytes(neg), "does not fit");
  nlohmann::json first8 = {{"dtype", "int8"}, {"stored_dtype", "uint8"}, {"count", 1}, {"transforms", {"delta"}},
                           {"first", 300}};
  std::vector<std::uint8_t> zero = {0};
  fails(first8, bytes(zero), "does not fit int8");
}

TEST_CASE("Short decimals are stored as scaled integers, bit for bit", "[encoding]") {
  // Values a decimal parser gives for text with up to k digits after the point.
  std::mt19937_64 rng(7);
  for (int k = 0; k <= 15; ++k) {
    std::vector<double> v;
    const std::int64_t limit = 9007199254740991;
    for (int i = 0; i < 200; ++i) {
      const auto m = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(limit)) - limit / 2;
      v.push_back(std::stod(std::to_string(m) + "e-" + std::to_string(k)));
    }
    CAPTURE(k);
    const int digits = decimal_digits(v);
    REQUIRE(digits >= 0);
    CHECK(digits <= k);
    const auto enc = round_trip(v, {.decimal = true, .squeeze = true});
    CHECK(enc.recipe["decimal_digits"] == digits);
  }
  // Coordinates with two decimals fit 2 bytes each; integral values need no digits.
  const std::vector<double> coords = {0.0, 473.07, 12.5, 639.99, 100.0};
  const auto enc = round_trip(coords, {.decimal = true, .squeeze = true});
  CHECK(enc.stored_dtype == DType::uint16);
  CHECK(enc.recipe["decimal_digits"] == 2);
  CHECK(decimal_digits(std::vector<double>{1.0, -3.0, 1e15}) == 0);
  CHECK(decimal_digits(std::vector<double>{}) == 0);
  round_trip(std::vector<double>{}, {.decimal = true});
  // What no decimal of 15 digits gives is refused, and not misencoded.
  for (double bad : {0.1 + 0.2, -0.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                     1e300, 5e-324, 9007199254740993.0 * 2, 1.0 / 3})
    CHECK(decimal_digits(std::vector<double>{1.5, bad}) == -1);
  std::vector<double> third = {1.0 / 3};
  CHECK_THROWS_WITH(encode_array(DType::float64, bytes(third), {.decimal = true}), Catch::Contains("decimal coding needs"));
  std::vector<float> f = {1.5f};
  CHECK_THROWS_WITH(encode_array(DType::float32, bytes(f), {.decimal = true}), Catch::Contains("needs float64, not float32"));
  // A damaged decimal recipe or element is reported.
  const ConstBytes stored(enc.bytes.data(), enc.bytes.size());
  auto r = enc.recipe;
  r["decimal_digits"] = 16;
  CHECK_THROWS_WITH(decode_array(r, stored, "x.npy"), Catch::Contains("'decimal_digits' is not an integer in [0, 15]"));
  r = enc.recipe;
  r["dtype"] = "float32";
  CHECK_THROWS_WITH(decode_array(r, stored, "x.npy"), Catch::Contains("decimal applies to float64"));
  nlohmann::json wide = {{"dtype", "float64"}, {"stored_dtype", "int64"}, {"count", 1}, {"transforms", {"decimal"}},
                         {"decimal_digits", 0}};
  std::vector<std::int64_t> huge = {std::int64_t{1} << 60};
  CHECK_THROWS_WITH(decode_array(wide, bytes(huge), "x.npy"), Catch::Contains("is not below 2^53"));
}

TEST_CASE("A decimal scan fed one value at a time agrees with each value's own scaled integer", "[encoding]") {
  // Near 2^53 two integers can divide back to the same double: 855.5555 at
  // 13 digits is 8555555000000000 and 8555555000000001 alike. The scan
  // raises the digits of values it saw by multiplying by 10; each value's
  // own integer must be that one, or a streaming writer checking its values
  // against the scan's range refuses a good file (found by fuzz_jsonl).
  const std::vector<std::vector<double>> cases = {
      {855.5555, 255.5555500030005},
      {-855.5555, 255.5555500030005},
      {0.5, 4503599627.370497},
      {1, 0.1, 900719925474.0991},
  };
  for (const auto& values : cases) {
    DecimalScan scan;
    for (double v : values) scan.add(v);
    INFO(values.front() << ", " << values.back() << " at " << scan.digits() << " digits");
    REQUIRE(scan.digits() >= 0);
    CHECK(decimal_digits(values) == scan.digits());
    for (double v : values) {
      std::int64_t d = 0;
      REQUIRE(DecimalScan::scaled(v, scan.digits(), d));
      CHECK(d >= scan.lo());
      CHECK(d <= scan.hi());
      CHECK(static_cast<double>(d) / std::pow(10.0, scan.digits()) == v);
    }
  }
}

TEST_CASE("Dictionary encoding keeps first appearance order and knows when it pays", "[encoding]") {
  std::vector<std::string> words = {"cat", "dog", "cat", "", "dog", "cat", std::string("\0x", 2)};
  std::vector<std::string_view> views(words.begin(), words.end());
  auto d = dictionary_encode(views);
  CHECK(d.dictionary == std::vector<std::string_view>{"cat", "dog", "", std::string_view("\0x", 2)});
  CHECK(d.codes == std::vector<std::uint32_t>{0, 1, 0, 2, 1, 0, 3});
  for (std::size_t i = 0; i < views.size(); ++i) CHECK(d.dictionary[d.codes[i]] == views[i]);
  CHECK_FALSE(dictionary_is_smaller(views, d));  // seven short strings: the extra file costs more
  std::vector<std::string> many;
  for (int i = 0; i < 10000; ++i) many.push_back(i % 3 ? "traffic light" : "pedestrian crossing");
  std::vector<std::string_view> many_views(many.begin(), many.end());
  CHECK(dictionary_is_smaller(many_views, dictionary_encode(many_views)));
  std::vector<std::string> unique;
  for (int i = 0; i < 10000; ++i) unique.push_back("id-" + std::to_string(i));
  std::vector<std::string_view> unique_views(unique.begin(), unique.end());
  CHECK_FALSE(dictionary_is_smaller(unique_views, dictionary_encode(unique_views)));
  CHECK(dictionary_encode({}).dictionary.empty());
}

TEST_CASE("Dictionary encoding tells apart strings that share their size and first or last bytes", "[encoding]") {
  // The lookup table matches strings of up to 8 bytes by size and first
  // bytes alone, longer ones by their last 8 bytes too, and past 16 bytes by
  // the whole string: every family below differs only where a shortcut
  // would not look.
  std::vector<std::string> distinct;
  for (int i = 0; i < 256; ++i) {
    const char c = static_cast<char>(i);
    distinct.push_back(std::string(1, c));                           // every byte, NUL included
    distinct.push_back(std::string(3, '\0') + c);                    // size 4: NULs then one byte
    distinct.push_back(std::string("abcdefgh") + c);                 // size 9: same first 8 bytes
    distinct.push_back(std::string("abcdefgh") + c + "ijklmnop");    // size 17: same first and last 8
    distinct.push_back(std::string("0123456789abcdef") + c + "01234567");  // size 25, same ends
  }
  distinct.push_back("");
  distinct.push_back(std::string(8, '\0'));
  distinct.push_back(std::string(7, '\0'));
  // Rows: every string many times in a scrambled order, across both halves
  // that are encoded on separate cores and merged.
  std::mt19937_64 rng(5);
  std::vector<std::string_view> rows;
  for (int round = 0; round < 60; ++round)
    for (const auto& s : distinct) rows.push_back(s);
  std::shuffle(rows.begin(), rows.end(), rng);

  // The reference: first appearance order by full string comparison.
  std::map<std::string_view, std::uint32_t> seen;
  std::vector<std::string_view> want_words;
  std::vector<std::uint32_t> want_codes;
  for (std::string_view r : rows) {
    auto [it, added] = seen.emplace(r, static_cast<std::uint32_t>(want_words.size()));
    if (added) want_words.push_back(r);
    want_codes.push_back(it->second);
  }
  REQUIRE(want_words.size() == distinct.size());

  const DictionaryStrings d = dictionary_encode(rows);
  CHECK(d.dictionary == want_words);
  CHECK(d.codes == want_codes);

  // The same with merged strings, and through the two-pass streaming form.
  std::string bytes;
  std::vector<std::int64_t> offsets{0};
  for (std::string_view r : rows) {
    bytes += r;
    offsets.push_back(static_cast<std::int64_t>(bytes.size()));
  }
  const DictionaryStrings merged = dictionary_encode(std::as_bytes(std::span(bytes)), offsets);
  CHECK(merged.codes == want_codes);
  StreamingDictionary streaming;
  for (std::string_view r : rows) streaming.add(r);
  REQUIRE(streaming.within_limits());
  CHECK(std::vector<std::string_view>(streaming.words().begin(), streaming.words().end()) == want_words);
  bool all_equal = true;
  for (std::size_t i = 0; i < rows.size(); ++i) all_equal = all_equal && streaming.code_of(rows[i]) == want_codes[i];
  CHECK(all_equal);
  CHECK_THROWS_WITH(streaming.code_of(std::string("abcdefgh") + '\x01' + "ijklmnoq"),
                    Catch::Contains("a string the dictionary was not given"));
}

TEST_CASE("Dictionary encoding stops past its limits, which it says", "[encoding]") {
  // Repeated often enough that a dictionary would pay, with one word too many.
  std::vector<std::string> words;
  for (std::size_t i = 0; i < 3 * (kMaxDictionaryWords + 1); ++i) words.push_back("w" + std::to_string(i % (kMaxDictionaryWords + 1)));
  std::vector<std::string_view> views(words.begin(), words.end());
  const DictionaryStrings past = dictionary_encode(views);
  CHECK_FALSE(past.within_limits);
  CHECK(past.dictionary.empty());
  CHECK(past.codes.empty());
  CHECK_FALSE(dictionary_within_limits(past));
  CHECK_FALSE(dictionary_is_smaller(views, past));
  views.resize(3 * kMaxDictionaryWords);  // the last word's occurrences gone
  for (auto& v : views)
    if (v == "w" + std::to_string(kMaxDictionaryWords)) v = "w0";
  const DictionaryStrings within = dictionary_encode(views);
  CHECK(within.within_limits);
  CHECK(within.dictionary.size() == kMaxDictionaryWords);
  CHECK(dictionary_is_smaller(views, within));
}

namespace {

// Two arrays written through the toolkit with encodings.
struct Columns {
  std::vector<std::int64_t> ids;
  std::vector<double> weights;
  std::vector<std::uint8_t> flags;  // saved as bool
};

}  // namespace

template <>
struct amphora::materializer<Columns> {
  static constexpr std::string_view name = "test.columns";
  static constexpr int version = 1;
  static void save(const Columns& c, ArtifactWriter& out) {
    out.write_array<std::int64_t>("ids.npy", c.ids, {.delta = true, .squeeze = true});
    const std::int64_t n = static_cast<std::int64_t>(c.weights.size());
    out.write_array("weights.npy", DType::float64, std::span<const std::int64_t>(&n, 1), std::as_bytes(std::span(c.weights)),
                    {.shuffle = true});
    const std::int64_t shape[] = {static_cast<std::int64_t>(c.flags.size()) / 2, 2};
    out.write_array("flags.npy", DType::bool_, shape, std::as_bytes(std::span(c.flags)), {.shuffle = true});
  }
  static Columns load(const ArtifactReader& in) {
    Columns c;
    auto id_array = in.read_array("ids.npy", DType::int64, 1);
    auto ids = id_array.values<std::int64_t>();
    auto weights = in.read_array("weights.npy", DType::float64, 1);
    auto flags = in.read_array("flags.npy", DType::bool_, 2);
    c.ids.assign(ids.begin(), ids.end());
    auto w = weights.values<double>();
    c.weights.assign(w.begin(), w.end());
    auto f = flags.bytes();
    for (auto b : f) c.flags.push_back(static_cast<std::uint8_t>(b));
    return c;
  }
};

struct SetsEncodings {
  bool encoded = true;
};
template <>
struct amphora::materializer<SetsEncodings> {
  static constexpr std::string_view name = "test.sets_encodings";
  static constexpr int version = 1;
  static void save(const SetsEncodings& value, ArtifactWriter& out) {
    out.meta()["encodings"] = 1;
    std::vector<std::int32_t> v = {1, 2};
    out.write_array<std::int32_t>("v.npy", v, {.squeeze = value.encoded});
  }
  static SetsEncodings load(const ArtifactReader&) { return {}; }
};

TEST_CASE("Arrays written with an encoding read back as written, their recipes in the metadata",
          "[encoding][toolkit]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  Columns c;
  for (int i = 0; i < 5000; ++i) c.ids.push_back(7'000'000'000 + 5 * i);
  c.weights = {0.5, -1e300, 3.25, std::numeric_limits<double>::infinity()};
  c.flags = {1, 0, 0, 1, 1, 1};
  auto saved = store.save(c);
  auto back = store.load<Columns>(saved.digest);
  CHECK(back.ids == c.ids);
  CHECK(back.weights == c.weights);
  CHECK(back.flags == c.flags);
  auto in = store.open_artifact(saved.digest);
  const auto& recipes = in.meta()["encodings"];
  CHECK(recipes["ids.npy"]["transforms"] == nlohmann::json{"delta", "squeeze"});
  CHECK(recipes["ids.npy"]["shape"] == nlohmann::json{5000});
  CHECK(recipes["flags.npy"]["shape"] == nlohmann::json{3, 2});
  // On disk: a 1-d .npy of the stored dtype, numpy-readable; 5000 ids in one byte each.
  CHECK(in.file_size("ids.npy") == 128 + 5000);
  CHECK(store.verify(saved.digest.str()).ok());
  CHECK_THROWS_WITH(store.save(SetsEncodings{}), Catch::Contains("set metadata key 'encodings'"));
  // Refused without encoded arrays too: a reader would take the key as the
  // recipes of v.npy.
  CHECK_THROWS_WITH(store.save(SetsEncodings{.encoded = false}), Catch::Contains("set metadata key 'encodings'"));
}

TEST_CASE("Tensors saved with encodings load back bit for bit, compressed or not", "[encoding][tensor]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::vector<std::int64_t> sorted(300000);
  for (std::size_t i = 0; i < sorted.size(); ++i) sorted[i] = static_cast<std::int64_t>(i * i / 7) - 5;
  const Tensor ids = Tensor::from_values<std::int64_t>({600, 500}, sorted);
  const Tensor floats = test::random_tensor(DType::float32, {300, 70}, 5);
  for (auto compression : {Compression::none, Compression::lz4, Compression::zstd, Compression::automatic}) {
    CAPTURE(to_string(compression));
    for (auto [t, e] : {std::pair{ids, ArrayEncoding{.delta = true, .squeeze = true}},
                        std::pair{ids, ArrayEncoding{.delta = true, .squeeze = true, .shuffle = true}},
                        std::pair{ids, ArrayEncoding{.squeeze = true}},
                        std::pair{floats, ArrayEncoding{.shuffle = true}}}) {
      auto saved = store.save(t, {.options = TensorOptions{.compression = compression, .encoding = e}});
      auto in = store.open_artifact(saved.digest);
      // A chunked codec shuffles chunk by chunk; the other transforms leave a recipe.
      const bool chunked = compression == Compression::lz4 || compression == Compression::zstd;
      const std::string codec = compression == Compression::zstd ? "npy.zst" : "npy.lz4";
      const bool recipe = e.delta || e.squeeze || (e.shuffle && !chunked);
      const std::string encoding = in.meta<std::string>("encoding");
      if (chunked)
        CHECK(encoding == (recipe ? "encoded." : "") + std::string(e.shuffle ? "shuffled." : "") + codec);
      else  // auto may shuffle chunks of its own accord, but never over a shuffling recipe
        CHECK((encoding.starts_with("encoded.npy") || encoding.starts_with("encoded.shuffled.npy")));
      if (e.shuffle && !chunked) CHECK_FALSE(encoding.starts_with("encoded.shuffled."));
      CHECK(in.meta().contains("recipe") == recipe);
      if (recipe) {
        CHECK(in.meta()["recipe"]["dtype"] == dtype_name(t.dtype()));
        const auto& transforms = in.meta()["recipe"]["transforms"];
        CHECK((std::find(transforms.begin(), transforms.end(), "shuffle") != transforms.end()) == (e.shuffle && !chunked));
      }
      for (bool eager : {false, true}) CHECK(store.load<Tensor>(saved.digest, {.eager = eager}).bit_equal(t));
      CHECK(load_tensor_rows(in, 10, 20).bit_equal(t.rows(10, 20)));
      CHECK(store.verify(saved.digest.str()).ok());
      // Decoded into memory of its own: writable, and a change stays there.
      for (bool eager : {false, true}) {
        Tensor loaded = store.load<Tensor>(saved.digest, {.eager = eager});
        REQUIRE(loaded.buffer()->writable());
        loaded.mutable_data()[0] ^= std::byte{1};
        CHECK_FALSE(loaded.bit_equal(t));
      }
      CHECK(store.load<Tensor>(saved.digest).bit_equal(t));
      CHECK(load_tensor_rows(in, 10, 20).buffer()->writable());
      // Statistics describe the values, whatever their encoding.
      auto plain = store.open_artifact(store.save(t, {.options = TensorOptions{.compression = Compression::none}}).digest);
      CHECK(in.meta()["stats"] == plain.meta()["stats"]);
    }
  }
  // Delta and squeeze store sorted ids with small gaps in a byte each, before any compression.
  std::vector<std::int64_t> dense(300000);
  for (std::size_t i = 0; i < dense.size(); ++i) dense[i] = 1'000'000'000'000 + static_cast<std::int64_t>(3 * i + i % 2);
  auto small = store.save(Tensor::from_values<std::int64_t>({300000}, dense),
                          {.options = TensorOptions{.compression = Compression::none,
                                                    .encoding = {.delta = true, .squeeze = true}}});
  CHECK(store.open_artifact(small.digest).manifest().payload_bytes() == 4096 + 300000);
  CHECK_THROWS_WITH(store.save(floats, {.options = TensorOptions{.encoding = {.delta = true}}}),
                    Catch::Contains("delta coding needs an integer dtype, not float32"));
  // Values that go down as well as up are stored exactly by delta too.
  std::vector<std::int32_t> down = {3, 2, 1, std::numeric_limits<std::int32_t>::min(), 7};
  for (auto compression : {Compression::none, Compression::lz4, Compression::zstd}) {
    auto saved = store.save(Tensor::from_values<std::int32_t>({5}, down),
                            {.options = TensorOptions{.compression = compression, .encoding = {.delta = true, .squeeze = true}}});
    const Tensor back = store.load<Tensor>(saved.digest);
    const auto got = back.values<std::int32_t>();
    CHECK(std::vector<std::int32_t>(got.begin(), got.end()) == down);
  }
}

TEST_CASE("Delta stores values that mostly increase in small differences, and any others exactly", "[encoding]") {
  // Ids rising by 1 to 4 with one in a thousand out of order: the
  // differences wrap where a value falls, so squeeze keeps the full width
  // then, yet every value comes back.
  std::vector<std::int64_t> ids(700000);
  std::mt19937_64 rng(11);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto r = rng();
    ids[i] = r % 1000 == 0 ? static_cast<std::int64_t>(r >> 40) : static_cast<std::int64_t>(i * 5 / 2 + (r & 3));
  }
  auto enc = round_trip(ids, {.delta = true, .squeeze = true});
  CHECK(enc.stored_dtype == DType::uint64);
  CHECK(enc.recipe["first"] == ids[0]);
  // Without the falls, the differences fit a byte (and the largest sits in the last block).
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i * 2);
  ids.back() = ids[ids.size() - 2] + 200;
  enc = round_trip(ids, {.delta = true, .squeeze = true});
  CHECK(enc.stored_dtype == DType::uint8);
  // Strictly decreasing: every difference wraps.
  std::vector<std::int16_t> falling = {5, 4, -3, -32768};
  enc = round_trip(falling, {.delta = true, .squeeze = true});
  CHECK(enc.stored_dtype == DType::uint16);
  CHECK(values<std::uint16_t>(enc.bytes) == std::vector<std::uint16_t>{0, 65535, 65529, 32771});
}

TEST_CASE("Squeeze and decimal scan large arrays in parts and agree with one scan in order", "[encoding]") {
  // Over many blocks (each a few hundred thousand elements, scanned on its
  // own core): the extreme in the last block, and a value needing more
  // digits after blocks whose bounds then scale up.
  const std::size_t n = 1'100'000;
  std::vector<std::int32_t> ints(n, 5);
  ints[n - 1] = -200;
  auto enc = round_trip(ints, {.squeeze = true});
  CHECK(enc.stored_dtype == DType::int16);
  ints[n - 1] = 40000;
  CHECK(round_trip(ints, {.squeeze = true}).stored_dtype == DType::uint16);

  std::vector<double> readings(n);
  for (std::size_t i = 0; i < n; ++i) readings[i] = static_cast<double>(i % 5000) - 2500.5;
  readings[n - 2] = 0.125;
  readings[n - 1] = 3.0;
  DecimalScan one;
  for (double v : readings) one.add(v);
  REQUIRE(one.digits() == 3);
  enc = round_trip(readings, {.decimal = true, .squeeze = true});
  CHECK(enc.recipe["decimal_digits"] == 3);
  CHECK(enc.stored_dtype == DType::int32);  // -2500500 to 2498500
  // Scans merged in any order give the one scan's digits and bounds.
  DecimalScan first, second, merged, reversed;
  for (std::size_t i = 0; i < n; ++i) (i < n / 2 ? first : second).add(readings[i]);
  merged.merge(first), merged.merge(second);
  reversed.merge(second), reversed.merge(first);
  for (const DecimalScan& s : {merged, reversed}) {
    CHECK(s.digits() == one.digits());
    CHECK(s.lo() == one.lo());
    CHECK(s.hi() == one.hi());
  }
  // Scaling up a merged part past 2^53, or a part that fits no digits, fails the whole.
  DecimalScan big, fine;
  big.add(9e15);
  fine.add(0.5);
  big.merge(fine);
  CHECK(big.digits() == -1);
  DecimalScan none, empty;
  none.add(1.0 / 3);
  empty.merge(none);
  CHECK(empty.digits() == -1);
  readings[10] = 1.0 / 3;
  CHECK(decimal_digits(readings) == -1);
}

TEST_CASE("Arrays written in pieces read back as one write_array wrote them", "[encoding][toolkit]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::vector<std::int64_t> ids(10000);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i * i % 977) - 300;
  const auto enc = encode_array(DType::int64, bytes(ids), {.squeeze = true, .shuffle = true});
  int nothing = 0;
  auto save = [&](std::function<void(ArtifactWriter&)> body) {
    MaterializerEntry e;
    e.name = "test.streamed";
    e.version = 1;
    e.save = [body](const void*, ArtifactWriter& out) { body(out); };
    e.load = [](const ArtifactReader&) { return std::shared_ptr<void>(); };
    return store.save_erased(e, &nothing, {}).digest;
  };
  const auto d = save([&](ArtifactWriter& out) {
    ArrayStream plain = out.open_array("plain.npy", DType::int64, ids.size());
    for (std::size_t at = 0; at < ids.size(); at += 777)
      plain.append(std::span<const std::int64_t>(ids).subspan(at, std::min<std::size_t>(777, ids.size() - at)));
    CHECK(plain.written() == ids.size());
    plain.close();
    ArrayStream packed = out.open_encoded_array("packed.npy", enc.recipe);
    const std::size_t half = enc.bytes.size() / 2;
    packed.append(ConstBytes(enc.bytes.data(), half));
    packed.append(ConstBytes(enc.bytes.data() + half, enc.bytes.size() - half));
    packed.close();
    out.write_array<std::int64_t>("whole.npy", ids, {.squeeze = true, .shuffle = true});
  });
  const auto in = store.open_artifact(d);
  for (const char* path : {"plain.npy", "packed.npy", "whole.npy"}) {
    INFO(path);
    const ArrayView a = in.read_array(path, DType::int64, 1);
    CHECK(std::vector<std::int64_t>(a.values<std::int64_t>().begin(), a.values<std::int64_t>().end()) == ids);
  }
  // The streamed encoded file is byte for byte the one write_array writes.
  const auto obj = test::object_dir(dir / "store", d);
  CHECK(test::read_text(obj / "packed.npy") == test::read_text(obj / "whole.npy"));
  CHECK(in.meta()["encodings"]["packed.npy"] == in.meta()["encodings"]["whole.npy"]);
  CHECK(store.verify(d.str()).ok());

  // Too many, too few, partial elements, a bool that is not 0/1, a wrong type.
  CHECK_THROWS_WITH(save([](ArtifactWriter& out) {
                      ArrayStream s = out.open_array("a.npy", DType::int32, 2);
                      s.append(std::span<const std::int32_t>(std::vector<std::int32_t>{1, 2, 3}));
                    }),
                    Catch::Contains("opened for 2 elements; 3 would be more"));
  CHECK_THROWS_WITH(save([](ArtifactWriter& out) {
                      ArrayStream s = out.open_array("a.npy", DType::int32, 2);
                      s.append(std::span<const std::int32_t>(std::vector<std::int32_t>{1}));
                      s.close();
                    }),
                    Catch::Contains("opened for 2 elements but got 1"));
  CHECK_THROWS_WITH(save([](ArtifactWriter& out) {
                      ArrayStream s = out.open_array("a.npy", DType::int32, 2);
                      std::vector<std::byte> three(3);
                      s.append(ConstBytes(three.data(), three.size()));
                    }),
                    Catch::Contains("3 bytes are not whole int32 elements"));
  CHECK_THROWS_WITH(save([](ArtifactWriter& out) {
                      ArrayStream s = out.open_array("a.npy", DType::bool_, 1);
                      std::vector<std::byte> two = {std::byte{2}};
                      s.append(ConstBytes(two.data(), two.size()));
                    }),
                    Catch::Contains("got byte 2"));
  CHECK_THROWS_WITH(save([](ArtifactWriter& out) {
                      ArrayStream s = out.open_array("a.npy", DType::int32, 1);
                      s.append(std::span<const double>(std::vector<double>{1.0}));
                    }),
                    Catch::Contains("holds int32, not float64"));
  CHECK_THROWS_WITH(save([](ArtifactWriter& out) { (void)out.open_encoded_array("a.npy", {{"count", 1}}); }),
                    Catch::Contains("lacks a stored_dtype or a count"));
}

TEST_CASE("Chunk delta: zigzag differences of every width, undone by a running sum", "[encoding]") {
  std::mt19937_64 rng(5);
  for (std::size_t width : {1, 2, 4, 8})
    for (std::size_t count : {0, 1, 2, 15, 16, 17, 31, 33, 1000, 4099}) {
      CAPTURE(width, count);
      std::vector<std::byte> elements(width * count), differences(elements.size());
      // Runs that rise, fall a little and jump anywhere.
      std::uint64_t v = rng();
      for (std::size_t i = 0; i < count; ++i) {
        const auto r = rng();
        v = r % 50 == 0 ? r : v + (r >> 60) - 4;
        std::memcpy(elements.data() + i * width, &v, width);
      }
      delta_bytes(elements, width, differences);
      // The first element and every difference, zigzagged: -1 is 1, 1 is 2.
      for (std::size_t i = 0; i < count; ++i) {
        std::uint64_t now = 0, before = 0, stored = 0;
        std::memcpy(&now, elements.data() + i * width, width);
        if (i) std::memcpy(&before, elements.data() + (i - 1) * width, width);
        std::memcpy(&stored, differences.data() + i * width, width);
        const unsigned bits = static_cast<unsigned>(8 * width);
        const std::uint64_t mask = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
        const std::uint64_t d = (now - before) & mask;
        const bool negative = (d >> (bits - 1)) & 1;
        REQUIRE(stored == ((negative ? ~(d << 1) : d << 1) & mask));
      }
      undelta_bytes(differences, width);
      REQUIRE(differences == elements);
    }
  std::vector<std::byte> small(8);
  CHECK_THROWS_AS(delta_bytes(small, 3, small), InvalidArgument);
  CHECK_THROWS_WITH(delta_bytes(small, 8, small), Catch::Contains("cannot overwrite"));
  std::vector<std::byte> other(16);
  CHECK_THROWS_AS(delta_bytes(small, 8, other), InvalidArgument);
  CHECK_THROWS_AS(undelta_bytes(std::span(other).first(12), 8), InvalidArgument);
}

TEST_CASE("shuffle_bytes puts byte b of element i at b * n + i for every width and length", "[encoding]") {
  std::mt19937_64 rng(3);
  // Lengths around the widths' fast paths (32, then 8 elements at a time for
  // 8-byte elements) and past the size that is spread over the cores.
  for (std::size_t width : {2, 3, 4, 8, 16})
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{15},
                              std::size_t{16}, std::size_t{17}, std::size_t{31}, std::size_t{32}, std::size_t{33},
                              std::size_t{39}, std::size_t{40}, std::size_t{41}, std::size_t{1000}, std::size_t{1001},
                              (std::size_t{5} << 20) / width + 3}) {
      CAPTURE(width, count);
      std::vector<std::byte> elements(width * count), planes(elements.size()), back(elements.size());
      for (auto& b : elements) b = std::byte(static_cast<unsigned char>(rng()));
      shuffle_bytes(elements, width, planes);
      bool laid_out = true;
      for (std::size_t i = 0; i < count && laid_out; ++i)
        for (std::size_t b = 0; b < width; ++b) laid_out = laid_out && planes[b * count + i] == elements[i * width + b];
      REQUIRE(laid_out);
      unshuffle_bytes(planes, width, back);
      REQUIRE(back == elements);
    }
}

TEST_CASE("Decimal coding of a large array: a sample's digits and width, or a full scan where they prove wrong",
          "[encoding]") {
  // 300,000 readings with two decimals in [17, 25.3]: a sample of 4,096
  // evenly spaced values gives the digits and the width in one pass. Each
  // variant changes element 1, which no sample looks at.
  const std::size_t n = 300'000;
  std::vector<double> readings(n);
  std::mt19937_64 rng(12);
  for (auto& v : readings) v = static_cast<double>(1700 + rng() % 831) / 100;
  // What the encoding must be whatever path it takes: each value's own
  // integer at `digits`, in the narrowest width of their range.
  auto check = [&](const std::vector<double>& v, int digits, DType width, bool squeeze) {
    CAPTURE(digits, dtype_name(width), squeeze);
    const auto enc = round_trip(v, {.decimal = true, .squeeze = squeeze});
    CHECK(enc.recipe["decimal_digits"] == digits);
    REQUIRE(enc.stored_dtype == width);
    std::int64_t lo = 0, hi = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::int64_t d = 0;
      REQUIRE(DecimalScan::scaled(v[i], digits, d));
      lo = i == 0 ? d : std::min(lo, d), hi = i == 0 ? d : std::max(hi, d);
      std::int64_t stored = 0;
      const std::size_t w = dtype_size(width);
      std::memcpy(&stored, enc.bytes.data() + i * w, w);
      if (w < 8 && d < 0) stored -= std::int64_t{1} << (8 * w);  // sign of a narrow signed width
      if (stored != d) FAIL("element " << i << " stored as " << stored << ", its integer is " << d);
    }
  };
  check(readings, 2, DType::uint16, true);
  check(readings, 2, DType::int64, false);
  auto changed = [&](double v) {
    auto copy = readings;
    copy[1] = v;
    return copy;
  };
  check(changed(1000.25), 2, DType::uint32, true);  // the range outgrows the sampled width
  check(changed(-3.5), 2, DType::int16, true);      // and its sign
  check(changed(20.125), 3, DType::uint16, true);   // a value needs more digits than any sampled one
  check(changed(17.0), 2, DType::uint16, true);     // needs fewer: the sample's digits hold
  CHECK_THROWS_WITH(encode_array(DType::float64, bytes(changed(std::nan(""))), {.decimal = true, .squeeze = true}),
                    Catch::Contains("decimal coding needs"));
  CHECK_THROWS_WITH(encode_array(DType::float64, bytes(changed(-0.0)), {.decimal = true}),
                    Catch::Contains("decimal coding needs"));
}
