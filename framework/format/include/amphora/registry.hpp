#pragma once
// The materializer registry: type -> materializer for saving, stable name ->
// materializer for loading, file extension -> import/export codec for the CLI.

#include <amphora/export.hpp>
#include <amphora/error.hpp>
#include <amphora/materializer.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <typeindex>
#include <unordered_map>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

/// Human-readable (demangled) name of a C++ type, for messages only; never persisted.
std::string type_display_name(const std::type_index& type);

/// How the CLI imports and exports one file kind (chosen by extension).
struct FileFormat {
  std::string extension;     ///< with the dot, lower case, e.g. ".npy"
  std::string materializer;  ///< name of the materializer whose values it converts
  std::string description;
  /// Reads a file into a new value of the materializer's type.
  std::function<std::shared_ptr<void>(const std::filesystem::path& file)> read;
  /// Writes a value of the materializer's type to a file.
  std::function<void(const void* value, const std::filesystem::path& file)> write;
  /// Optional: writes the file straight into an artifact of the
  /// materializer's type, equal to saving what `read` returns, without
  /// holding the file's value in memory. Store::import_file prefers it.
  std::function<void(const std::filesystem::path& file, ArtifactWriter& out)> import{};
  /// "built-in", "application" or a plugin's path: who added it.
  std::string origin{};
};

namespace detail {

/// The type-erased codec of T's values, materializer `materializer`.
template <class T>
FileFormat make_file_format(std::string materializer, std::string extension, std::string description,
                            std::function<T(const std::filesystem::path&)> read,
                            std::function<void(const T&, const std::filesystem::path&)> write,
                            std::function<void(const std::filesystem::path&, ArtifactWriter&)> import) {
  FileFormat format;
  format.extension = std::move(extension);
  format.materializer = std::move(materializer);
  format.description = std::move(description);
  format.read = [read = std::move(read)](const std::filesystem::path& file) -> std::shared_ptr<void> {
    return std::make_shared<T>(read(file));
  };
  format.write = [write = std::move(write)](const void* value, const std::filesystem::path& file) {
    write(*static_cast<const T*>(value), file);
  };
  format.import = std::move(import);
  return format;
}

}  // namespace detail

/// A plugin a registry loaded (Registry::load_plugin).
struct PluginInfo {
  std::string name;                        ///< as the plugin declares it
  std::string version;                     ///< the plugin's own version
  std::filesystem::path path;              ///< the library, as loaded (absolute, links resolved)
  std::vector<std::string> materializers;  ///< names it registered
  std::vector<std::string> formats;        ///< file extensions it registered
};

/// Thread-safe: lookups may run concurrently with each other and with add().
/// Entries are never removed.
class Registry {
 public:
  /// A new registry holding every library's default materializers
  /// (register_defaults): Amphora's built-ins in a program that includes a
  /// header of amphora::materializers, and those of any other library
  /// loaded. What Store::open uses when given no registry.
  static std::shared_ptr<Registry> with_defaults();
  /// Adds every default contribution registered so far that this registry
  /// does not hold yet, each whole or not at all. Throws InvalidArgument
  /// naming the library when one conflicts with what is registered here.
  void add_defaults();

  /// Registers materializer<T>, the one way to teach Amphora a type (by a
  /// specialization of your own, AMPHORA_MATERIALIZE or AMPHORA_JSON_MATERIALIZER);
  /// if it declares `static void validate(const ArtifactReader&)`, verify
  /// runs it. A type that does not satisfy Materializable fails to compile
  /// with a message saying what to specialize. Throws InvalidArgument when
  /// the name is malformed or already registered (naming both types) or T
  /// already has a materializer.
  template <class T>
  void add(std::string origin = "application") {
    add_entry(make_materializer_entry<T>(std::move(origin)));
  }

  /// Registers a type-erased entry: the boundary where a materializer's
  /// C++ type is not known to the caller (a plugin library). Programs use
  /// add<T>(). Throws as add().
  void add_entry(MaterializerEntry entry);

