#include "support.hpp"
#include "memory_medium.hpp"

#include <amphora/everyday.hpp>
#include <amphora/npy.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <map>

using namespace amphora;
namespace fs = std::filesystem;

TEST_CASE("float16 and bfloat16 convert like IEEE 754", "[tensor][dtype]") {
  CHECK(float16::from_float(1.0f).bits == 0x3c00);
  CHECK(float16::from_float(-2.0f).bits == 0xc000);
  CHECK(float16::from_float(65504.0f).bits == 0x7bff);
  CHECK(float16::from_float(1e6f).bits == 0x7c00);
  CHECK(float16::from_float(5.960464477539063e-08f).bits == 0x0001);  // smallest subnormal
  CHECK(std::isnan(float16{0x7e00}.to_float()));
  CHECK(float16{0x0001}.to_float() == 5.960464477539063e-08f);
  // Every non-NaN half survives a trip through float.
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    float16 h{static_cast<std::uint16_t>(b)};
    if (std::isnan(h.to_float())) continue;
    REQUIRE(float16::from_float(h.to_float()).bits == h.bits);
  }
  CHECK(bfloat16::from_float(1.0f).bits == 0x3f80);
  CHECK(bfloat16::from_float(3.0f).to_float() == 3.0f);
  CHECK(bfloat16::from_float(1.00390625f).bits == 0x3f80);  // ties to even
  CHECK(std::isnan(bfloat16::from_float(std::nanf("")).to_float()));
}

TEST_CASE("Every dtype has a name and a size; a value that is no DType is refused", "[tensor][dtype]") {
  for (DType dtype : all_dtypes()) {
    INFO(dtype_name(dtype));
    CHECK(dtype_from_name(dtype_name(dtype)) == dtype);
    CHECK(dtype_size(dtype) >= 1);
  }
  CHECK(dtype_size(DType::complex128) == 16);
  CHECK(dtype_name(DType::bool_) == "bool");
  const auto stray = static_cast<DType>(all_dtypes().size());
  CHECK_THROWS_WITH(dtype_name(stray), Catch::Equals("not a DType: " + std::to_string(all_dtypes().size())));
  CHECK_THROWS_AS(dtype_size(static_cast<DType>(255)), InvalidArgument);
  CHECK_THROWS_AS(Tensor::zeros(stray, {2}), InvalidArgument);
}

TEST_CASE("Tensor::Make validates shape against the buffer", "[tensor]") {
  CHECK_THROWS_AS(Tensor::Make(DType::float32, {2, 3}, Buffer::allocate(20)), InvalidArgument);
  CHECK_THROWS_WITH(Tensor::Make(DType::float32, {2, 3}, Buffer::allocate(20)), Catch::Contains("24 bytes"));
  CHECK_THROWS_AS(Tensor::zeros(DType::int8, {-1}), InvalidArgument);
  CHECK_THROWS_WITH(Tensor::zeros(DType::float64, {1ll << 40, 1ll << 40}), Catch::Contains("overflows"));
  CHECK_THROWS_AS(Tensor::zeros(DType::int8, std::vector<std::int64_t>(33, 1)), InvalidArgument);
  auto t = Tensor::from_values<std::int32_t>({2, 2}, {1, 2, 3, 4});
  CHECK_THROWS_WITH(t.values<float>(), Catch::Contains("holds int32, not float32"));
  CHECK(t.rows(1, 2).values<std::int32_t>()[1] == 4);
  CHECK_THROWS_AS(t.rows(1, 3), InvalidArgument);
  CHECK(Tensor::zeros(DType::complex128, {}).num_elements() == 1);
  CHECK(Tensor::zeros(DType::uint16, {0, 5}).nbytes() == 0);
}

TEST_CASE("Shapes overflow by their non-zero dimensions even when a zero empties them", "[tensor]") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  CHECK_THROWS_MATCHES(Tensor::zeros(DType::uint8, {kMax, kMax, 0}), InvalidArgument,
                       Catch::Matchers::Message("tensor shape 9223372036854775807x9223372036854775807x0 of uint8 "
                                                "overflows: more than 2^63 bytes in its non-zero dimensions"));
  CHECK_THROWS_AS(checked_element_count(std::vector<std::int64_t>{0, kMax / 4}, DType::float64), InvalidArgument);
  // Exactly at the limit is allowed, as NumPy allows it.
  CHECK(checked_element_count(std::vector<std::int64_t>{kMax, 0}, DType::uint8) == 0);
  CHECK(checked_element_count(std::vector<std::int64_t>{0, kMax / 8}, DType::float64) == 0);
  Tensor empty = Tensor::zeros(DType::int16, {0, 1ll << 61});
  CHECK(empty.row_bytes() == (std::size_t{1} << 62));
}

