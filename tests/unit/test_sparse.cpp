// Sparse matrices: validating factories, round trips through the store and
// through .npz, and damaged payloads reported by name.

#include "support.hpp"

#include <amphora/sparse.hpp>
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <zip.h>

#include <functional>
#include <set>

using namespace amphora;

namespace {

template <class I>
Tensor ints(std::vector<I> v) {
  return Tensor::from_values<I>({static_cast<std::int64_t>(v.size())}, v);
}

Tensor index_tensor(DType index, std::vector<std::int64_t> v) {
  if (index == DType::int64) return ints<std::int64_t>(std::move(v));
  return ints<std::int32_t>(std::vector<std::int32_t>(v.begin(), v.end()));
}

// A rows x cols matrix with about one entry in `every` cells, including a row
// (or column) without entries, in `format`.
SparseMatrix make_matrix(SparseFormat format, DType dtype, DType index, std::int64_t rows, std::int64_t cols,
                         std::uint64_t seed, int every = 3) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> major_ptr{0}, minor, row, col;
  const bool by_col = format == SparseFormat::csc;
  const std::int64_t majors = by_col ? cols : rows, minors = by_col ? rows : cols;
  for (std::int64_t m = 0; m < majors; ++m) {
    for (std::int64_t k = 0; k < minors; ++k)
      if (m != 1 && rng() % static_cast<unsigned>(every) == 0) {
        minor.push_back(k);
        row.push_back(by_col ? k : m);
        col.push_back(by_col ? m : k);
      }
    major_ptr.push_back(static_cast<std::int64_t>(minor.size()));
  }
  Tensor data = test::random_tensor(dtype, {static_cast<std::int64_t>(minor.size())}, seed + 1);
  switch (format) {
    case SparseFormat::csr:
      return SparseMatrix::csr(rows, cols, data, index_tensor(index, minor), index_tensor(index, major_ptr));
    case SparseFormat::csc:
      return SparseMatrix::csc(rows, cols, data, index_tensor(index, minor), index_tensor(index, major_ptr));
    case SparseFormat::coo:
      return SparseMatrix::coo(rows, cols, data, index_tensor(index, row), index_tensor(index, col));
  }
  throw std::logic_error("format");
}

std::string invalid(const std::function<SparseMatrix()>& make) {
  try {
    make();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  FAIL("no InvalidArgument");
  return {};
}

// Overwrites the data bytes at the end of a stored array file (load does not
// re-hash, so the damage reaches the structural checks).
template <class I>
void overwrite_tail(const test::fs::path& file, const std::vector<I>& values) {
  test::fs::permissions(file.parent_path(), test::fs::perms::owner_all, test::fs::perm_options::add);
  test::fs::permissions(file, test::fs::perms::owner_write, test::fs::perm_options::add);
  const auto size = test::fs::file_size(file);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(size - values.size() * sizeof(I)));
  f.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(I)));
}

}  // namespace

TEST_CASE("Sparse matrices round-trip bit for bit in every format, dtype and index width", "[sparse]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  std::uint64_t seed = 1;
  for (auto format : {SparseFormat::csr, SparseFormat::csc, SparseFormat::coo})
    for (auto index : {DType::int32, DType::int64})
      for (auto dtype : {DType::float64, DType::float32, DType::int8, DType::uint64, DType::bool_, DType::complex128,
                         DType::float16, DType::bfloat16}) {
        CAPTURE(to_string(format), dtype_name(index), dtype_name(dtype));
        SparseMatrix m = make_matrix(format, dtype, index, 37, 23, ++seed);
        REQUIRE(m.nnz() > 0);
        auto saved = store.save(m);
        for (bool eager : {false, true}) {
          SparseMatrix back = store.load<SparseMatrix>(saved.digest, {.eager = eager});
          CHECK(back.bit_equal(m));
          CHECK(back.format() == format);
          CHECK(back.dtype() == dtype);
          CHECK(back.index_dtype() == index);
        }
        auto in = store.open_artifact(saved.digest);
        CHECK(in.meta<std::string>("format") == to_string(format));
        CHECK(in.meta<std::int64_t>("nnz") == m.nnz());
        CHECK(in.meta<std::vector<std::int64_t>>("shape") == std::vector<std::int64_t>{37, 23});
        CHECK(in.meta<std::string>("dtype") == dtype_name(dtype));
      }
}

