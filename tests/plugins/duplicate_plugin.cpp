// A plugin whose second materializer takes a name already registered (the
// built-in tensor's): neither of its materializers may be registered.
#include <amphora/describe.hpp>
#include <amphora/plugin.hpp>

namespace test_duplicate {
struct Fresh {
  int n = 0;
};
AMPHORA_MATERIALIZE(Fresh, "test.fresh", 1, n)
struct Impostor {
  int n = 0;
};
AMPHORA_MATERIALIZE(Impostor, "amphora.tensor", 1, n)
}  // namespace test_duplicate

namespace {
void add_both(amphora::PluginRegistrar& r) {
  r.add<test_duplicate::Fresh>();
  r.add<test_duplicate::Impostor>();
}
}  // namespace

AMPHORA_PLUGIN("test.duplicate", "0.1", add_both)