TEST_CASE("Tensor::Make refuses data not aligned for its dtype", "[tensor]") {
  auto block = Buffer::allocate(64);
  REQUIRE(reinterpret_cast<std::uintptr_t>(block->data()) % 16 == 0);
  CHECK_THROWS_MATCHES(Tensor::Make(DType::float32, {4}, Buffer::slice(block, 1, 16)), InvalidArgument,
                       Catch::Matchers::Message("Tensor::Make: the buffer's data is not aligned to 4 bytes, as float32 "
                                                "elements need"));
  CHECK_THROWS_MATCHES(Tensor::Make(DType::complex128, {2}, Buffer::slice(block, 8, 32)), InvalidArgument,
                       Catch::Matchers::Message("Tensor::Make: the buffer's data is not aligned to 16 bytes, as "
                                                "complex128 elements need"));
  CHECK(Tensor::Make(DType::complex64, {2}, Buffer::slice(block, 8, 16)).num_elements() == 2);
  CHECK(Tensor::Make(DType::uint8, {3}, Buffer::slice(block, 5, 3)).num_elements() == 3);
  CHECK(Tensor::Make(DType::float64, {0}, Buffer::slice(block, 3, 0)).num_elements() == 0);

  // read_npy still copies misaligned data into aligned memory.
  test::TempDir dir;
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";
  std::string header = dict + "\n";  // no padding: the data starts wherever the header ends
  if ((10 + header.size()) % 8 == 0) header.insert(0, 1, ' ');
  REQUIRE((10 + header.size()) % 8 != 0);
  const double values[] = {1.5, -2.0, 1e300};
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size() & 0xff) +
                     static_cast<char>(header.size() >> 8) + header +
                     std::string(reinterpret_cast<const char*>(values), sizeof values);
  test::write_text(dir / "odd.npy", file);
  Tensor t = read_npy(dir / "odd.npy");
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 8 == 0);
  CHECK(t.values<double>()[2] == 1e300);
}

namespace {

struct Case {
  std::vector<std::int64_t> shape;
  const char* label;
};

Tensor roundtrip(Store& store, const Tensor& t, Compression c) {
  auto r = store.save(t, {.options = TensorOptions{c}});
  return store.load<Tensor>(r.digest.str());
}

}  // namespace

TEST_CASE("Every dtype and shape class round-trips bit-exactly", "[tensor][roundtrip]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  const std::vector<Case> cases = {
      {{}, "0-d"}, {{0}, "empty"}, {{0, 3}, "empty 2-d"}, {{17}, "1-d"}, {{3, 5, 7}, "3-d"}, {{2600, 101}, "multi-chunk"}};
  std::uint64_t seed = 1;
  for (DType dtype : all_dtypes()) {
    for (const auto& c : cases) {
      for (Compression comp : {Compression::none, Compression::lz4, Compression::zstd, Compression::automatic}) {
        INFO(std::string(dtype_name(dtype)) << " " << c.label << " " << to_string(comp));
        Tensor t = test::random_tensor(dtype, c.shape, seed++);
        Tensor back = roundtrip(store, t, comp);
        REQUIRE(back.dtype() == dtype);
        REQUIRE(back.shape() == c.shape);
        REQUIRE(back.bit_equal(t));
        REQUIRE_NOTHROW(materializer<Tensor>::validate(store.open_artifact(store.save(t, {.options = TensorOptions{comp}}).digest.str())));
      }
    }
  }
  CHECK(store.verify().ok());
}

TEST_CASE("Uncompressed tensors load zero-copy from a page-aligned mapping", "[tensor]") {
  test::TempDir dir;
  Tensor loaded;
  Digest digest;
  {
    Store store = test::make_store(dir.path());
    Tensor t = test::random_tensor(DType::float32, {512, 512}, 7);
    digest = store.save(t, {.options = TensorOptions{Compression::none}}).digest;
    loaded = store.load<Tensor>(digest.str());
    REQUIRE(loaded.bit_equal(t));
  }
  // The store handle is gone; the mapping lives on in the tensor.
  CHECK_FALSE(loaded.buffer()->writable());
  CHECK(reinterpret_cast<std::uintptr_t>(loaded.data()) % 4096 == 0);
  CHECK_THROWS_AS(loaded.mutable_data(), InvalidArgument);
  auto npy = test::object_dir(dir.path(), digest) / "tensor.npy";
  CHECK(std::filesystem::file_size(npy) == 4096 + loaded.nbytes());
  Tensor again = Tensor::Make(loaded.dtype(), loaded.shape(), loaded.buffer());
  CHECK(again.data() == loaded.data());
}

