// EXPECT: AMPHORA_MATERIALIZE\(geo::Point, \.\.\.\) must stand in the namespace that declares geo::Point
// The declaration outside the struct's namespace, where lookup cannot find it.
#include <amphora/describe.hpp>

namespace geo {
struct Point {
  double x = 0, y = 0;
};
}  // namespace geo

AMPHORA_MATERIALIZE(geo::Point, "geo.point", 1, x, y)

int main() {}
