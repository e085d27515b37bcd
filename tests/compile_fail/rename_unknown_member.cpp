// EXPECT: AMPHORA_RENAMED\(Model, \.\.\.\): each new name must be a member declared with AMPHORA_MATERIALIZE
// A rename whose new name is no declared member (a typo).
#include <amphora/describe.hpp>

#include <string>

struct Model {
  std::string name;
  double learning_rate = 0;
};
AMPHORA_MATERIALIZE(Model, "shop.model", 2, name, learning_rate)
AMPHORA_RENAMED(Model, "lr", "learnig_rate")

int main() {}