TEST_CASE("Compression policy picks the encoding", "[tensor][lz4]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  auto encoding = [&](const Tensor& t, Compression c) {
    return store.open_artifact(store.save(t, {.options = TensorOptions{c}}).digest.str()).meta()["encoding"].get<std::string>();
  };
  Tensor noise = test::random_tensor(DType::float32, {1024, 1024}, 3);
  Tensor ramp = test::ramp_tensor(1024, 1024, 3);
  Tensor small = test::ramp_tensor(4, 4, 3);
  CHECK(encoding(noise, Compression::automatic) == "npy");
  // A slow int32 ramp: LZ4 shrinks it, byte planes shrink it far more, and
  // the planes of its differences more still.
  CHECK(encoding(ramp, Compression::automatic) == "delta.shuffled.npy.lz4");
  CHECK(encoding(small, Compression::automatic) == "npy");
  CHECK(encoding(noise, Compression::lz4) == "npy.lz4");
  CHECK(encoding(ramp, Compression::none) == "npy");

  // What auto sampled is recorded, so `amphora show` can say why.
  auto why = [&](const Tensor& t) {
    return store.open_artifact(store.save(t, {.options = TensorOptions{Compression::automatic}}).digest.str()).meta();
  };
  const auto noisy_auto = why(noise)["auto"];
  CHECK(noisy_auto["sample_bytes"] == 8 * 65536);
  CHECK(noisy_auto["lz4"].get<double>() >= 0.9 * 8 * 65536);
  const auto ramp_auto = why(ramp)["auto"];
  CHECK(4 * ramp_auto["shuffled_lz4"].get<std::uint64_t>() <= 3 * ramp_auto["lz4"].get<std::uint64_t>());
  CHECK(20 * ramp_auto["delta_lz4"].get<std::uint64_t>() <= 19 * ramp_auto["shuffled_lz4"].get<std::uint64_t>());
  CHECK_FALSE(noisy_auto.contains("delta_lz4"));  // floats have no delta
  CHECK_FALSE(why(small).contains("auto"));
  // Bytes have no planes: a uint8 tensor repeating 1 KiB of noise is plain
  // LZ4 (its differences repeat just as well), with no shuffled figure.
  Tensor bytes = Tensor::zeros(DType::uint8, {1 << 20});
  std::uint64_t x = 7;
  for (std::int64_t k = 0; k < (1 << 20); ++k) {
    if (k % 1024 == 0) x = 7;
    x = x * 6364136223846793005u + 1442695040888963407u;
    bytes.mutable_data()[k] = std::byte(static_cast<unsigned char>(x >> 56));
  }
  CHECK(encoding(bytes, Compression::automatic) == "npy.lz4");
  CHECK_FALSE(why(bytes)["auto"].contains("shuffled_lz4"));
  // LZ4 shrinks it a little, planes not by a quarter more: plain LZ4.
  Tensor mild = test::random_tensor(DType::uint16, {512, 1024}, 9);
  for (auto& v : mild.mutable_values<std::uint16_t>()) v = static_cast<std::uint16_t>(v % 7 == 0 ? 0 : v);
  const auto mild_auto = why(mild)["auto"];
  INFO(mild_auto.dump());
  const auto lz4 = mild_auto["lz4"].get<std::uint64_t>(), planes = mild_auto["shuffled_lz4"].get<std::uint64_t>(),
             differences = mild_auto["delta_lz4"].get<std::uint64_t>();
  const bool shuffle = 4 * planes <= 3 * lz4, delta = 20 * differences <= 19 * (shuffle ? planes : lz4);
  CHECK(encoding(mild, Compression::automatic) ==
        (static_cast<double>(delta ? differences : lz4) >= 0.9 * 8 * 65536 ? "npy"
         : delta                                                           ? "delta.shuffled.npy.lz4"
         : shuffle                                                         ? "shuffled.npy.lz4"
                                                                           : "npy.lz4"));
  // A uint8 ramp: its differences are one value, with no planes to make.
  Tensor wave = Tensor::zeros(DType::uint8, {1 << 20});
  for (std::int64_t k = 0; k < (1 << 20); ++k) wave.mutable_data()[k] = std::byte(static_cast<unsigned char>(k * 7));
  CHECK(encoding(wave, Compression::automatic) == "delta.npy.lz4");
  CHECK_FALSE(why(wave)["auto"].contains("shuffled_lz4"));
  // Asked-for transforms are not second-guessed: no delta over a recipe's payload.
  auto squeezed = store.open_artifact(
      store.save(ramp, {.options = TensorOptions{.compression = Compression::automatic, .encoding = {.squeeze = true}}})
          .digest.str());
  CHECK_FALSE(squeezed.meta()["encoding"].get<std::string>().starts_with("encoded.delta."));
  CHECK_FALSE(squeezed.meta()["auto"].contains("delta_lz4"));
  for (const Tensor& t : {noise, ramp, bytes, mild, wave})
    CHECK(store.load<Tensor>(store.save(t, {.options = TensorOptions{Compression::automatic}}).digest.str()).bit_equal(t));

  // Incompressible chunks are stored, not inflated.
  auto noisy = store.open_artifact(store.save(noise, {.options = TensorOptions{Compression::lz4}}).digest.str());
  CHECK(noisy.meta()["stored_chunks"].get<int>() == 4);
  CHECK(noisy.manifest().find("tensor.npy.lz4")->size < noise.nbytes() + 4096 + 6 * 23 + 1);
  auto packed = store.open_artifact(store.save(ramp, {.options = TensorOptions{Compression::lz4}}).digest.str());
  CHECK(packed.manifest().find("tensor.npy.lz4")->size < ramp.nbytes() / 2);

  // LZ4 is for speed: a chunk its samples say would shrink by less than a
  // tenth is stored without compressing the rest. Shuffled uniform floats
  // are such chunks (LZ4 takes a third off their sign-and-exponent plane,
  // slowly, and nothing off the other three).
  Tensor uniform = Tensor::zeros(DType::float32, {1024, 1024});
  std::mt19937_64 rng(7);
  for (auto& v : uniform.mutable_values<float>()) v = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-52 - 1);
  const TensorOptions lz4_shuffle{.compression = Compression::lz4, .encoding = {.shuffle = true}};
  auto shuffled_uniform = store.open_artifact(store.save(uniform, {.options = lz4_shuffle}).digest.str());
  CHECK(shuffled_uniform.meta()["encoding"] == "shuffled.npy.lz4");
  CHECK(shuffled_uniform.meta()["stored_chunks"] == 4);
  CHECK(shuffled_uniform.manifest().find("tensor.npy.lz4")->size <= uniform.nbytes() + 4096 + 5 * 23);
  CHECK(store.load<Tensor>(shuffled_uniform.digest().str()).bit_equal(uniform));
  // The same floats at half precision's 10 mantissa bits: two planes all
  // zeros, every chunk compressed.
  for (auto& v : uniform.mutable_values<float>()) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits &= ~((1u << 13) - 1);
    std::memcpy(&v, &bits, 4);
  }
  auto halves = store.open_artifact(store.save(uniform, {.options = lz4_shuffle}).digest.str());
  CHECK(halves.meta()["stored_chunks"] == 0);
  CHECK(halves.manifest().find("tensor.npy.lz4")->size < uniform.nbytes() * 3 / 4);
  CHECK(store.load<Tensor>(halves.digest().str()).bit_equal(uniform));
}

