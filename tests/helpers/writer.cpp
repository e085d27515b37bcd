// A separate writer process for the multi-process tests:
//   amphora_test_writer digest STORE SEED ROWS COLS   save once, print the digest
//   amphora_test_writer named STORE NAME SEED ROWS COLS  the same, under NAME
//   amphora_test_writer many STORE NAME COUNT SEED    save COUNT small tensors under NAME
//   amphora_test_writer loop STORE NAME MIB           save MIB-sized tensors until killed
//   amphora_test_writer example STORE     save docs/FORMAT.md's worked composite, print its digest
//   amphora_test_writer example STORE [NAME]   save a map whose two values are one child artifact
//   amphora_test_writer composites STORE NAME COUNT SEED  save COUNT composites (three tensor
//       children, one shared by every save) under NAME; prints "VERSION DIGEST" per save, or
//       "collected" when gc took a child before its parent was published
//   amphora_test_writer kinds STORE       save one value of every built-in kind under the names
//       tests/python/test_reader.py expects (the values are written out there too)
//   amphora_test_writer rows STORE REF BEGIN END OUT.npy   load_tensor_rows, written as .npy
//   amphora_test_writer column STORE REF NAME OUT.csv      load_table of one column, written as CSV
//   amphora_test_writer record STORE REF I                 one record of a record collection, as JSON
//       (partial reads, which a store reads through to its remote without pulling)
// With $AMPHORA_TEST_FAULT set to a fault point of tests/support/fault_medium.hpp
// ("before:replace"), the store's medium kills the process when it gets there.

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/everyday.hpp>
#include <amphora/record_collection.hpp>
#include <amphora/record_list.hpp>
#include <amphora/npy.hpp>
#include <amphora/sparse.hpp>
#include <amphora/table.hpp>
#include <amphora/tensor.hpp>

#include "fault_medium.hpp"

#include <array>
#include <cstdio>
#include <limits>
#include <map>
#include <variant>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <string>

namespace {

amphora::Store open_store(const char* dir) {
  const char* fault = std::getenv("AMPHORA_TEST_FAULT");
  if (!fault || !*fault) return amphora::Store::open(dir, {.create = true});
  auto medium = std::make_shared<amphora::testing::FaultMedium>(amphora::open_local_medium(dir, true));
  medium->arm(fault, amphora::testing::FaultMedium::Action::kill);
  return amphora::Store::open({.create = true, .medium = medium});
}

amphora::Tensor random_floats(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  auto t = amphora::Tensor::zeros(amphora::DType::float32, {rows, cols});
  std::mt19937_64 rng(seed);
  auto v = t.mutable_values<float>();
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : v) x = dist(rng);
  return t;
}

// A composite whose children are saved before it is published.
struct Triple {
  amphora::Tensor shared, own, other;
};

}  // namespace

namespace kinds {

struct Box {
  float x = 0, y = 0;
  std::string label;
};
AMPHORA_MATERIALIZE(Box, "test.box", 1, x, y, label)

struct Detection {
  std::string path;
  std::int32_t width = 0;
  std::vector<float> boxes;
  std::vector<std::string> labels;
  std::optional<double> score;
  nlohmann::json extra;
  Box main;
  std::vector<Box> regions;
};
AMPHORA_MATERIALIZE(Detection, "test.detection", 1, path, width, boxes, labels, score, extra, main, regions)

struct Model {
  std::string name;
  std::int64_t epochs = 0;
  nlohmann::json config;
  amphora::Tensor weights;
  std::vector<std::string> vocab;
  std::optional<double> dropout;
};
AMPHORA_MATERIALIZE(Model, "test.model", 1, name, epochs, config, weights, vocab, dropout)

// Nesting that needs no code but these lines: tensors, fixed-size arrays,
// maps, pairs and optionals as record-list columns; a variant member makes
// a list of struct artifacts instead.
struct Sample {
  amphora::Tensor pixels;
  std::vector<std::array<float, 2>> landmarks;
  std::array<float, 4> bbox{};
  std::map<std::string, double> scores;
  std::pair<std::string, std::int64_t> source;
  std::optional<amphora::Tensor> mask;
};
AMPHORA_MATERIALIZE(Sample, "test.sample", 1, pixels, landmarks, bbox, scores, source, mask)

struct Experiment {
  std::string name;
  std::variant<std::int64_t, std::string> seed;
};
AMPHORA_MATERIALIZE(Experiment, "test.experiment", 1, name, seed)

// Arrays written through the toolkit with encodings (read in Python with Artifact.array).
struct EncodedColumns {
  std::vector<std::int64_t> ids;
};

}  // namespace kinds