TEST_CASE("Sparse payloads are the arrays of scipy.sparse.save_npz under its names", "[sparse]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto csr = store.save(make_matrix(SparseFormat::csr, DType::float64, DType::int32, 5, 4, 7));
  std::set<std::string> files;
  for (const auto& f : store.open_artifact(csr.digest).manifest().files) files.insert(f.path);
  CHECK(files == std::set<std::string>{"data.npy", "format.npy", "indices.npy", "indptr.npy", "shape.npy"});
  const auto format = test::read_text(test::object_dir(dir / "store", csr.digest) / "format.npy");
  CHECK(format.substr(format.size() - 4) == "\n" + std::string("csr"));
  CHECK(format.find("'descr': '|S3'") != std::string::npos);
  CHECK(format.find("'shape': ()") != std::string::npos);

  auto coo = store.save(make_matrix(SparseFormat::coo, DType::float32, DType::int64, 5, 4, 8));
  files.clear();
  for (const auto& f : store.open_artifact(coo.digest).manifest().files) files.insert(f.path);
  CHECK(files == std::set<std::string>{"col.npy", "data.npy", "format.npy", "row.npy", "shape.npy"});
}

TEST_CASE("Matrices without entries round-trip", "[sparse]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  for (auto format : {SparseFormat::csr, SparseFormat::csc, SparseFormat::coo})
    for (auto shape : {std::array<std::int64_t, 2>{0, 0}, {3, 0}, {0, 5}, {4, 6}}) {
      CAPTURE(to_string(format), shape[0], shape[1]);
      SparseMatrix m = make_matrix(format, DType::float64, DType::int64, shape[0], shape[1], 3, 1 << 30);
      REQUIRE(m.nnz() == 0);
      auto back = store.load<SparseMatrix>(store.save(m).digest);
      CHECK(back.bit_equal(m));
      CHECK(back.shape() == shape);
      auto in = store.open_artifact(store.save(m).digest);
      CHECK(in.meta<double>("density") == 0.0);
      CHECK(in.meta<nlohmann::json>("stats").is_null());
    }
  CHECK(SparseMatrix().bit_equal(store.load<SparseMatrix>(store.save(SparseMatrix()).digest)));
}