TEST_CASE("zstd: levels, what the options refuse, and every transform composed with it", "[tensor][zstd]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  Tensor ramp = test::ramp_tensor(1024, 1024, 3);
  auto saved = [&](const Tensor& t, TensorOptions o) { return store.open_artifact(store.save(t, {.options = o}).digest.str()); };
  CHECK(parse_compression("zstd") == Compression::zstd);
  CHECK(to_string(Compression::zstd) == "zstd");
  CHECK_THROWS_WITH(parse_compression("zst"), Catch::Contains("expected none, lz4, zstd or auto"));

  auto fast = saved(ramp, {.compression = Compression::zstd});
  CHECK(fast.meta()["encoding"] == "npy.zst");
  CHECK(fast.meta()["zstd_level"] == kDefaultZstdLevel);
  // 4 MiB in chunks of 256 KiB, and the header's.
  CHECK(fast.meta()["chunk_bytes"] == 256 << 10);
  CHECK(fast.meta()["chunks"] == 17);
  CHECK(fast.manifest().find("tensor.npy.lz4") == nullptr);
  const std::uint64_t fast_size = fast.manifest().find("tensor.npy.zst")->size;
  auto lz4 = saved(ramp, {.compression = Compression::lz4});
  CHECK(fast_size < lz4.manifest().find("tensor.npy.lz4")->size);
  auto small = saved(ramp, {.compression = Compression::zstd, .level = 19});
  CHECK(small.meta()["zstd_level"] == 19);
  CHECK(small.manifest().find("tensor.npy.zst")->size <= fast_size);
  CHECK(store.load<Tensor>(small.digest().str()).bit_equal(ramp));
  // The same level given explicitly is the same artifact as the default.
  CHECK(saved(ramp, {.compression = Compression::zstd, .level = kDefaultZstdLevel}).digest() == fast.digest());

  CHECK_THROWS_MATCHES(store.save(ramp, {.options = TensorOptions{.compression = Compression::zstd, .level = 20}}),
                       InvalidArgument, Catch::Matchers::Message("zstd level 20 is outside 1..19"));
  CHECK_THROWS_MATCHES(store.save(ramp, {.options = TensorOptions{.compression = Compression::lz4, .level = 3}}),
                       InvalidArgument,
                       Catch::Matchers::Message("a compression level applies to zstd only, not to compression 'lz4'"));
  CHECK_THROWS_AS(store.save(ramp, {.options = TensorOptions{.compression = Compression::zstd, .level = -1}}),
                  InvalidArgument);

  // Incompressible chunks cost zstd a few bytes each, and count as stored.
  Tensor noise = test::random_tensor(DType::float32, {1024, 1024}, 3);
  auto noisy = saved(noise, {.compression = Compression::zstd});
  CHECK(noisy.meta()["stored_chunks"] == 16);
  CHECK(noisy.manifest().find("tensor.npy.zst")->size < noise.nbytes() + 4096 + 17 * 64);

  std::uint64_t seed = 40;
  for (DType dtype : {DType::int64, DType::uint16, DType::float32, DType::float64, DType::bool_}) {
    for (const ArrayEncoding& e : {ArrayEncoding{.shuffle = true}, ArrayEncoding{.delta = true, .squeeze = true},
                                   ArrayEncoding{.delta = true}, ArrayEncoding{.delta = true, .shuffle = true},
                                   ArrayEncoding{.delta = true, .squeeze = true, .shuffle = true},
                                   ArrayEncoding{.decimal = true}}) {
      const bool integer = dtype != DType::float32 && dtype != DType::float64;
      if ((e.delta || e.squeeze) && (!integer || dtype == DType::bool_)) continue;
      if (e.decimal && dtype != DType::float64) continue;
      for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{}, {0}, {131072}, {131073}, {300, 1000}}) {
        INFO(dtype_name(dtype) << " " << shape.size() << "-d delta " << e.delta << " squeeze " << e.squeeze
                               << " shuffle " << e.shuffle << " decimal " << e.decimal);
        Tensor t = test::random_tensor(dtype, shape, seed++);
        if (e.decimal)  // short decimals, as decimal needs
          for (std::size_t k = 0; double& v : t.mutable_values<double>()) v = static_cast<double>(k++ % 1000) * 0.25 + 1;
        if (e.delta && dtype == DType::int64)  // values that mostly increase, as delta suits (random ones elsewhere)
          for (std::size_t k = 0; auto& v : t.mutable_values<std::int64_t>()) v = -5000 + 3 * static_cast<std::int64_t>(k++ / 2);
        if (e.delta && dtype == DType::uint16)
          for (std::size_t k = 0; auto& v : t.mutable_values<std::uint16_t>()) v = static_cast<std::uint16_t>(k++ / 8);
        auto art = saved(t, {.compression = Compression::zstd, .encoding = e});
        // Shuffle, and delta without squeeze, happen chunk by chunk inside
        // the codec; the rest leaves a recipe.
        const bool recipe = e.squeeze || e.decimal, chunk_delta = e.delta && !e.squeeze;
        REQUIRE(art.meta()["encoding"] == (recipe ? "encoded." : "") + std::string(chunk_delta ? "delta." : "") +
                                              std::string(e.shuffle ? "shuffled." : "") + "npy.zst");
        REQUIRE(art.meta().contains("recipe") == recipe);
        REQUIRE(store.load<Tensor>(art.digest().str()).bit_equal(t));
        REQUIRE_NOTHROW(materializer<Tensor>::validate(art));
        if (!shape.empty() && shape[0] > 2) REQUIRE(load_tensor_rows(art, 1, 3).bit_equal(t.rows(1, 3)));
      }
    }
  }

  // The options reach every tensor a composite stores.
  std::map<std::string, Tensor> parts = {{"ramp", ramp}, {"tiny", Tensor::zeros(DType::int8, {3})}};
  auto bundle = store.open_artifact(store.save(parts, {.options = TensorOptions{Compression::zstd}}).digest.str());
  REQUIRE(bundle.children().size() == 2);
  for (const auto& child : bundle.children())
    CHECK(store.open_artifact(child.digest.str()).meta()["encoding"] == "npy.zst");
  auto back = store.load<std::map<std::string, Tensor>>(bundle.digest().str());
  CHECK(back.at("ramp").bit_equal(ramp));
  CHECK(store.verify().ok());
}