template <>
struct amphora::materializer<kinds::EncodedColumns> {
  static constexpr std::string_view name = "test.encoded_columns";
  static constexpr int version = 1;
  static void save(const kinds::EncodedColumns& c, ArtifactWriter& out) {
    out.write_array<std::int64_t>("ids.npy", c.ids, {.delta = true, .squeeze = true});
    const std::int64_t shape[] = {2, 2};
    const std::uint16_t words[] = {1, 300, 65535, 7};
    out.write_array("words.npy", amphora::DType::uint16, shape, std::as_bytes(std::span(words)), {.shuffle = true});
  }
  static kinds::EncodedColumns load(const ArtifactReader& in) {
    auto ids = in.read_array("ids.npy", amphora::DType::int64, 1);
    auto v = ids.values<std::int64_t>();
    return {{v.begin(), v.end()}};
  }
};

namespace kinds {

// The values test_reader.py compares with: keep the two in step.
void save_all(amphora::Store& store) {
  using amphora::Tensor;
  auto named = [&](const auto& value, const char* name, amphora::MaterializerOptions options = {}) {
    store.save(value, {.name = name, .options = std::move(options)});
  };
  std::vector<float> f(12);
  for (int i = 0; i < 12; ++i) f[static_cast<std::size_t>(i)] = static_cast<float>(i) * 0.5f;
  named(Tensor::from_values<float>({3, 4}, f), "tensor_f32", amphora::TensorOptions{amphora::Compression::none});
  std::vector<std::int32_t> ramp(300000);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<std::int32_t>(i / 100);
  named(Tensor::from_values<std::int32_t>({3000, 100}, ramp), "tensor_lz4", amphora::TensorOptions{amphora::Compression::lz4});
  named(Tensor::from_values<std::int32_t>({3000, 100}, ramp), "tensor_zstd",
        amphora::TensorOptions{.compression = amphora::Compression::zstd, .level = 3});
  {  // 2.4 MB of float64 in rows of 5600 bytes: chunk edges fall inside rows
    std::vector<double> wide(300000);
    for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<double>(i % 977) * 0.25;
    named(Tensor::from_values<double>({428, 700}, std::span<const double>(wide.data(), 428 * 700)), "tensor_zstd_wide",
          amphora::TensorOptions{amphora::Compression::zstd});
    named(Tensor::from_values<double>({428, 700}, std::span<const double>(wide.data(), 428 * 700)),
          "tensor_shuffled_zstd", amphora::TensorOptions{.compression = amphora::Compression::zstd, .encoding = {.shuffle = true}});
  }
  std::vector<amphora::bfloat16> bf;
  for (float v : {1.0f, -2.5f, 0.15625f, 3e38f}) bf.push_back(amphora::bfloat16::from_float(v));
  named(Tensor::from_values<amphora::bfloat16>({4}, bf), "tensor_bf16");
  named(Tensor::from_values<bool>({3}, std::vector<bool>{true, false, true}), "tensor_bool");
  named(Tensor::zeros(amphora::DType::complex64, {0, 2}), "tensor_empty");
  std::vector<std::int64_t> sorted(5000);
  for (std::size_t i = 0; i < sorted.size(); ++i) sorted[i] = -1000 + static_cast<std::int64_t>(7 * i + i % 3);
  named(Tensor::from_values<std::int64_t>({50, 100}, sorted), "tensor_encoded",
        amphora::TensorOptions{.compression = amphora::Compression::lz4,
                               .encoding = {.delta = true, .squeeze = true, .shuffle = true}});
  // Two-decimal readings, decimal + squeeze into int16 under zstd: 700 a
  // row, so stored chunks of 256 KiB end inside rows 187, 374, 561 and 748.
  std::vector<double> readings(3000 * 700);
  for (std::size_t i = 0; i < readings.size(); ++i) readings[i] = (static_cast<double>(i % 20011) - 5000) / 100;
  named(Tensor::from_values<double>({3000, 700}, readings), "tensor_decimal_rows",
        amphora::TensorOptions{.compression = amphora::Compression::zstd, .encoding = {.decimal = true, .squeeze = true}});
  named(Tensor::from_values<double>({3000, 700}, readings), "tensor_decimal_rows_raw",
        amphora::TensorOptions{.compression = amphora::Compression::none, .encoding = {.decimal = true, .squeeze = true}});
  // Values that fall now and then: their differences wrap.
  std::vector<std::int16_t> falling(3000);
  for (std::size_t i = 0; i < falling.size(); ++i) falling[i] = static_cast<std::int16_t>(i % 7 == 0 ? -30000 + i : 3 * i);
  named(Tensor::from_values<std::int16_t>({3000}, falling), "tensor_delta_falling",
        amphora::TensorOptions{.compression = amphora::Compression::zstd, .encoding = {.delta = true, .squeeze = true}});
  // Delta-coded chunk by chunk: 3 chunks and a bit of int32 rows of 700.
  std::vector<std::int32_t> rising(800 * 1400);
  for (std::size_t i = 0; i < rising.size(); ++i) rising[i] = static_cast<std::int32_t>(i % 997 == 0 ? -5 * i : 3 * i + i % 4);
  named(Tensor::from_values<std::int32_t>({1600, 700}, rising), "tensor_delta_chunks",
        amphora::TensorOptions{.compression = amphora::Compression::zstd, .encoding = {.delta = true, .shuffle = true}});
  named(Tensor::from_values<std::int32_t>({1600, 700}, rising), "tensor_delta_chunks_lz4",
        amphora::TensorOptions{.compression = amphora::Compression::lz4, .encoding = {.delta = true}});
  named(Tensor::from_values<float>({3, 4}, f), "tensor_shuffled",
        amphora::TensorOptions{.compression = amphora::Compression::none, .encoding = {.shuffle = true}});
  named(EncodedColumns{sorted}, "encoded_columns");
  {
    std::vector<std::string> city;
    std::vector<std::int64_t> count, when;
    std::vector<double> score;
    std::vector<bool> ok, has;
    std::vector<std::string> ids;
    for (int i = 0; i < 300; ++i) {
      ids.push_back("id-" + std::to_string(i * 31));
      city.push_back(i % 3 == 0 ? "Z\xc3\xbcrich" : i % 3 == 1 ? "\xe6\x9d\xb1\xe4\xba\xac" : "");
      count.push_back(i * i - 100);
      when.push_back(1'600'000'000'000'000'000 + i * 1'000'000'007LL);
      score.push_back(i / 8.0);
      ok.push_back(i % 2 == 0);
      has.push_back(i % 7 != 0);
    }
    named(amphora::Table::make({{"city", amphora::Column::of(city, has)},
                                {"count", amphora::Column::of(count, has)},
                                {"when", amphora::Column::timestamps(Tensor::from_values<std::int64_t>({300}, when), has)},
                                {"score", amphora::Column::of(score)},
                                {"ok", amphora::Column::numbers(Tensor::from_values<bool>({300}, ok), has)},
                                {"id", amphora::Column::of(ids)}}),
          "table");
  }

  auto i32 = [](std::vector<std::int32_t> v) { return Tensor::from_values<std::int32_t>({static_cast<std::int64_t>(v.size())}, v); };
  auto i64 = [](std::vector<std::int64_t> v) { return Tensor::from_values<std::int64_t>({static_cast<std::int64_t>(v.size())}, v); };
  named(amphora::SparseMatrix::csr(3, 4, Tensor::from_values<double>({4}, std::vector<double>{1, 2, 3, 4}),
                                   i32({0, 2, 1, 3}), i32({0, 2, 2, 4})), "sparse_csr");
  named(amphora::SparseMatrix::csc(3, 4, Tensor::from_values<float>({2}, std::vector<float>{5, 6}), i64({2, 0}),
                                   i64({0, 1, 1, 2, 2})), "sparse_csc");
  named(amphora::SparseMatrix::coo(2, 2, Tensor::from_values<std::int16_t>({3}, std::vector<std::int16_t>{7, -8, 9}),
                                   i32({0, 1, 1}), i32({1, 0, 1})), "sparse_coo");

  named(std::string("h\xc3\xa9llo, w\xe4\xb8\x96rld"), "string_utf8");
  named(std::string("\xff\x00" "binary", 8), "string_bytes");
  named(nlohmann::json{{"lr", 0.001}, {"layers", {64, 32}}, {"name", "mlp"}, {"big", 9007199254740993ull}}, "json");
  named(std::vector<std::string>{"alpha", "", "\xce\xb2\xce\xb3"}, "strings");
  named(std::vector<std::vector<float>>{{1.5f, 2.5f}, {}, {-1.0f}}, "list");
  named(std::map<std::string, std::int64_t>{{"a", 1}, {"b", -2}}, "map_array");
  named(std::map<std::string, std::string>{{"k", "v"}, {"x", "yz"}}, "map_strings");
  named(std::map<std::string, nlohmann::json>{{"j", {1, "two"}}, {"n", nullptr}}, "map_json");
  named(std::map<std::string, Tensor>{{"w", Tensor::from_values<double>({2}, std::vector<double>{0.25, 4})}}, "map_children");
  named(std::optional<std::string>("present"), "optional_some");
  named(std::optional<std::string>(), "optional_none");
  named(std::vector<Tensor>{Tensor::from_values<std::uint8_t>({2, 2}, std::vector<std::uint8_t>{1, 2, 3, 4}),
                            Tensor::from_values<float>({3}, std::vector<float>{0.5f, 1.5f, 2.5f})}, "tensor_list");
  // The options reach every tensor a composite stores.
  named(std::vector<Tensor>{Tensor::from_values<std::uint8_t>({2, 2}, std::vector<std::uint8_t>{1, 2, 3, 4}),
                            Tensor::from_values<float>({3}, std::vector<float>{0.5f, 1.5f, 2.5f})},
        "tensor_list_zstd", amphora::TensorOptions{amphora::Compression::zstd});
  named(std::array<float, 3>{1.5f, -2.0f, 3.25f}, "fixed_array");
  named(std::vector<std::array<double, 2>>{{0.5, 1.5}, {2.5, 3.5}}, "fixed_rows");
  named(std::pair<std::string, Tensor>{"w", Tensor::from_values<float>({2}, std::vector<float>{0.5f, 1.0f})}, "pair");
  named(std::tuple<std::int32_t, std::optional<std::string>, std::vector<std::string>, double>{
            3, std::nullopt, {"x", "y"}, std::numeric_limits<double>::infinity()},
        "tuple");
  using Variant = std::variant<std::monostate, std::int64_t, std::string, Tensor>;
  named(Variant{std::int64_t{-7}}, "variant_int");
  named(Variant{}, "variant_none");
  named(Variant{Tensor::from_values<std::uint8_t>({2, 2}, std::vector<std::uint8_t>{1, 2, 3, 4})}, "variant_tensor");
  {
    std::vector<Sample> samples(2);
    samples[0].pixels = Tensor::from_values<std::uint8_t>({2, 3}, std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6});
    samples[0].landmarks = {{1.5f, 2.5f}, {3.5f, 4.5f}, {5.5f, 6.5f}};
    samples[0].bbox = {0, 1, 2, 3};
    samples[0].scores = {{"iou", 0.5}, {"conf", 0.25}};
    samples[0].source = {"cam0", 100};
    samples[0].mask = Tensor::from_values<bool>({2}, std::vector<bool>{true, false});
    samples[1].pixels = Tensor::from_values<float>({1}, std::vector<float>{-1.0f});
    samples[1].source = {"", -1};
    named(samples, "nested_records");
  }
  named(std::vector<Experiment>{{"a", std::int64_t{42}}, {"b", std::string("random")}}, "fallback_list");
  named(Model{"tiny", 3, {{"act", "relu"}}, Tensor::from_values<float>({2}, std::vector<float>{0.5f, -0.5f}),
              {"a", "b"}, std::nullopt}, "struct");
  std::vector<Detection> records(2);
  records[0].path = "img/0.jpg";
  records[0].width = 640;
  records[0].boxes = {1, 2, 3, 4};
  records[0].labels = {"cat"};
  records[0].score = 0.75;
  records[0].extra = {{"iscrowd", 0}};
  records[0].main.x = 0.5f;
  records[0].main.y = 1.5f;
  records[0].main.label = "head";
  records[0].regions.resize(2);
  records[0].regions[0].x = 1, records[0].regions[0].y = 2, records[0].regions[0].label = "l";
  records[0].regions[1].x = 3, records[0].regions[1].y = 4, records[0].regions[1].label = "r";
  records[1].path = "img/1.jpg";
  records[1].width = 320;
  named(records, "record_list");
}

}  // namespace kinds

