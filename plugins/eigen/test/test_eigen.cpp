// The Eigen plugin: Eigen's matrices round-trip bit for bit, whatever their
// storage order, sizes or element type; a fixed-size type refuses a shape it
// cannot hold; numpy reads the stored file as the same matrix; the command
// line with the plugin verifies and exports them, and without it refuses to
// load them by name; the Python reader loads them with a registered reader.

#define CATCH_CONFIG_MAIN
#include <amphora/amphora.hpp>
#include <amphora/plugin.hpp>
#include <amphora/tensor.hpp>
#include <amphora_eigen/eigen.hpp>
#include <catch2/catch.hpp>

#include "plugin_test.hpp"

#include <cstring>
#include <fstream>
#include <limits>

namespace fs = std::filesystem;
using plugin_test::kPlugin;
using plugin_test::run_cli;
using plugin_test::Scratch;

namespace {

// Every bit pattern of the value's bytes, compared as bytes: NaNs too.
template <class M>
bool same_bits(const M& a, const M& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(typename M::Scalar)) == 0;
}

Eigen::MatrixXd sample() {
  Eigen::MatrixXd m(3, 4);
  m << 1, 2, 3, 4,  //
      5, 6, 7, 8,   //
      -0.0, 1e-300, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN();
  return m;
}

}  // namespace

TEST_CASE("Eigen matrices and vectors round-trip bit for bit") {
  Scratch dir;
  auto store = amphora::Store::open(dir.path / "store", {.create = true});

  const Eigen::MatrixXd m = sample();
  CHECK(same_bits(store.load<Eigen::MatrixXd>(store.save(m).digest), m));
  const Eigen::MatrixXf f = Eigen::MatrixXf::Random(17, 5);
  CHECK(same_bits(store.load<Eigen::MatrixXf>(store.save(f).digest), f));
  const Eigen::MatrixXi i = Eigen::MatrixXi::Random(2, 9);
  CHECK(same_bits(store.load<Eigen::MatrixXi>(store.save(i).digest), i));
  const Eigen::VectorXd v = Eigen::VectorXd::LinSpaced(11, -1, 1);
  CHECK(same_bits(store.load<Eigen::VectorXd>(store.save(v).digest), v));
  const Eigen::Matrix4f fixed = Eigen::Matrix4f::Identity() * 3;
  CHECK(same_bits(store.load<Eigen::Matrix4f>(store.save(fixed).digest), fixed));
  using MatrixXl = Eigen::Matrix<std::int64_t, Eigen::Dynamic, Eigen::Dynamic>;
  const MatrixXl wide =
      Eigen::Matrix<std::int64_t, 2, 2>{{std::numeric_limits<std::int64_t>::min(), 0}, {1, std::numeric_limits<std::int64_t>::max()}};
  CHECK(same_bits(store.load<MatrixXl>(store.save(wide).digest), wide));
  const Eigen::MatrixXd empty(0, 3);
  const auto empty_back = store.load<Eigen::MatrixXd>(store.save(empty).digest);
  CHECK(empty_back.rows() == 0);
  CHECK(empty_back.cols() == 3);

  // Storage order is memory layout, not value: one artifact for both.
  const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row_major = m;
  CHECK(store.save(row_major).digest == store.save(m).digest);
  CHECK(same_bits(store.load<Eigen::MatrixXd>(store.save(row_major).digest), m));
  // A fixed-size type loads a dynamic one's artifact of its shape.
  const Eigen::MatrixXd three_by_four = m;
  CHECK(same_bits(Eigen::MatrixXd(store.load<Eigen::Matrix<double, 3, 4>>(store.save(three_by_four).digest)), m));
}

TEST_CASE("A type that cannot hold what is stored refuses it by name and shape") {
  Scratch dir;
  auto store = amphora::Store::open(dir.path / "store", {.create = true});
  const auto m = store.save(sample()).digest;
  CHECK_THROWS_AS(store.load<Eigen::Matrix4d>(m), amphora::TypeMismatch);
  CHECK_THROWS_WITH(store.load<Eigen::Matrix4d>(m), Catch::Contains("holds a 3x4 eigen.matrix_f64"));
  CHECK_THROWS_WITH(store.load<Eigen::MatrixXf>(m), Catch::Contains("'eigen.matrix_f64'"));
  CHECK_THROWS_WITH(store.load<Eigen::VectorXd>(m), Catch::Contains("'eigen.matrix_f64'"));
  CHECK_THROWS_AS(store.load<amphora::Tensor>(m), amphora::TypeMismatch);
  const auto bounded = store.load<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, 0, 4, 4>>(m);
  CHECK(bounded.rows() == 3);
  CHECK_THROWS_AS((store.load<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, 0, 2, 4>>(m)), amphora::TypeMismatch);
}