TEST_CASE("Delta chunk by chunk: integers of every width, rises and falls, rows across chunk edges",
          "[tensor][encoding][zstd][lz4]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  // 700 elements a row, so a 1 MiB chunk ends inside a row for every width.
  auto ids = [](DType dtype, std::int64_t rows) {
    Tensor t = Tensor::zeros(dtype, {rows, 700});
    const std::size_t width = dtype_size(dtype);
    std::uint64_t x = 12345;
    for (std::size_t k = 0; k < t.num_elements(); ++k) {
      x = x * 6364136223846793005u + 1442695040888963407u;
      // Rising by 0 to 3, with a fall to anywhere one time in 500; the low
      // bytes of that for narrower integers (little-endian).
      const std::uint64_t v = (x >> 33) % 500 == 0 ? x >> 7 : k * 5 / 2 + ((x >> 40) & 3);
      std::memcpy(t.mutable_data() + k * width, &v, width);
    }
    return t;
  };
  for (DType dtype : {DType::int8, DType::uint8, DType::int16, DType::uint16, DType::int32, DType::uint32,
                      DType::int64, DType::uint64})
    for (Compression c : {Compression::zstd, Compression::lz4})
      for (bool shuffle : {false, true}) {
        const std::int64_t rows = static_cast<std::int64_t>((3u << 20) / (700 * dtype_size(dtype))) + 3;
        const Tensor t = ids(dtype, rows);
        INFO(dtype_name(dtype) << " " << to_string(c) << (shuffle ? " shuffled" : ""));
        auto art = store.open_artifact(
            store.save(t, {.options = TensorOptions{.compression = c, .encoding = {.delta = true, .shuffle = shuffle}}})
                .digest.str());
        REQUIRE(art.meta()["encoding"] == std::string("delta.") + (shuffle ? "shuffled." : "") +
                                              (c == Compression::zstd ? "npy.zst" : "npy.lz4"));
        CHECK_FALSE(art.meta().contains("recipe"));
        REQUIRE(store.load<Tensor>(art.digest().str()).bit_equal(t));
        REQUIRE_NOTHROW(materializer<Tensor>::validate(art));
        const std::int64_t edge = static_cast<std::int64_t>((1u << 20) / (700 * dtype_size(dtype)));
        for (auto [b, e] : std::vector<std::pair<std::int64_t, std::int64_t>>{
                 {0, 1}, {edge, edge + 1}, {edge - 1, edge + 2}, {rows - 1, rows}, {3, 3}, {edge / 2, 2 * edge + 1}})
          REQUIRE(load_tensor_rows(art, b, e).bit_equal(t.rows(b, e)));
        // Under zstd, differences of mostly rising integers take fewer bytes
        // than the values (LZ4 has no entropy coder to profit from small ones).
        if (dtype_size(dtype) >= 4 && c == Compression::zstd) {
          auto plain = store.open_artifact(
              store.save(t, {.options = TensorOptions{.compression = c, .encoding = {.shuffle = shuffle}}}).digest.str());
          const std::string file = c == Compression::zstd ? "tensor.npy.zst" : "tensor.npy.lz4";
          CHECK(art.manifest().find(file)->size < plain.manifest().find(file)->size);
        }
      }
  // Delta of floats is refused, whatever the codec; with squeeze it needs the whole array's differences.
  CHECK_THROWS_WITH(store.save(test::random_tensor(DType::float32, {10, 10}, 1),
                               {.options = TensorOptions{.compression = Compression::zstd, .encoding = {.delta = true}}}),
                    Catch::Contains("delta coding needs an integer dtype, not float32"));
  Tensor rising = Tensor::zeros(DType::int64, {10, 700});
  for (std::int64_t k = 0; auto& v : rising.mutable_values<std::int64_t>()) v = 1'000'000 + k++ * 5 / 2;
  auto squeezed = store.open_artifact(
      store.save(rising, {.options = TensorOptions{.compression = Compression::zstd,
                                                                  .encoding = {.delta = true, .squeeze = true}}})
          .digest.str());
  CHECK(squeezed.meta()["encoding"] == "encoded.npy.zst");
  CHECK(squeezed.meta()["recipe"]["transforms"] == nlohmann::json{"delta", "squeeze"});
  // Ids that sometimes fall: their wrapped differences need all 8 bytes, so
  // squeeze would narrow nothing; they are stored as chunk delta, and only
  // where that is so (a fall in the last element, or in the first pair, counts).
  for (Compression c : {Compression::zstd, Compression::lz4})
    for (std::size_t fall : {std::size_t{1}, std::size_t{3500}, std::size_t{6999}}) {
      Tensor falling = rising.copy();
      auto v = falling.mutable_values<std::int64_t>();
      v[fall] = v[fall - 1] - 3;
      auto art = store.open_artifact(
          store.save(falling, {.options = TensorOptions{.compression = c, .encoding = {.delta = true, .squeeze = true,
                                                                                       .shuffle = fall == 3500}}})
              .digest.str());
      INFO(to_string(c) << " fall at " << fall);
      CHECK(art.meta()["encoding"] == std::string(fall == 3500 ? "delta.shuffled." : "delta.") +
                                          (c == Compression::zstd ? "npy.zst" : "npy.lz4"));
      CHECK_FALSE(art.meta().contains("recipe"));
      CHECK(store.load<Tensor>(art.digest().str()).bit_equal(falling));
      CHECK(load_tensor_rows(art, 3, 9).bit_equal(falling.rows(3, 9)));
    }
  // Uncompressed, squeeze stays in the recipe (it has no chunk delta to fall back on).
  CHECK(delta_squeeze_dtype(DType::int16, std::as_bytes(std::span<const std::int16_t>(std::vector<std::int16_t>{5, 4}))) ==
        DType::uint16);
  CHECK(delta_squeeze_dtype(DType::int64, std::as_bytes(std::span<const std::int64_t>(std::vector<std::int64_t>{5, 9, 300}))) ==
        DType::uint16);
  CHECK_THROWS_WITH(delta_squeeze_dtype(DType::float32, {}), Catch::Contains("needs an integer dtype, not float32"));
  // An empty tensor and a 0-d one.
  for (const Tensor& t : {Tensor::zeros(DType::int32, {0, 3}), Tensor::from_values<std::int16_t>({}, std::vector<std::int16_t>{-7})}) {
    auto art = store.open_artifact(
        store.save(t, {.options = TensorOptions{.compression = Compression::zstd, .encoding = {.delta = true}}}).digest.str());
    CHECK(art.meta()["encoding"] == "delta.npy.zst");
    CHECK(store.load<Tensor>(art.digest().str()).bit_equal(t));
  }
}

