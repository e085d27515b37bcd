// EXPECT: no materializer for this type.*<amphora/everyday.hpp> for numbers, strings, JSON, standard containers
// A standard container saved without the header that teaches it.
#include <amphora/amphora.hpp>

#include <vector>

int main() {
  auto store = amphora::Store::open("store", {.create = true});
  store.save(std::vector<float>{1, 2, 3});
}