TEST_CASE("Sparse factories name what makes the arrays no matrix", "[sparse][bad-input]") {
  Tensor data3 = ints<double>({1, 2, 3});
  auto i32 = [](std::vector<std::int64_t> v) { return index_tensor(DType::int32, std::move(v)); };
  CHECK_THAT(invalid([&] { return SparseMatrix::csr(2, 3, data3, i32({0, 1, 2}), i32({0, 2, 1})); }),
             Catch::Contains("indptr[2] = 1 is less than indptr[1] = 2"));
  CHECK_THAT(invalid([&] { return SparseMatrix::csr(2, 3, data3, i32({0, 1, 2}), i32({1, 2, 3})); }),
             Catch::Contains("indptr[0] = 1, not 0"));
  CHECK_THAT(invalid([&] { return SparseMatrix::csr(2, 3, data3, i32({0, 1, 2}), i32({0, 1, 2})); }),
             Catch::Contains("indptr ends at 2, but there are 3 stored entries"));
  CHECK_THAT(invalid([&] { return SparseMatrix::csr(2, 3, data3, i32({0, 3, 2}), i32({0, 1, 3})); }),
             Catch::Contains("indices[1] = 3 is outside the 3 columns"));
  CHECK_THAT(invalid([&] { return SparseMatrix::csc(2, 3, data3, i32({0, -1, 1}), i32({0, 1, 2, 3})); }),
             Catch::Contains("indices[1] = -1 is outside the 2 rows"));
  CHECK_THAT(invalid([&] { return SparseMatrix::csr(2, 3, data3, i32({0, 1}), i32({0, 1, 3})); }),
             Catch::Contains("'indices' holds 2 entries, 'data' 3"));
  CHECK_THAT(invalid([&] { return SparseMatrix::csr(3, 3, data3, i32({0, 1, 2}), i32({0, 1, 3})); }),
             Catch::Contains("'indptr' holds 3 entries, not 4 (rows + 1)"));
  CHECK_THAT(invalid([&] { return SparseMatrix::coo(2, 3, data3, i32({0, 1, 2}), i32({0, 1, 2})); }),
             Catch::Contains("row[2] = 2 is outside the 2 rows"));
  CHECK_THAT(invalid([&] { return SparseMatrix::coo(2, 3, data3, i32({0, 1, 1}), i32({0, 1, 5})); }),
             Catch::Contains("col[2] = 5 is outside the 3 columns"));
  CHECK_THAT(invalid([&] { return SparseMatrix::coo(2, 3, data3, i32({0, 1, 1}), i32({0, 1})); }),
             Catch::Contains("'col' holds 2 entries, not 3 (as many as 'data')"));
  CHECK_THAT(invalid([&] {
               return SparseMatrix::csr(2, 3, data3, i32({0, 1, 2}), index_tensor(DType::int64, {0, 1, 3}));
             }),
             Catch::Contains("'indptr' holds int64 but 'indices' holds int32"));
  CHECK_THAT(invalid([&] { return SparseMatrix::csr(2, 3, data3, ints<float>({0, 1, 2}), i32({0, 1, 3})); }),
             Catch::Contains("'indices' holds float32; index arrays hold int32 or int64"));
  CHECK_THAT(invalid([&] {
               return SparseMatrix::csr(2, 3, Tensor::zeros(DType::float64, {3, 1}), i32({0, 1, 2}), i32({0, 1, 3}));
             }),
             Catch::Contains("'data' has 2 dimensions, not 1"));
  CHECK_THAT(invalid([&] { return SparseMatrix::coo(-1, 3, data3, i32({0, 1, 1}), i32({0, 1, 2})); }),
             Catch::Contains("the shape (-1, 3) is negative"));
  CHECK_THAT(invalid([&] {
               return SparseMatrix::coo(std::int64_t{1} << 31, 3, data3, i32({0, 1, 1}), i32({0, 1, 2}));
             }),
             Catch::Contains("does not fit int32 indices"));
  CHECK_THROWS_WITH(SparseMatrix().row(), Catch::Contains("a csr matrix has no 'row' array"));
  CHECK_THROWS_AS(parse_sparse_format("bsr"), InvalidArgument);
}

TEST_CASE("A damaged sparse payload is reported by artifact and problem", "[sparse][bad-input]") {
  test::TempDir dir;
  Store store = test::make_store(dir / "store");
  auto fresh = [&](SparseFormat format, DType index) {
    // A distinct matrix each time, so no two cases share (and damage) one artifact.
    static std::uint64_t seed = 100;
    auto saved = store.save(make_matrix(format, DType::float64, index, 6, 5, ++seed));
    return std::pair{saved.digest, test::object_dir(dir / "store", saved.digest)};
  };
  auto corrupt = [&](const Digest& digest, const std::string& text) {
    auto label = store.open_artifact(digest).label();
    CHECK_THROWS_AS(store.load<SparseMatrix>(digest), CorruptData);
    CHECK_THROWS_WITH(store.load<SparseMatrix>(digest), Catch::Contains(text) && Catch::Contains(label));
    CHECK_FALSE(store.verify(digest.str()).ok());
  };
  {
    auto [digest, obj] = fresh(SparseFormat::csr, DType::int64);
    const SparseMatrix m = store.load<SparseMatrix>(digest);
    auto indptr = m.indptr().values<std::int64_t>();
    std::vector<std::int64_t> bad(indptr.begin(), indptr.end());
    std::swap(bad[2], bad[4]);
    overwrite_tail(obj / "indptr.npy", bad);
    corrupt(digest, "is less than");
  }
  {
    auto [digest, obj] = fresh(SparseFormat::csr, DType::int32);
    const auto nnz = store.load<SparseMatrix>(digest).nnz();
    overwrite_tail(obj / "indices.npy", std::vector<std::int32_t>(static_cast<std::size_t>(nnz), 99));
    corrupt(digest, "indices[0] = 99 is outside the 5 columns");
  }
  {
    auto [digest, obj] = fresh(SparseFormat::coo, DType::int64);
    overwrite_tail(obj / "row.npy", std::vector<std::int64_t>{-7});
    corrupt(digest, "= -7 is outside the 6 rows");
  }
  {
    auto [digest, obj] = fresh(SparseFormat::csc, DType::int64);
    overwrite_tail(obj / "shape.npy", std::vector<std::int64_t>{6, 50});
    corrupt(digest, "'shape.npy' disagrees with the metadata's shape [6, 5]");
  }
  {
    auto [digest, obj] = fresh(SparseFormat::csc, DType::int32);
    overwrite_tail(obj / "format.npy", std::vector<char>{'c', 's', 'r'});
    corrupt(digest, "'format.npy' does not hold the format 'csc'");
  }
  {
    auto [digest, obj] = fresh(SparseFormat::csr, DType::int32);
    test::fs::permissions(obj, test::fs::perms::owner_all, test::fs::perm_options::add);
    test::fs::remove(obj / "indptr.npy");
    CHECK_THROWS_WITH(store.load<SparseMatrix>(digest), Catch::Contains("indptr.npy"));
  }
}

