// A program that knows no shapes, loading a plugin by path and using what
// it registers through the registry: import a file by its extension, read
// the value's fields, verify it with the plugin's checks.
//   amphora_plugin_host PLUGIN.so STORE_DIR FILE.circle

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: amphora_plugin_host PLUGIN.so STORE_DIR FILE.circle\n";
    return 2;
  }
  try {
    auto registry = amphora::Registry::with_defaults();
    const amphora::PluginInfo plugin = registry->load_plugin(argv[1]);
    std::cout << "loaded plugin " << plugin.name << " " << plugin.version << " from " << plugin.path.string() << ":";
    for (const auto& name : plugin.materializers) std::cout << " " << name;
    std::cout << "\n";

    auto store = amphora::Store::open(argv[2], {.create = true, .registry = registry});
    const auto saved = store.import_file(argv[3], {.name = "circle"});
    const auto artifact = store.open_artifact(saved.digest);
    const auto entry = registry->find(artifact.manifest().materializer);
    // The value itself, type-erased: only the plugin knows its C++ type.
    const std::shared_ptr<void> value = store.load_erased(saved.digest, "shapes.circle");
    const auto report = store.verify("circle");
    std::cout << "imported circle@" << saved.version << " as " << entry->name << " ("
              << amphora::type_display_name(entry->type) << "), fields " << artifact.meta().value("fields", nlohmann::json()).dump()
              << ", loaded " << (value ? "yes" : "no") << ", verify " << (report.ok() ? "ok" : "FAILED") << "\n";
    return value && report.ok() ? 0 : 1;
  } catch (const amphora::Error& e) {
    std::cerr << "amphora_plugin_host: " << e.what() << "\n";
    return 1;
  }
}
