// Registry::load_plugin: open a plugin library, check that it was built for
// this Amphora, let it register into a scratch registry, then add all of it
// or nothing.

#include <amphora/plugin.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <system_error>

namespace amphora {

PluginRegistrar::PluginRegistrar(Registry& staging, std::string origin)
    : staging_(staging), origin_(std::move(origin)) {}

void PluginRegistrar::add_entry(MaterializerEntry entry) {
  entry.origin = origin_;
  staging_.add_entry(std::move(entry));
}

void PluginRegistrar::add_format(FileFormat format) {
  format.origin = origin_;
  staging_.add_format(std::move(format));
}

namespace {

namespace fs = std::filesystem;

// A string the plugin points to, read no further than `limit` bytes: a
// damaged or foreign entry must not send the loader off reading memory.
std::string bounded(const char* text, std::size_t limit) {
  if (!text) return {};
  return std::string(text, ::strnlen(text, limit));
}

}  // namespace

PluginInfo Registry::load_plugin(const fs::path& library) {
  std::error_code ec;
  const fs::path path = fs::canonical(library, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) throw NotFound("plugin " + library.string() + " does not exist");
    throw InvalidArgument("plugin " + library.string() + ": " + ec.message());
  }
  if (!fs::is_regular_file(path, ec)) throw InvalidArgument("plugin " + path.string() + " is not a regular file");
  const std::string where = "plugin " + path.string();

  std::lock_guard one_at_a_time(plugins_mutex_);
  for (const auto& loaded : plugins_)
    if (loaded.path == path) return loaded;

  // RTLD_LOCAL: the plugin's own symbols stay its own; RTLD_NODELETE and no
  // dlclose: its code stays mapped for as long as entries may point into it.
  ::dlerror();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    const char* why = ::dlerror();
    throw InvalidArgument(where + " cannot be loaded: " + (why ? std::string(why) : "unknown reason"));
  }
  using EntryPoint = const PluginEntry* (*)();
  auto entry_point = reinterpret_cast<EntryPoint>(::dlsym(handle, AMPHORA_PLUGIN_ENTRY_SYMBOL));
  if (!entry_point)
    throw InvalidArgument(where + " is not an Amphora plugin: it exports no " AMPHORA_PLUGIN_ENTRY_SYMBOL
                          " (define one with AMPHORA_PLUGIN, <amphora/plugin.hpp>)");
  const PluginEntry* entry = entry_point();
  if (!entry) throw InvalidArgument(where + ": " AMPHORA_PLUGIN_ENTRY_SYMBOL " returned nothing");
  const std::string tag = bounded(entry->abi_tag, 256);
  if (tag != AMPHORA_PLUGIN_ABI_TAG)
    throw Unsupported(where + " was built for '" + tag + "', and this program is '" AMPHORA_PLUGIN_ABI_TAG
                      "': rebuild the plugin against this Amphora");
  if (entry->layout != detail::plugin_layout())
    throw Unsupported(where + " was built with another layout of Amphora's plugin types than this program "
                      "(same version tag '" + tag + "'): rebuild the plugin against this Amphora's headers");
  PluginInfo info;
  info.name = bounded(entry->name, 128);
  info.version = bounded(entry->version, 128);
  info.path = path;
  if (info.name.empty() || !entry->contribute)
    throw InvalidArgument(where + ": its entry names no plugin or no registration function");
  for (const auto& loaded : plugins_)
    if (loaded.name == info.name)
      throw InvalidArgument(where + ": a plugin named '" + info.name + "' is loaded already, from " +
                            loaded.path.string());

  Registry staging;
  try {
    PluginRegistrar registrar(staging, path.string());
    entry->contribute(registrar);
  } catch (const std::exception& e) {
    throw InvalidArgument(where + " ('" + info.name + "') failed to register: " + e.what() +
                          "; nothing of it was registered");
  } catch (...) {
    throw InvalidArgument(where + " ('" + info.name + "') failed to register: it threw something that is not a "
                          "std::exception; nothing of it was registered");
  }
  try {
    merge(staging);
  } catch (const Error& e) {
    throw InvalidArgument(where + " ('" + info.name + "') cannot be added: " + e.what() +
                          "; nothing of it was registered");
  }
  for (const auto& e : staging.entries()) info.materializers.push_back(e->name);
  for (const auto& f : staging.formats()) info.formats.push_back(f->extension);
  plugins_.push_back(info);
  return info;
}

namespace {

// Every `*.so` of each directory of `search_path`, each directory's in name
// order; empty entries and directories that do not exist are skipped, and
// with `skip_unlistable` those that cannot be listed too (else IoError).
std::vector<fs::path> plugin_libraries(std::string_view search_path, bool skip_unlistable = false) {
  std::vector<fs::path> all;
  for (std::size_t start = 0; start <= search_path.size();) {
    std::size_t colon = search_path.find(':', start);
    if (colon == std::string_view::npos) colon = search_path.size();
    const fs::path dir(std::string(search_path.substr(start, colon - start)));
    start = colon + 1;
    std::error_code ec;
    if (dir.empty() || !fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> libraries;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".so") libraries.push_back(it->path());
    if (ec && skip_unlistable) continue;
    if (ec) throw IoError("plugin directory " + dir.string() + " cannot be listed: " + ec.message());
    std::sort(libraries.begin(), libraries.end());
    all.insert(all.end(), libraries.begin(), libraries.end());
  }
  return all;
}

}  // namespace

std::vector<PluginInfo> Registry::load_plugins(std::string_view search_path) {
  std::vector<PluginInfo> loaded;
  for (const auto& library : plugin_libraries(search_path)) loaded.push_back(load_plugin(library));
  return loaded;
}

std::vector<fs::path> plugins_providing(std::string_view materializer, std::string_view search_path) {
  std::vector<fs::path> found;
  for (const auto& library : plugin_libraries(search_path, true)) {
    Registry scratch;
    try {
      const PluginInfo info = scratch.load_plugin(library);
      if (std::find(info.materializers.begin(), info.materializers.end(), materializer) != info.materializers.end())
        found.push_back(info.path);
    } catch (const Error&) {
      // A library that cannot be loaded provides nothing; loading it says why.
    }
  }
  return found;
}

std::vector<PluginInfo> Registry::load_env_plugins() {
  const char* search_path = std::getenv("AMPHORA_PLUGIN_PATH");
  return search_path ? load_plugins(search_path) : std::vector<PluginInfo>{};
}

std::vector<PluginInfo> Registry::plugins() const {
  std::lock_guard lock(plugins_mutex_);
  return plugins_;
}

}  // namespace amphora