template <>
struct amphora::materializer<Triple> {
  static constexpr std::string_view name = "test.triple";
  static constexpr int version = 1;
  static void save(const Triple& t, ArtifactWriter& out) {
    out.save_child("shared", t.shared);
    out.save_child("own", t.own);
    out.save_child("other", t.other);
  }
  static Triple load(const ArtifactReader& in) {
    return {in.load_child<Tensor>("shared"), in.load_child<Tensor>("own"), in.load_child<Tensor>("other")};
  }
};

int main(int argc, char** argv) {
  try {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "digest" && argc == 6) {
      auto store = open_store(argv[2]);
      auto t = random_floats(std::stoll(argv[4]), std::stoll(argv[5]), std::stoull(argv[3]));
      std::cout << store.save(t).digest.str() << std::endl;
      return 0;
    }
    if (mode == "named" && argc == 7) {
      auto store = open_store(argv[2]);
      auto t = random_floats(std::stoll(argv[5]), std::stoll(argv[6]), std::stoull(argv[4]));
      auto r = store.save(t, {.name = argv[3], .options = amphora::TensorOptions{amphora::Compression::none}});
      std::cout << r.digest.str() << " " << (r.created ? "created" : "existing") << std::endl;
      return 0;
    }
    if (mode == "many" && argc == 6) {
      auto store = open_store(argv[2]);
      int count = std::stoi(argv[4]);
      std::uint64_t seed = std::stoull(argv[5]);
      for (int i = 0; i < count; ++i) {
        auto t = random_floats(8, 8, seed * 100000 + static_cast<std::uint64_t>(i));
        auto r = store.save(t, {.name = argv[3], .options = amphora::TensorOptions{i % 2 ? amphora::Compression::lz4
                                                                        : amphora::Compression::none}});
        std::cout << r.version << " " << r.digest.str() << "\n";
      }
      return 0;
    }
    if (mode == "loop" && argc == 5) {
      auto store = open_store(argv[2]);
      std::int64_t mib = std::stoll(argv[4]);
      auto base = random_floats(mib * 1024, 256, 42);
      std::mt19937_64 rng(std::random_device{}());
      for (std::uint64_t i = 0;; ++i) {
        auto t = amphora::Tensor::zeros(base.dtype(), base.shape());
        std::memcpy(t.mutable_data(), base.data(), base.nbytes());
        t.mutable_values<float>()[rng() % t.num_elements()] = static_cast<float>(i);  // new content each time
        store.save(t, {.name = argv[3], .options = amphora::TensorOptions{i % 2 ? amphora::Compression::lz4 : amphora::Compression::none}});
        std::cout << "saved " << i << std::endl;
      }
    }
    if (mode == "example" && (argc == 3 || argc == 4)) {
      // Two keys holding equal vectors: one child artifact, listed twice.
      std::map<std::string, std::vector<std::vector<float>>> value = {{"a", {{1.5f, 2.5f}}}, {"b", {{1.5f, 2.5f}}}};
      std::cout << open_store(argv[2]).save(value, {.name = argc == 4 ? argv[3] : ""}).digest.str() << std::endl;
      return 0;
    }
    if (mode == "composites" && argc == 6) {
      auto store = open_store(argv[2]);
      int count = std::stoi(argv[4]);
      std::uint64_t seed = std::stoull(argv[5]);
      auto shared = random_floats(16, 16, 1);
      for (int i = 0; i < count; ++i) {
        std::uint64_t s = seed * 100000 + static_cast<std::uint64_t>(i);
        Triple t{shared, random_floats(32, 8, s), random_floats(4, 4, s % 5)};  // `other` repeats across saves
        try {
          auto r = store.save(t, {.name = argv[3]});
          std::cout << r.version << " " << r.digest.str() << "\n";
        } catch (const amphora::IoError& e) {
          if (std::string(e.what()).find("was collected") == std::string::npos) throw;
          std::cout << "collected\n";
        }
      }
      return 0;
    }
    if (mode == "kinds" && argc == 3) {
      auto store = open_store(argv[2]);
      kinds::save_all(store);
      return 0;
    }
    if (mode == "rows" && argc == 7) {
      auto store = amphora::Store::open(argv[2]);
      amphora::write_npy(amphora::load_tensor_rows(store.open_artifact(argv[3]), std::stoll(argv[4]), std::stoll(argv[5])),
                         argv[6]);
      return 0;
    }
    if (mode == "column" && argc == 6) {
      auto store = amphora::Store::open(argv[2]);
      amphora::write_csv(amphora::load_table(store.open_artifact(argv[3]), {.columns = {argv[4]}}), argv[5]);
      return 0;
    }
    if (mode == "record" && argc == 5) {
      auto store = amphora::Store::open(argv[2]);
      const std::size_t i = std::stoull(argv[4]);
      std::cout << amphora::load_records(store.open_artifact(argv[3]), {.rows = {{i, i + 1}}}).record_json(0) << std::endl;
      return 0;
    }
    std::cerr << "usage: amphora_test_writer digest|named|many|loop|example|composites|kinds|rows|column|record ...\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "amphora_test_writer: " << e.what() << "\n";
    return 1;
  }
}
