// A well-formed plugin for the loader's tests: a declared struct with a text
// file format, and a materializer that refuses to load what it saved.

#include <amphora/describe.hpp>
#include <amphora/plugin.hpp>

#include <fstream>
#include <sstream>

namespace test_plugin {

struct Point {
  double x = 0, y = 0;
  std::string label;
};
AMPHORA_MATERIALIZE(Point, "test.point", 1, x, y, label)

struct Fragile {
  int code = 0;
};

}  // namespace test_plugin

template <>
struct amphora::materializer<test_plugin::Fragile> {
  static constexpr std::string_view name = "test.fragile";
  static constexpr int version = 1;
  static void save(const test_plugin::Fragile& f, ArtifactWriter& out) { out.meta()["code"] = f.code; }
  static test_plugin::Fragile load(const ArtifactReader& in) {
    throw CorruptData(in.label() + ": test.fragile refuses to load (code " + std::to_string(in.meta<int>("code")) + ")");
  }
};

namespace {

// "x y label" on one line.
test_plugin::Point read_point(const std::filesystem::path& file) {
  std::ifstream in(file);
  test_plugin::Point p;
  if (!(in >> p.x >> p.y >> p.label)) throw amphora::InvalidArgument(file.string() + " is not 'x y label'");
  return p;
}

void write_point(const test_plugin::Point& p, const std::filesystem::path& file) {
  std::ofstream out(file);
  out << p.x << ' ' << p.y << ' ' << p.label << '\n';
}

// A number; a negative one is a value of another kind, refused as such.
test_plugin::Fragile read_fragile(const std::filesystem::path& file) {
  std::ifstream in(file);
  test_plugin::Fragile f;
  in >> f.code;
  if (f.code < 0) throw amphora::TypeMismatch(file.string() + " holds " + std::to_string(f.code) + ", not a code");
  return f;
}

void add_points(amphora::PluginRegistrar& r) {
  r.add<test_plugin::Point>();
  r.add_file_format<test_plugin::Point>(".point", "a point as 'x y label'", read_point, write_point);
  r.add<test_plugin::Fragile>();
  r.add_file_format<test_plugin::Fragile>(".fragile", "a code", read_fragile,
                                          [](const test_plugin::Fragile&, const std::filesystem::path&) {});
}

}  // namespace

AMPHORA_PLUGIN("test.points", "1.2.0", add_points)
