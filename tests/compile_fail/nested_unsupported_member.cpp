// EXPECT: AMPHORA_MATERIALIZE\(Rig, \.\.\.\): member 'sensors' has a type Amphora cannot store
// A type with no materializer deep inside standard containers: still named
// at the declaration, before any error from the record-list columns.
#include <amphora/amphora.hpp>
#include <amphora/describe.hpp>

#include <array>
#include <string>
#include <vector>

struct Sensor {
  int width = 0;
};

struct Rig {
  std::string name;
  std::vector<std::array<Sensor, 2>> sensors;
};
AMPHORA_MATERIALIZE(Rig, "shop.rig", 1, name, sensors)

int main() {
  auto store = amphora::Store::open("store", {.create = true});
  store.save(std::vector<Rig>{});
}
