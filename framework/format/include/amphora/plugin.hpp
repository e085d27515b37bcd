#pragma once
// Run-time plugins: shared libraries that teach a registry materializers and
// file formats. A plugin is a few lines around the registration it does:
//
//   #include <amphora/plugin.hpp>
//   #include "shapes.hpp"            // materializer<Shape> and friends
//
//   void add_shapes(amphora::PluginRegistrar& r) {
//     r.add<Shape>();
//     r.add_file_format<Shape>(".shape", "a shape as text", read_shape, write_shape);
//   }
//   AMPHORA_PLUGIN("myorg.shapes", "1.0.0", add_shapes)
//
// built with amphora_add_plugin(shapes SOURCES shapes.cpp) and loaded with
// Registry::load_plugin, $AMPHORA_PLUGIN_PATH or `amphora --plugin PATH`.
//
// What crosses between a host and a plugin is C++ (MaterializerEntry holds
// std::string and std::function), so both must be built against the same
// Amphora minor version and the same standard library and ABI: the loader
// compares AMPHORA_PLUGIN_ABI_TAG and the layout of those types, each as the
// plugin and the host were compiled, before it calls anything of the plugin.

#include <amphora/export.hpp>
#include <amphora/registry.hpp>
#include <amphora/version.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <typeindex>

/// The version of the layout of what crosses between host and plugin
/// (PluginEntry, PluginRegistrar, MaterializerEntry, FileFormat,
/// MaterializerOptions, ValueIdentity): raised whenever one of them changes.
#define AMPHORA_PLUGIN_BOUNDARY 1

#define AMPHORA_PLUGIN_STR_(x) #x
#define AMPHORA_PLUGIN_STR(x) AMPHORA_PLUGIN_STR_(x)
#if defined(_LIBCPP_VERSION)
#define AMPHORA_PLUGIN_STDLIB_ "libc++ abi " AMPHORA_PLUGIN_STR(_LIBCPP_ABI_VERSION)
#elif defined(__GLIBCXX__)
#define AMPHORA_PLUGIN_STDLIB_ \
  "libstdc++ " AMPHORA_PLUGIN_STR(_GLIBCXX_RELEASE) " cxx11-abi " AMPHORA_PLUGIN_STR(_GLIBCXX_USE_CXX11_ABI)
#else
#define AMPHORA_PLUGIN_STDLIB_ "unknown standard library"
#endif

/// What a host and a plugin must agree on, as text: Amphora's major and
/// minor version, the boundary's layout version, the standard library and its
/// ABI, e.g. "amphora 0.1 boundary 1 libstdc++ 12 cxx11-abi 1".
#define AMPHORA_PLUGIN_ABI_TAG                                                                                 \
  "amphora " AMPHORA_PLUGIN_STR(AMPHORA_VERSION_MAJOR) "." AMPHORA_PLUGIN_STR(AMPHORA_VERSION_MINOR) " boundary " \
      AMPHORA_PLUGIN_STR(AMPHORA_PLUGIN_BOUNDARY) " " AMPHORA_PLUGIN_STDLIB_

/// The symbol every plugin exports (AMPHORA_PLUGIN defines it).
#define AMPHORA_PLUGIN_ENTRY_SYMBOL "amphora_plugin_entry"

AMPHORA_API_BEGIN

namespace amphora {

/// What a plugin may do while it is loaded: add materializers and file
/// formats to the registry loading it, nothing else. Everything added is
/// registered together once the plugin's registration returns, or nothing
/// is. Entries' origin is the plugin's path, whatever the plugin sets.
class PluginRegistrar {
 public:
  PluginRegistrar(const PluginRegistrar&) = delete;
  PluginRegistrar& operator=(const PluginRegistrar&) = delete;

  /// Adds materializer<T> (a specialization, AMPHORA_MATERIALIZE or
  /// AMPHORA_JSON_MATERIALIZER). Throws InvalidArgument as Registry::add.
  template <class T>
  void add() {
    add_entry(make_materializer_entry<T>());
  }
  /// Adds a type-erased entry. Throws InvalidArgument as Registry::add_entry.
  void add_entry(MaterializerEntry entry);

  /// Adds an import/export codec for files ending in `extension` whose
  /// values are T's (T's materializer needs not be the plugin's own).
  template <class T>
  void add_file_format(std::string extension, std::string description,
                       std::function<T(const std::filesystem::path&)> read,
                       std::function<void(const T&, const std::filesystem::path&)> write,
                       std::function<void(const std::filesystem::path&, ArtifactWriter&)> import = {}) {
    detail::require_materializable<T>();
    add_format(detail::make_file_format<T>(std::string(materializer<T>::name), std::move(extension),
                                           std::move(description), std::move(read), std::move(write),
                                           std::move(import)));
  }
  /// Adds a type-erased codec. Throws InvalidArgument as Registry::add_format.
  void add_format(FileFormat format);

 private:
  friend class Registry;
  AMPHORA_INTERNAL PluginRegistrar(Registry& staging, std::string origin);
  Registry& staging_;
  std::string origin_;
};

/// What a plugin's entry point returns: plain data, read by the loader in
/// order. When `abi_tag` differs from the host's nothing else is read.
struct PluginEntry {
  const char* abi_tag;     ///< AMPHORA_PLUGIN_ABI_TAG as the plugin was compiled
  std::uint64_t layout;    ///< detail::plugin_layout() as the plugin was compiled
  const char* name;        ///< the plugin's name, dotted lower case ("myorg.shapes")
  const char* version;     ///< the plugin's own version ("1.0.0")
  void (*contribute)(PluginRegistrar& registrar);  ///< its registration
};

namespace detail {

/// The sizes and alignments of what crosses the boundary, folded into one
/// number (FNV-1a): a change to any of them that AMPHORA_PLUGIN_BOUNDARY
/// missed still makes host and plugin disagree.
constexpr std::uint64_t plugin_layout() {
  std::uint64_t h = 14695981039346656037ull;
  for (std::uint64_t v : {sizeof(PluginEntry), sizeof(PluginRegistrar), sizeof(MaterializerEntry),
                          alignof(MaterializerEntry), sizeof(FileFormat), sizeof(MaterializerOptions),
                          sizeof(ValueIdentity), sizeof(std::string), sizeof(std::function<void()>),
                          sizeof(std::shared_ptr<void>), sizeof(std::type_index), sizeof(std::filesystem::path)})
    h = (h ^ v) * 1099511628211ull;
  return h;
}

}  // namespace detail

}  // namespace amphora

AMPHORA_API_END

/// Defines the entry point of a plugin named NAME (a string literal, dotted
/// lower case), at version VERSION (a string literal), whose registration is
/// CONTRIBUTE, a `void (amphora::PluginRegistrar&)`. Use once per library.
#define AMPHORA_PLUGIN(NAME, VERSION, CONTRIBUTE)                                                          \
  extern "C" __attribute__((visibility("default"))) const ::amphora::PluginEntry* amphora_plugin_entry() {  \
    static const ::amphora::PluginEntry entry{AMPHORA_PLUGIN_ABI_TAG, ::amphora::detail::plugin_layout(), NAME, \
                                              VERSION, CONTRIBUTE};                                        \
    return &entry;                                                                                         \
  }
