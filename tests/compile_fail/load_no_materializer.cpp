// EXPECT: amphora: no materializer for this type
// store.load of a type nothing teaches Amphora.
#include <amphora/amphora.hpp>

struct Unknown {
  int x = 0;
};

int main() {
  auto store = amphora::Store::open("store");
  (void)store.load<Unknown>("name");
}
