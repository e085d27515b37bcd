// A plugin, as README's plugin section shows it: a struct declared by its
// fields, a file format for it, one registration function and the entry
// point. Built with amphora_add_plugin (examples/CMakeLists.txt in the tree,
// examples/installed/CMakeLists.txt against an installed package).

#include <amphora/describe.hpp>
#include <amphora/plugin.hpp>

#include <fstream>

namespace shapes {
struct Circle {
  double x = 0, y = 0, r = 0;
};
AMPHORA_MATERIALIZE(Circle, "shapes.circle", 1, x, y, r)
}  // namespace shapes

namespace {

// "x y r" on one line; a negative radius is refused.
shapes::Circle read_circle(const std::filesystem::path& file) {
  std::ifstream in(file);
  shapes::Circle c;
  if (!(in >> c.x >> c.y >> c.r) || c.r < 0) throw amphora::InvalidArgument(file.string() + " is not 'x y r' with r >= 0");
  return c;
}

void write_circle(const shapes::Circle& c, const std::filesystem::path& file) {
  std::ofstream out(file);
  out << c.x << ' ' << c.y << ' ' << c.r << '\n';
  if (!out.flush()) throw amphora::IoError("cannot write " + file.string());
}

void add_shapes(amphora::PluginRegistrar& r) {
  r.add<shapes::Circle>();
  r.add_file_format<shapes::Circle>(".circle", "a circle as 'x y r'", read_circle, write_circle);
}

}  // namespace

AMPHORA_PLUGIN("shapes", "1.0.0", add_shapes)
