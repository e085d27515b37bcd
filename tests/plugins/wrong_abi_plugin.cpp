// A plugin built, as it claims, for another Amphora: its registration must
// never run.
#include <amphora/plugin.hpp>

#include <cstdlib>

namespace {
void never_called(amphora::PluginRegistrar&) { std::abort(); }
}  // namespace

extern "C" __attribute__((visibility("default"))) const amphora::PluginEntry* amphora_plugin_entry() {
  static const amphora::PluginEntry entry{"amphora 0.0 boundary 0 libstdc++ 1 cxx11-abi 0", 0, "test.wrong_abi", "1",
                                          never_called};
  return &entry;
}
