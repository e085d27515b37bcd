#pragma once
// The materializer registry: type -> materializer for saving, stable name ->
// materializer for loading, file extension -> import/export codec for the CLI.

#include <amphora/error.hpp>
#include <amphora/materializer.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <typeindex>
#include <unordered_map>
#include <vector>

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
};

/// Thread-safe: lookups may run concurrently with each other and with add().
/// Entries are never removed.
class Registry {
 public:
  /// A new registry holding Amphora's built-in materializers and file
  /// formats. Defined by the materializers library (link amphora::amphora).
  static std::shared_ptr<Registry> with_builtins();

  /// Registers materializer<T>; if it declares `static void validate(const
  /// ArtifactReader&)`, verify runs it. A type that does not satisfy Materializable
  /// fails to compile with a message saying what to specialize. Throws
  /// InvalidArgument when the name is malformed or already registered (naming
  /// both types) or T already has a materializer.
  template <class T>
  void add(std::string origin = "application") {
    add_entry(make_materializer_entry<T>(std::move(origin)));
  }

  /// Registers T, which has nlohmann `to_json`/`from_json`, as materializer
  /// `name` (format `version`) storing one canonical JSON document,
  /// "value.json". Store::save<T> and load<T> then find it here. Throws as add().
  template <class T>
  void add_json(std::string name, int version, std::string origin = "application") {
    MaterializerEntry entry;
    entry.name = std::move(name);
    entry.version = version;
    entry.type = typeid(T);
    entry.origin = std::move(origin);
    entry.save = [](const void* value, ArtifactWriter& out) {
      out.write_json("value.json", nlohmann::json(*static_cast<const T*>(value)));
    };
    entry.load = [](const ArtifactReader& in) -> std::shared_ptr<void> {
      return std::make_shared<T>(in.read_json("value.json").template get<T>());
    };
    entry.validate = [](const ArtifactReader& in) { (void)in.read_json("value.json").template get<T>(); };
    add_entry(std::move(entry));
  }

  /// Registers a type-erased entry (what add<T>() and plugins use).
  void add_entry(MaterializerEntry entry);

  /// Registers an import/export codec for a file extension of T's
  /// materializer, and optionally its streaming import (FileFormat::import).
  template <class T>
  void add_file_format(std::string extension, std::string description,
                       std::function<T(const std::filesystem::path&)> read,
                       std::function<void(const T&, const std::filesystem::path&)> write,
                       std::function<void(const std::filesystem::path&, ArtifactWriter&)> import = {}) {
    FileFormat format;
    format.extension = std::move(extension);
    format.materializer = for_type(typeid(T))->name;
    format.description = std::move(description);
    format.read = [read = std::move(read)](const std::filesystem::path& file) -> std::shared_ptr<void> {
      return std::make_shared<T>(read(file));
    };
    format.write = [write = std::move(write)](const void* value, const std::filesystem::path& file) {
      write(*static_cast<const T*>(value), file);
    };
    format.import = std::move(import);
    add_format(std::move(format));
  }
  void add_format(FileFormat format);

  /// The materializer for saving `type`; throws Unsupported naming the type.
  std::shared_ptr<const MaterializerEntry> for_type(const std::type_index& type) const;
  /// The materializer for loading `name`, or nullptr.
  std::shared_ptr<const MaterializerEntry> find(std::string_view name) const;
  /// The codec for `file`'s extension, or nullptr.
  std::shared_ptr<const FileFormat> format_for(const std::filesystem::path& file) const;
  /// The codec of materializer `name`, or nullptr.
  std::shared_ptr<const FileFormat> format_of(std::string_view materializer) const;

  /// All entries, sorted by name.
  std::vector<std::shared_ptr<const MaterializerEntry>> entries() const;

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const MaterializerEntry>> by_name_;
  std::unordered_map<std::type_index, std::shared_ptr<const MaterializerEntry>> by_type_;
  std::vector<std::shared_ptr<const FileFormat>> formats_;
};

}  // namespace amphora
