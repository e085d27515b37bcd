// Loading an intact value as another type throws TypeMismatch saying what is
// stored and what was asked for; CorruptData is kept for damaged bytes.
// Tensors compare by value.

#include "support.hpp"

#include <amphora/describe.hpp>
#include <amphora/record_list.hpp>
#include <amphora/table.hpp>
#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <limits>
#include <map>
#include <unordered_map>

using namespace amphora;

namespace mismatch {
struct Point {
  int x = 0;
  std::string label;
};
struct Reading {
  double value = 0;
};
AMPHORA_MATERIALIZE(Point, "test.mismatch_point", 1, x, label)
AMPHORA_MATERIALIZE(Reading, "test.mismatch_reading", 1, value)
}  // namespace mismatch

namespace {

// Loads `digest` as T and returns the TypeMismatch's message (fails the test
// when the load succeeds or throws another class).
template <class T>
std::string mismatch_message(const Store& store, const Digest& digest) {
  try {
    (void)store.load<T>(digest);
  } catch (const TypeMismatch& e) {
    return e.what();
  } catch (const Error& e) {
    FAIL("a " << typeid(e).name() << ", not a TypeMismatch: " << e.what());
  }
  FAIL("the load succeeded");
  return {};
}

}  // namespace

TEST_CASE("loading a value as another type throws TypeMismatch naming both", "[errors][types]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  const auto tensor = store.save(Tensor::zeros(DType::float32, {3, 4})).digest;
  const auto floats = store.save(std::vector<float>{1, 2}).digest;
  const auto point = store.save(mismatch::Point{1, "a"}).digest;
  const auto points = store.save(std::vector<mismatch::Point>{{1, "a"}, {2, "b"}}).digest;
  const auto text = store.save(std::string("hi")).digest;
  const auto counts = store.save(std::map<std::string, int>{{"a", 1}}).digest;
  const auto number = store.save(3.0).digest;

  using Catch::Matchers::Contains;
  CHECK_THAT(mismatch_message<std::vector<float>>(store, tensor),
             Contains("holds a 2-d float32 tensor of shape 3x4") && Contains("not a 1-d float32 vector"));
  CHECK_THAT(mismatch_message<std::vector<std::int32_t>>(store, floats),
             Contains("1-d float32 tensor") && Contains("not a 1-d int32 vector"));
  CHECK_THAT(mismatch_message<float>(store, number), Contains("0-d float64 tensor") && Contains("single float32 value"));
  CHECK_THAT(mismatch_message<mismatch::Reading>(store, point),
             Contains("'test.mismatch_point'") && Contains("not a 'test.mismatch_reading'"));
  CHECK_THAT(mismatch_message<std::vector<mismatch::Reading>>(store, points),
             Contains("records of 'test.mismatch_point'") && Contains("not of 'test.mismatch_reading'"));
  CHECK_THAT(mismatch_message<mismatch::Point>(store, points), Contains("'amphora.record_list'"));
  CHECK_THAT(mismatch_message<Tensor>(store, text), Contains("'amphora.string'"));
  CHECK_THAT(mismatch_message<Table>(store, tensor), Contains("'amphora.tensor'") && Contains("amphora::Table"));
  // A child of the wrong type: the map's values are int32, asked as float64.
  using Reals = std::map<std::string, double>;
  CHECK_THAT(mismatch_message<Reals>(store, counts),
             Contains("child 'values'") && Contains("not a 1-d float64 vector"));
  // The C++ type is named as written, not in the standard library's spelling.
  using Counts = std::map<std::string, int>;
  const std::string as_map = mismatch_message<Counts>(store, point);
  CHECK_THAT(as_map, Contains("(std::map<std::string, int>)"));
  CHECK_THAT(mismatch_message<std::string>(store, number), Contains("(std::string)"));

  // A subclass of Unsupported: handlers written before it still catch it.
  CHECK_THROWS_AS(store.load<std::vector<float>>(tensor), Unsupported);
}

