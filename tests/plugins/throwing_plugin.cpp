// A plugin whose registration fails halfway: what it added first must not
// stay registered.
#include <amphora/describe.hpp>
#include <amphora/plugin.hpp>

#include <stdexcept>

namespace test_throwing {
struct Half {
  int n = 0;
};
AMPHORA_MATERIALIZE(Half, "test.half_registered", 1, n)
}  // namespace test_throwing

namespace {
void add_then_throw(amphora::PluginRegistrar& r) {
  r.add<test_throwing::Half>();
  throw std::runtime_error("deliberate failure after one materializer");
}
}  // namespace

AMPHORA_PLUGIN("test.throwing", "0.1", add_then_throw)