TEST_CASE("With the plugin the command line verifies and exports matrices numpy reads; without it they are refused by name") {
  Scratch dir;
  const fs::path store_dir = dir.path / "store";
  auto store = amphora::Store::open(store_dir, {.create = true});
  const auto saved = store.save(sample(), {.name = "m"});
  store.save(Eigen::VectorXf::LinSpaced(5, 0, 1).eval(), {.name = "v"});

  auto registry = amphora::Registry::with_defaults();
  const auto info = registry->load_plugin(kPlugin);
  CHECK(info.name == "amphora.eigen");
  CHECK(info.materializers.size() == 8);
  auto with_plugin = amphora::Store::open(store_dir, {.registry = registry});
  const auto erased = with_plugin.load_erased("m", "eigen.matrix_f64");
  CHECK(same_bits(*std::static_pointer_cast<Eigen::MatrixXd>(erased), sample()));

  const std::string with = "--plugin '" + kPlugin + "' ";
  const auto shown = run_cli(store_dir, with + "show m --json");
  REQUIRE(shown.status == 0);
  const auto json = nlohmann::json::parse(shown.output);
  CHECK(json["registered"] == true);
  CHECK(json["meta"] == nlohmann::json({{"cols", 4}, {"rows", 3}}));
  const auto listed = run_cli(store_dir, with + "plugins");
  CHECK(listed.output.find("eigen.matrix_f64") != std::string::npos);
  CHECK(listed.output.find("Eigen::Matrix<double, -1, -1") != std::string::npos);
  CHECK(run_cli(store_dir, with + "verify").status == 0);
  const auto exported = run_cli(store_dir, with + "export m '" + (dir.path / "out").string() + "'");
  CHECK(exported.status == 0);

  // numpy opens the stored file, and the Python reader loads the artifact
  // through a reader registered for the plugin's names.
  const std::string python =
      "import sys, math; sys.path.insert(0, '" AMPHORA_PYTHON_DIR "'); import amphora_reader as r, numpy as np\n"
      "a = np.load(sys.argv[1])\n"
      "assert a.shape == (3, 4) and a.dtype == np.float64, (a.shape, a.dtype)\n"
      "assert a[1].tolist() == [5, 6, 7, 8] and a[0, 3] == 4, a\n"
      "assert math.isnan(a[2, 3]) and math.copysign(1, a[2, 0]) < 0\n"
      "for name in ('eigen.matrix_f64', 'eigen.vector_f32'):\n"
      "    r.register_reader(name, lambda art, _: art.array('matrix.npy'))\n"
      "assert np.array_equal(r.load(sys.argv[2], 'm'), a, equal_nan=True)\n"
      "assert r.load(sys.argv[2], 'v').tolist() == [0, 0.25, 0.5, 0.75, 1]\n";
  const auto read_back = plugin_test::run_python(
      dir.path, python, "'" + (dir.path / "out" / "matrix.npy").string() + "' '" + store_dir.string() + "'");
  CHECK(read_back.output == "");
  CHECK(read_back.status == 0);

  // A file that disagrees with the meta: found by the plugin's check.
  auto manifest = nlohmann::json::parse(std::ifstream(plugin_test::object_dir(store_dir, saved.digest) / "manifest.json"));
  manifest["meta"]["rows"] = 4;
  const amphora::Digest lie = amphora::json_digest(manifest);
  fs::create_directories(plugin_test::object_dir(store_dir, lie));
  std::ofstream(plugin_test::object_dir(store_dir, lie) / "manifest.json", std::ios::binary) << amphora::canonical_json(manifest);
  fs::copy_file(plugin_test::object_dir(store_dir, saved.digest) / "matrix.npy",
                plugin_test::object_dir(store_dir, lie) / "matrix.npy");
  const auto checked = run_cli(store_dir, with + "verify " + lie.str());
  CHECK(checked.status == 4);
  CHECK(checked.output.find("does not hold the 4x4 values its meta says") != std::string::npos);

  const auto bare = run_cli(store_dir, "show m");
  CHECK(bare.status == 0);
  CHECK(bare.output.find("eigen.matrix_f64 (format 1)  [not registered") != std::string::npos);
  CHECK_THROWS_WITH(amphora::Store::open(store_dir).load_erased("m"), Catch::Contains("materializer 'eigen.matrix_f64'"));
}