TEST_CASE("Rows of a tensor encoded element by element decode only their stored elements", "[tensor][encoding][zstd]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  // Two-decimal readings: decimal + squeeze store them as int16, so the
  // stored chunks' edges fall inside rows.
  Tensor readings = Tensor::zeros(DType::float64, {3000, 700});
  for (std::size_t k = 0; auto& v : readings.mutable_values<double>()) v = (static_cast<double>(k++ % 20011) - 5000) / 100;
  Tensor ids = Tensor::zeros(DType::int64, {3000, 700});
  for (std::size_t k = 0; auto& v : ids.mutable_values<std::int64_t>()) v = 1'000'000 + static_cast<std::int64_t>(k++ % 3000);
  for (Compression c : {Compression::zstd, Compression::lz4, Compression::none})
    for (auto [t, e] : {std::pair{readings, ArrayEncoding{.decimal = true, .squeeze = true}},
                        std::pair{ids, ArrayEncoding{.squeeze = true}},
                        std::pair{readings, ArrayEncoding{.decimal = true, .squeeze = true, .shuffle = true}}}) {
      auto art = store.open_artifact(store.save(t, {.options = TensorOptions{.compression = c, .encoding = e}}).digest.str());
      REQUIRE(art.meta().contains("recipe"));
      // 700 int16 (squeezed) stored elements a row: 1400 bytes; a chunk ends inside row 748.
      for (auto [b, e2] : std::vector<std::pair<int, int>>{{0, 1}, {748, 750}, {740, 1500}, {2999, 3000}, {10, 10}}) {
        INFO(to_string(c) << " " << art.meta()["encoding"].get<std::string>() << " rows " << b << ".." << e2);
        REQUIRE(load_tensor_rows(art, b, e2).bit_equal(t.rows(b, e2)));
      }
      CHECK_THROWS_WITH(load_tensor_rows(art, 0, 3001), Catch::Contains("rows [0, 3001) are outside [0, 3000)"));
    }
  auto scalar = store.open_artifact(
      store.save(Tensor::from_values<double>({}, std::vector<double>{1.25}),
                 {.options = TensorOptions{.compression = Compression::zstd, .encoding = {.decimal = true}}})
          .digest.str());
  CHECK_THROWS_WITH(load_tensor_rows(scalar, 0, 1), Catch::Contains("0-d tensor"));
}

TEST_CASE("Chunk edges: tensors of exactly, just under and just over whole chunks", "[tensor][zstd][lz4]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  // LZ4 cuts the data into chunks of 1 MiB, zstd into chunks of 256 KiB.
  for (auto [c, chunk] : {std::pair{Compression::lz4, std::int64_t{1} << 20}, std::pair{Compression::zstd, std::int64_t{256} << 10}})
  for (std::int64_t bytes : {chunk, chunk - 1, chunk + 1, 2 * chunk + 4095}) {
    Tensor flat = Tensor::zeros(DType::uint8, {bytes});
    for (std::int64_t k = 0; k < bytes; ++k) flat.mutable_data()[k] = std::byte(static_cast<unsigned char>((k * 31) >> 9));
    {
      INFO(bytes << " bytes, " << to_string(c));
      auto art = store.open_artifact(store.save(flat, {.options = TensorOptions{c}}).digest.str());
      CHECK(art.meta()["chunk_bytes"] == chunk);
      CHECK(art.meta()["chunks"] == 1 + (bytes + chunk - 1) / chunk);
      CHECK(store.load<Tensor>(art.digest().str()).bit_equal(flat));
      for (std::int64_t edge : {chunk, 2 * chunk}) {
        if (edge + 1 > bytes) continue;
        CHECK(load_tensor_rows(art, edge - 1, edge + 1).bit_equal(flat.rows(edge - 1, edge + 1)));
        CHECK(load_tensor_rows(art, edge, edge + 1).bit_equal(flat.rows(edge, edge + 1)));
      }
      CHECK(load_tensor_rows(art, bytes - 1, bytes).bit_equal(flat.rows(bytes - 1, bytes)));
    }
  }
}