TEST_CASE("type_display_name drops the standard library's default arguments", "[errors][types]") {
  CHECK(type_display_name(typeid(std::vector<std::vector<int>>)) == "std::vector<std::vector<int>>");
  CHECK(type_display_name(typeid(std::map<std::string, std::vector<std::string>>)) ==
        "std::map<std::string, std::vector<std::string>>");
  CHECK(type_display_name(typeid(std::unordered_map<std::string, double>)) == "std::unordered_map<std::string, double>");
  CHECK(type_display_name(typeid(mismatch::Point)) == "mismatch::Point");
}

TEST_CASE("a stored read-only tensor's error says how to get a writable copy", "[errors][tensor]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  auto loaded = store.load<Tensor>(store.save(Tensor::zeros(DType::int32, {1024})).digest);
  try {
    (void)loaded.mutable_data();
    FAIL("a mapped tensor was writable");
  } catch (const InvalidArgument& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("read-only") && Catch::Matchers::Contains("copy()"));
  }
  auto writable = loaded.copy();
  writable.mutable_values<std::int32_t>()[0] = 7;
  CHECK(writable.values<std::int32_t>()[0] == 7);
}

TEST_CASE("tensors compare by value, floats as IEEE numbers", "[tensor][types]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto of = [](std::vector<double> v) { return Tensor::from_values<double>({static_cast<std::int64_t>(v.size())}, v); };
  CHECK(of({1, 2, 3}) == of({1, 2, 3}));
  CHECK(of({1, 2, 3}) != of({1, 2, 4}));
  CHECK(of({0.0}) == of({-0.0}));        // equal numbers, other bits
  CHECK_FALSE(of({0.0}).bit_equal(of({-0.0})));
  CHECK(of({nan}) != of({nan}));          // NaN equals nothing...
  CHECK(of({nan}).bit_equal(of({nan})));  // ...though the bytes agree
  CHECK(of({1, 2}) != Tensor::from_values<double>({2, 1}, std::vector<double>{1, 2}));  // shape
  CHECK(Tensor::from_values<std::int32_t>({1}, std::vector<std::int32_t>{1}) !=
        Tensor::from_values<std::int64_t>({1}, std::vector<std::int64_t>{1}));  // dtype
  // Half precision and complex elements, compared as numbers too.
  auto halves = [](std::uint16_t a) { return Tensor::from_values<float16>({1}, std::vector<float16>{float16{a}}); };
  CHECK(halves(0x0000) == halves(0x8000));  // +0 and -0
  CHECK(halves(0x7E00) != halves(0x7E00));  // NaN
  CHECK(halves(0x3C00) == halves(0x3C00));
  using C = std::complex<float>;
  auto complexes = [](C c) { return Tensor::from_values<C>({1}, std::vector<C>{c}); };
  CHECK(complexes({1, -0.0f}) == complexes({1, 0.0f}));
  CHECK(complexes({1, std::nanf("")}) != complexes({1, std::nanf("")}));
  // Integers compare by bytes; an empty tensor equals another of its shape.
  CHECK(Tensor::zeros(DType::uint8, {0, 3}) == Tensor::zeros(DType::uint8, {0, 3}));
  CHECK(Tensor::zeros(DType::uint8, {0, 3}) != Tensor::zeros(DType::uint8, {3, 0}));
}

namespace mismatch {
struct Sample {
  std::string name;
  Tensor pixels;
  bool operator==(const Sample&) const = default;
};
AMPHORA_MATERIALIZE(Sample, "test.mismatch_sample", 1, name, pixels)
}  // namespace mismatch

TEST_CASE("a struct holding a tensor compares with a defaulted operator==", "[tensor][types]") {
  test::TempDir dir;
  auto store = test::make_store(dir.path());
  mismatch::Sample s{"a", Tensor::from_values<float>({3}, std::vector<float>{1, 2, 3})};
  CHECK(store.load<mismatch::Sample>(store.save(s).digest) == s);
  auto other = s;
  other.pixels = Tensor::from_values<float>({3}, std::vector<float>{1, 2, 4});
  CHECK_FALSE(other == s);
}