  /// Registers an import/export codec for a file extension of T's
  /// materializer, and optionally its streaming import (FileFormat::import).
  /// Throws Unsupported when T has no materializer registered yet, and as
  /// add_format() does.
  template <class T>
  void add_file_format(std::string extension, std::string description,
                       std::function<T(const std::filesystem::path&)> read,
                       std::function<void(const T&, const std::filesystem::path&)> write,
                       std::function<void(const std::filesystem::path&, ArtifactWriter&)> import = {}) {
    auto entry = for_type(typeid(T));
    FileFormat format = detail::make_file_format<T>(entry->name, std::move(extension), std::move(description),
                                                    std::move(read), std::move(write), std::move(import));
    format.origin = entry->origin;
    add_format(std::move(format));
  }
  /// Registers a type-erased file format (a plugin library's). Extensions
  /// compare case-insensitively. Throws InvalidArgument for an extension
  /// that does not start with a dot or that another format already handles.
  void add_format(FileFormat format);

  /// The materializer for saving `type`; throws Unsupported naming the type.
  std::shared_ptr<const MaterializerEntry> for_type(const std::type_index& type) const;
  /// The materializer for loading `name`, or nullptr.
  std::shared_ptr<const MaterializerEntry> find(std::string_view name) const;
  /// The codec for `file`'s extension, or nullptr.
  std::shared_ptr<const FileFormat> format_for(const std::filesystem::path& file) const;
  /// The codec of materializer `name`, or nullptr.
  std::shared_ptr<const FileFormat> format_of(std::string_view materializer) const;
  /// Every codec, in the order they were added.
  std::vector<std::shared_ptr<const FileFormat>> formats() const;

  /// All entries, sorted by name.
  std::vector<std::shared_ptr<const MaterializerEntry>> entries() const;

  /// Loads the plugin library `library` (<amphora/plugin.hpp>) and adds what
  /// it registers, all or nothing, with the library's path as their origin.
  /// The library is opened with RTLD_NOW | RTLD_LOCAL and never unloaded; its
  /// ABI tag and layout are checked before anything of it is called. Loading
  /// a library this registry has loaded already returns its info again.
  /// Throws, naming the library: NotFound when it does not exist;
  /// InvalidArgument when it cannot be opened, exports no entry point, its
  /// registration throws, or it adds a name, type or extension already
  /// registered (a plugin of the same name from another path included);
  /// Unsupported when it was built for another Amphora or standard library.
  /// Thread-safe.
  PluginInfo load_plugin(const std::filesystem::path& library);
  /// Loads every `*.so` of each directory in `search_path` (directories
  /// separated by ':'; empty entries and directories that do not exist are
  /// skipped), each directory's in name order. Throws IoError naming a
  /// directory that cannot be listed, and as load_plugin at the first library
  /// that fails; those loaded before it stay loaded.
  std::vector<PluginInfo> load_plugins(std::string_view search_path);
  /// load_plugins($AMPHORA_PLUGIN_PATH); nothing when it is unset.
  std::vector<PluginInfo> load_env_plugins();
  /// The plugins loaded, in the order they were.
  std::vector<PluginInfo> plugins() const;

 private:
  // Checks everything `other` holds against this registry, then adds it all.
  void merge(const Registry& other);
  // Throw InvalidArgument when `entry` or `format` collides with one held
  // (called holding mutex_).
  void check_new(const MaterializerEntry& entry) const;
  void check_new(const FileFormat& format) const;
  mutable std::shared_mutex mutex_;
  std::vector<std::string> defaults_added_;
  std::unordered_map<std::string, std::shared_ptr<const MaterializerEntry>> by_name_;
  std::unordered_map<std::type_index, std::shared_ptr<const MaterializerEntry>> by_type_;
  std::vector<std::shared_ptr<const FileFormat>> formats_;
  std::vector<PluginInfo> plugins_;
  mutable std::mutex plugins_mutex_;  // one load at a time: a plugin is checked against those loaded
};

/// The plugin libraries in the directories of `search_path` (as
/// Registry::load_plugins reads it) that register materializer
/// `materializer`, found by loading each into a registry of its own; those
/// that fail to load, and directories that cannot be listed, are passed
/// over. For messages that say which plugin an artifact needs.
std::vector<std::filesystem::path> plugins_providing(std::string_view materializer, std::string_view search_path);

/// Makes `contribute` (named by its `library`, e.g. "amphora.builtins")
/// part of every registry's defaults, and of those already made when they
/// next call add_defaults(). For a library's static initializer:
///   static const bool registered = amphora::register_defaults("myorg.shapes", &add_shapes);
/// A static library's initializer runs only if the program uses something
/// of its object file: reference a function of that file from a header the
/// program includes (as <amphora/builtins.hpp> does). Returns true. Throws
/// InvalidArgument when `library` is registered already.
bool register_defaults(std::string_view library, void (*contribute)(Registry& registry));

}  // namespace amphora

AMPHORA_API_END