TEST_CASE("Row slices read only what they need and equal the same rows", "[tensor][lz4][zstd]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  // 3 rows of 700 KiB: chunk boundaries fall inside rows.
  Tensor t = test::ramp_tensor(2000, 3000, 11);
  // A store whose medium copies what it maps (as a remote's does) reads the
  // rows of an uncompressed tensor rather than the whole file.
  Store copying = Store::open({.create = true, .medium = testing::make_memory_medium()});
  for (Store* where : {&store, &copying})
  for (TensorOptions options : {TensorOptions{Compression::lz4}, TensorOptions{Compression::zstd},
                                TensorOptions{Compression::none},
                                TensorOptions{.compression = Compression::zstd, .encoding = {.shuffle = true}},
                                TensorOptions{.compression = Compression::lz4, .encoding = {.shuffle = true}}}) {
    const Compression c = options.compression;
    auto reader = where->open_artifact(where->save(t, {.options = options}).digest.str());
    CHECK(reader.meta<std::string>("encoding").starts_with(options.encoding.shuffle ? "shuffled.npy." : "npy"));
    CHECK(reader.maps_in_place() == (where == &store));
    for (auto [b, e] : std::vector<std::pair<int, int>>{{0, 2000}, {0, 1}, {1999, 2000}, {87, 88}, {87, 600}, {500, 500}, {1000, 1999}}) {
      INFO(to_string(c) << (options.encoding.shuffle ? " shuffled" : "") << " rows " << b << ".." << e);
      Tensor part = load_tensor_rows(reader, b, e);
      REQUIRE(part.bit_equal(t.rows(b, e)));
    }
    CHECK_THROWS_AS(load_tensor_rows(reader, 5, 2001), InvalidArgument);
    CHECK_THROWS_AS(load_tensor_rows(reader, -1, 2), InvalidArgument);
  }
  Tensor flags = Tensor::zeros(DType::bool_, {100, 3});
  for (std::int64_t k = 0; k < 300; k += 7) flags.mutable_data()[k] = std::byte{1};
  auto stored_flags = copying.open_artifact(copying.save(flags, {.options = TensorOptions{Compression::none}}).digest.str());
  CHECK(load_tensor_rows(stored_flags, 30, 41).bit_equal(flags.rows(30, 41)));
  auto scalar = store.open_artifact(store.save(Tensor::zeros(DType::int8, {})).digest.str());
  CHECK_THROWS_WITH(load_tensor_rows(scalar, 0, 1), Catch::Contains("0-d"));
}

TEST_CASE("Summary statistics are recorded beside the payload", "[tensor][stats]") {
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  auto meta = [&](const Tensor& t) { return store.open_artifact(store.save(t).digest.str()).meta(); };
  auto ints = meta(Tensor::from_values<std::int64_t>({4}, {-9007199254740993ll, 5, 7, 1}));
  CHECK(ints["dtype"] == "int64");
  CHECK(ints["shape"] == nlohmann::json::array({4}));
  CHECK(ints["stats"]["min"].get<std::int64_t>() == -9007199254740993ll);  // exact beyond 2^53
  CHECK(ints["stats"]["max"].get<std::int64_t>() == 7);
  float nan = std::nanf("");
  auto floats = meta(Tensor::from_values<float>({5}, {1.0f, nan, 3.0f, -2.0f, nan}));
  CHECK(floats["stats"]["nan_count"] == 2);
  CHECK(floats["stats"]["min"].get<double>() == -2.0);
  CHECK(floats["stats"]["max"].get<double>() == 3.0);
  CHECK(floats["stats"]["mean"].get<double>() == Approx(2.0 / 3.0));
  auto inf = meta(Tensor::from_values<double>({2}, {1.0, INFINITY}));
  CHECK(inf["stats"]["max"] == "inf");
  auto bools = meta(Tensor::from_values<bool>({4}, {true, false, true, true}));
  CHECK(bools["stats"]["mean"].get<double>() == 0.75);
  auto halves = meta(Tensor::from_values<bfloat16>({2}, {bfloat16::from_float(1.5f), bfloat16::from_float(-4.0f)}));
  CHECK(halves["dtype"] == "bfloat16");
  CHECK(halves["stats"]["min"].get<double>() == -4.0);
  CHECK(meta(Tensor::zeros(DType::complex64, {3}))["stats"].is_null());
  CHECK(meta(Tensor::zeros(DType::float32, {0}))["stats"].is_null());
  // 64-bit integers over several blocks, extremes included: the mean is the
  // exact sum's, however the sum is split to be taken.
  std::mt19937_64 rng(11);
  for (DType dtype : {DType::int64, DType::uint64}) {
    Tensor t = Tensor::zeros(dtype, {100003});
    for (std::size_t i = 0; i < 100003; ++i) {
      std::uint64_t v = rng();
      if (i % 1000 == 0) v = dtype == DType::int64 ? std::uint64_t{1} << 63 : ~std::uint64_t{0};  // INT64_MIN, UINT64_MAX
      if (i % 1000 == 1) v = dtype == DType::int64 ? (std::uint64_t{1} << 63) - 1 : 0;            // INT64_MAX, 0
      std::memcpy(t.mutable_data() + 8 * i, &v, 8);
    }
    __int128 sum = 0;
    for (std::size_t i = 0; i < 100003; ++i) {
      std::uint64_t v;
      std::memcpy(&v, t.data() + 8 * i, 8);
      sum += dtype == DType::int64 ? static_cast<__int128>(static_cast<std::int64_t>(v)) : static_cast<__int128>(v);
    }
    auto stats = meta(t)["stats"];
    INFO(dtype_name(dtype));
    CHECK(stats["mean"].get<double>() == static_cast<double>(sum) / 100003);
    if (dtype == DType::int64) {
      CHECK(stats["min"].get<std::int64_t>() == std::numeric_limits<std::int64_t>::min());
      CHECK(stats["max"].get<std::int64_t>() == std::numeric_limits<std::int64_t>::max());
    } else {
      CHECK(stats["min"].get<std::uint64_t>() == 0);
      CHECK(stats["max"].get<std::uint64_t>() == std::numeric_limits<std::uint64_t>::max());
    }
  }
}