TEST_CASE(".npz files round-trip and damaged archives are refused", "[sparse][npz][bad-input]") {
  test::TempDir dir;
  for (auto format : {SparseFormat::csr, SparseFormat::csc, SparseFormat::coo})
    for (auto index : {DType::int32, DType::int64}) {
      CAPTURE(to_string(format), dtype_name(index));
      SparseMatrix m = make_matrix(format, DType::complex64, index, 40, 30, 11);
      const auto file = dir / ("m-" + std::string(to_string(format)) + std::string(dtype_name(index)) + ".npz");
      write_npz(m, file);
      CHECK(read_npz(file).bit_equal(m));
      const std::string archive = test::read_text(file);
      CHECK(read_npz(std::as_bytes(std::span<const char>(archive)), "in memory").bit_equal(m));
    }
  const auto good = dir / "good.npz";
  write_npz(make_matrix(SparseFormat::csr, DType::float64, DType::int32, 300, 200, 5), good);
  const std::string bytes = test::read_text(good);

  SECTION("truncated") {
    for (std::size_t keep : {bytes.size() - 1, bytes.size() / 2, std::size_t{30}, std::size_t{0}}) {
      CAPTURE(keep);
      test::write_text(dir / "cut.npz", bytes.substr(0, keep));
      CHECK_THROWS_AS(read_npz(dir / "cut.npz"), CorruptData);
      CHECK_THROWS_WITH(read_npz(dir / "cut.npz"), Catch::Contains("cut.npz"));
    }
  }
  SECTION("a flipped bit inside a member fails its CRC") {
    test::write_text(dir / "flip.npz", bytes);
    test::flip_byte(dir / "flip.npz", bytes.size() / 3);
    CHECK_THROWS_AS(read_npz(dir / "flip.npz"), CorruptData);
  }
  SECTION("not a zip, missing, or not a sparse matrix") {
    test::write_text(dir / "text.npz", "hello");
    CHECK_THROWS_WITH(read_npz(std::as_bytes(std::span<const char>("hello", 5)), "bytes"),
                      Catch::StartsWith("bytes is not a readable .npz"));
    CHECK_THROWS_WITH(read_npz(dir / "text.npz"), Catch::Contains("is not a readable .npz"));
    CHECK_THROWS_AS(read_npz(dir / "absent.npz"), NotFound);
    CHECK_THROWS_AS(read_npz(dir.path()), InvalidArgument);
    REQUIRE(::mkfifo((dir / "fifo.npz").c_str(), 0600) == 0);
    CHECK_THROWS_WITH(read_npz(dir / "fifo.npz"), Catch::Contains("not a regular file"));  // refused, not waited on
    int code = 0;
    zip_t* z = zip_open((dir / "plain.npz").c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
    REQUIRE(z);
    static const char hello[] = "hello";
    zip_file_add(z, "x.npy", zip_source_buffer(z, hello, 5, 0), 0);
    REQUIRE(zip_close(z) == 0);
    CHECK_THROWS_WITH(read_npz(dir / "plain.npz"), Catch::Contains("it has no 'format.npy' member"));
  }
  SECTION("bfloat16 has no NumPy dtype") {
    CHECK_THROWS_AS(write_npz(make_matrix(SparseFormat::coo, DType::bfloat16, DType::int32, 3, 3, 1), dir / "b.npz"),
                    Unsupported);
    CHECK_FALSE(test::fs::exists(dir / "b.npz"));
  }
}
