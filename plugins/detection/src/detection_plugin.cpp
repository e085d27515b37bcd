// The detection plugin: teaches any program loading it detection::Dataset,
// so that `amphora show`, `verify` (the materializer's own checks) and
// `export` handle it without being built against its header.

#include <amphora/plugin.hpp>
#include <amphora_detection/detection.hpp>

namespace {

void add_detection(amphora::PluginRegistrar& registrar) { registrar.add<detection::Dataset>(); }

}  // namespace

AMPHORA_PLUGIN("amphora.detection", "1.0.0", add_detection)