TEST_CASE("write_npy and read_npy round-trip; data is page-aligned from 64 KiB, 64-byte aligned below", "[tensor][npy]") {
  test::TempDir dir;
  Tensor big = test::random_tensor(DType::complex64, {128, 64}, 5);  // exactly 64 KiB
  write_npy(big, dir / "big.npy");
  auto bytes = test::read_text(dir / "big.npy");
  REQUIRE(bytes.size() == 4096 + big.nbytes());
  CHECK(bytes[4095] == '\n');
  auto header = parse_npy_header(Buffer::map_file(dir / "big.npy")->bytes(), "big.npy");
  CHECK(header.descr == "<c8");
  CHECK(header.data_offset == 4096);
  CHECK(read_npy(dir / "big.npy").bit_equal(big));

  Tensor small = test::random_tensor(DType::complex64, {3, 4}, 5);
  write_npy(small, dir / "small.npy");
  bytes = test::read_text(dir / "small.npy");
  REQUIRE(bytes.size() == 128 + small.nbytes());
  CHECK(bytes[127] == '\n');
  CHECK(parse_npy_header(Buffer::map_file(dir / "small.npy")->bytes(), "small.npy").data_offset == 128);
  CHECK(read_npy(dir / "small.npy").bit_equal(small));
  // One byte under 64 KiB is small; a 0-d double takes 128 + 8 bytes.
  CHECK(make_tensor_npy_header(DType::uint8, std::vector<std::int64_t>{65535}).size() == 128);
  CHECK(make_tensor_npy_header(DType::uint8, std::vector<std::int64_t>{65536}).size() == 4096);
  CHECK(make_tensor_npy_header(DType::float64, std::vector<std::int64_t>{}).size() == 128);
  CHECK(make_npy_header(DType::int8, std::vector<std::int64_t>{5}).find("'shape': (5,)") != std::string::npos);
  CHECK(make_npy_header(DType::int8, std::vector<std::int64_t>{}).find("'shape': ()") != std::string::npos);
}

TEST_CASE("Tensors without elements put their data at a multiple of 64, not 4096", "[tensor][npy][empty]") {
  // numpy.load(mmap_mode="r") maps from the page holding the data offset;
  // data at 4096 at the very end of a 4096-byte file maps zero bytes and fails.
  test::TempDir dir;
  Store store = test::make_store(dir.path());
  for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{0}, {0, 3}, {3, 0, 2}}) {
    std::string header = make_tensor_npy_header(DType::complex128, shape);
    INFO(header);
    CHECK(header.size() % 64 == 0);
    CHECK(header.size() < 4096);
    CHECK(header == make_npy_header(DType::complex128, shape, 64));
    Tensor t = Tensor::zeros(DType::complex128, shape);
    auto raw = store.save(t, {.options = TensorOptions{Compression::none}});
    auto obj = test::object_dir(dir.path(), raw.digest);
    CHECK(test::read_text(obj / "tensor.npy") == header);
    auto packed = store.save(t, {.options = TensorOptions{Compression::lz4}});
    Tensor index = read_npy(test::object_dir(dir.path(), packed.digest) / "tensor.chunks.npy");
    CHECK(index.values<std::uint64_t>()[3] == header.size());  // the sentinel's raw offset: the whole .npy
    for (const auto& d : {raw.digest, packed.digest}) {
      CHECK(store.load<Tensor>(d.str()).shape() == shape);
      CHECK_NOTHROW(materializer<Tensor>::validate(store.open_artifact(d.str())));
    }
    write_npy(t, dir / "e.npy");
    CHECK(test::read_text(dir / "e.npy") == header);
    CHECK(read_npy(dir / "e.npy").shape() == shape);
  }
  // Small tensors with elements have the same 64-byte rule, 0-d included.
  CHECK(make_tensor_npy_header(DType::int8, std::vector<std::int64_t>{}).size() == 128);
  CHECK(make_tensor_npy_header(DType::int8, std::vector<std::int64_t>{1, 1}).size() == 128);
}

TEST_CASE("An eager load reads the payload into memory and equals the mapped load", "[tensor][eager]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  for (auto compression : {Compression::none, Compression::lz4}) {
    Tensor t = test::random_tensor(DType::float32, {3000, 1000}, 8);  // 12 MB: several read blocks
    auto saved = store.save(t, {.options = TensorOptions{compression}});
    Tensor mapped = store.load<Tensor>(saved.digest);
    Tensor eager = store.load<Tensor>(saved.digest, {.eager = true});
    CHECK(eager.bit_equal(t));
    CHECK(mapped.bit_equal(t));
  }
  // Children of a composite are loaded the same way as their parent.
  std::vector<Tensor> items = {test::random_tensor(DType::int8, {5}, 1)};
  std::map<std::string, Tensor> named = {{"a", test::random_tensor(DType::uint16, {7, 3}, 2)}};
  auto saved = store.save(named);
  auto back = store.load<std::map<std::string, Tensor>>(saved.digest, {.eager = true});
  CHECK(back.at("a").bit_equal(named.at("a")));
  // A payload cut short is damage, as for a mapped load.
  auto raw = store.save(test::random_tensor(DType::int32, {100000}, 3), {.options = TensorOptions{Compression::none}});
  auto file = test::object_dir(dir / "store", raw.digest) / "tensor.npy";
  fs::resize_file(file, fs::file_size(file) - 8);
  CHECK_THROWS_AS(store.load<Tensor>(raw.digest, {.eager = true}), CorruptData);
}
