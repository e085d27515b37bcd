// EXPECT: AMPHORA_MATERIALIZE\(Camera, \.\.\.\): member 'sensor' has a type Amphora cannot store
// A member of a type with no materializer: named at the declaration, first.
#include <amphora/amphora.hpp>
#include <amphora/describe.hpp>

#include <string>

struct Sensor {
  int width = 0;
};

struct Camera {
  std::string model;
  Sensor sensor;
};
AMPHORA_MATERIALIZE(Camera, "shop.camera", 1, model, sensor)

int main() {
  auto store = amphora::Store::open("store", {.create = true});
  store.save(Camera{});
}
