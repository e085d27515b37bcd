#pragma once
// The one place to teach Amphora a type: specialize amphora::materializer<T>.
//
//   template <> struct amphora::materializer<BBoxes> {
//     static constexpr std::string_view name = "myorg.bboxes";  // stable, persisted
//     static constexpr int version = 1;                          // payload format version
//     static void save(const BBoxes& value, amphora::ArtifactWriter& out);
//     static BBoxes load(const amphora::ArtifactReader& in);
//     // optional: the structural check `amphora verify` runs (defaults to a full load)
//     static void validate(const amphora::ArtifactReader& in);
//     // optional: a quick look (metadata only) that the artifact holds a T and
//     // not another type sharing the name; a cache hit is refused otherwise
//     static void accept(const amphora::ArtifactReader& in);
//     // optional, for values that save no children: what names the value's
//     // content without reading it (ValueIdentity), so that one referenced
//     // twice in a save is saved once (ArtifactWriter::save_part)
//     static amphora::ValueIdentity identity(const BBoxes& value);
//   };
//
// Store::save and Store::load use it directly; registering it
// (registry.add<BBoxes>()) lets type-erased tools such as `amphora verify`
// and `amphora show` find it by name. Two shorthands produce such a
// specialization: AMPHORA_MATERIALIZE (<amphora/describe.hpp>) for a struct
// declared by its fields, and AMPHORA_JSON_MATERIALIZER (below) for a type
// nlohmann::json already converts. Either way the type composes like any
// other: as a child, a struct field, a list item, a pipeline output.

#include <amphora/export.hpp>
#include <amphora/artifact.hpp>
#include <amphora/migration.hpp>

#include <concepts>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <typeindex>

AMPHORA_API_BEGIN

namespace amphora {

/// Primary template, deliberately undefined: a type without a specialization
/// is not Materializable.
template <class T>
struct materializer;

/// Satisfied when materializer<T> provides a stable name, a format version,
/// save() and load().
template <class T>
concept Materializable = requires(const T& value, ArtifactWriter& writer, const ArtifactReader& reader) {
  { materializer<T>::name } -> std::convertible_to<std::string_view>;
  { materializer<T>::version } -> std::convertible_to<int>;
  { materializer<T>::save(value, writer) } -> std::same_as<void>;
  { materializer<T>::load(reader) } -> std::same_as<T>;
};

/// A materializer storing a type with nlohmann `to_json`/`from_json` as one
/// canonical JSON document, "value.json". Inherit it in the specialization,
/// which adds the name and version, or use AMPHORA_JSON_MATERIALIZER. When
/// the specialization declares `migrations` (a migration_chain over
/// nlohmann::json, <amphora/migration.hpp>), a document written by an older
/// version goes through it before converting.
template <class T>
struct json_materializer {
  static void save(const T& value, ArtifactWriter& out) { out.write_json("value.json", nlohmann::json(value)); }
  /// Throws CorruptData naming the artifact when the document no longer
  /// converts to a T (a field missing or of another type).
  static T load(const ArtifactReader& in) {
    auto document = in.read_json("value.json");
    if constexpr (HasMigrations<T>) upgrade<T>(in, document);
    try {
      return document.template get<T>();
    } catch (const nlohmann::json::exception& e) {
      throw CorruptData(in.label() + ": 'value.json' does not convert back to the stored type: " + e.what());
    }
  }
  static void validate(const ArtifactReader& in) { (void)load(in); }
};

/// Teaches Amphora a type with nlohmann `to_json`/`from_json`, stored as
/// canonical JSON under the stable `NAME` at format `VERSION`. At namespace
/// scope, outside any namespace:
///   AMPHORA_JSON_MATERIALIZER(myorg::Config, "myorg.config", 1)
#define AMPHORA_JSON_MATERIALIZER(TYPE, NAME, VERSION)                      \
  template <>                                                               \
  struct amphora::materializer<TYPE> : amphora::json_materializer<TYPE> {   \
    static constexpr std::string_view name = NAME;                          \
    static constexpr int version = VERSION;                                 \
  }

/// What names a value's content during one save without reading it: two
/// values with equal keys hold equal content for as long as `owner` lives
/// and nothing writes to it (a tensor: its buffer, whose address, size,
/// dtype and shape make the key). The save keeps `owner` until it returns,
/// so no other value can take its address meanwhile.
struct ValueIdentity {
  std::shared_ptr<const void> owner;
  std::string key;
};

/// A type-erased materializer. `save` receives a pointer to a value of `type`;
/// `load` returns a newly allocated value of `type`.
struct MaterializerEntry {
  std::string name;
  int version = 0;
  std::type_index type = typeid(void);
  std::string origin;  ///< "built-in", "application" or a plugin path
  std::function<void(const void* value, ArtifactWriter& out)> save;
  std::function<std::shared_ptr<void>(const ArtifactReader& in)> load;
  /// Structural check run by Store::verify once the hashes match: throws
  /// CorruptData (or Unsupported) when the metadata contradicts the payload.
  /// Empty = a full load is the check.
  std::function<void(const ArtifactReader& in)> validate;
  /// Quick check, from the metadata alone, that the artifact holds a value of
  /// `type` and not of another type stored under the same name (a 0-d tensor
  /// where a vector is wanted): throws TypeMismatch saying what it holds. A
  /// pipeline refuses a cache hit it throws for. Empty = no quick check.
  std::function<void(const ArtifactReader& in)> accept;
  /// The identity of a value of `type` (see ValueIdentity), for values that
  /// save no children. Empty = every part is saved on its own.
  std::function<ValueIdentity(const void* value)> identity;
};

namespace detail {

template <class T>
void require_materializable() {
  static_assert(Materializable<T>,
                "amphora: no materializer for this type (see the note naming it below). A built-in type needs "
                "its header: <amphora/everyday.hpp> for numbers, strings, JSON, standard containers (vector, "
                "array, map, optional, pair, tuple, variant) and "
                "AMPHORA_MATERIALIZE structs; <amphora/tensor.hpp>, <amphora/table.hpp>, <amphora/sparse.hpp>, "
                "<amphora/record_collection.hpp>. A type of your own: declare its fields with AMPHORA_MATERIALIZE "
                "(<amphora/describe.hpp>) in its namespace, or specialize amphora::materializer<T> with a name, a "
                "version, save() and load().");
}

}  // namespace detail

/// The type-erased entry of materializer<T>, built on first use.
template <class T>
MaterializerEntry make_materializer_entry(std::string origin = "application") {
  detail::require_materializable<T>();
  MaterializerEntry entry;
  if constexpr (Materializable<T>) {
    entry.name = std::string(materializer<T>::name);
    entry.version = materializer<T>::version;
    entry.type = typeid(T);
    entry.origin = std::move(origin);
    entry.save = [](const void* value, ArtifactWriter& out) { materializer<T>::save(*static_cast<const T*>(value), out); };
    entry.load = [](const ArtifactReader& in) -> std::shared_ptr<void> {
      return std::make_shared<T>(materializer<T>::load(in));
    };
    if constexpr (requires(const ArtifactReader& in) { materializer<T>::validate(in); })
      entry.validate = [](const ArtifactReader& in) { materializer<T>::validate(in); };
    if constexpr (requires(const ArtifactReader& in) { materializer<T>::accept(in); })
      entry.accept = [](const ArtifactReader& in) { materializer<T>::accept(in); };
    if constexpr (requires(const T& v) {
                    { materializer<T>::identity(v) } -> std::same_as<ValueIdentity>;
                  })
      entry.identity = [](const void* value) { return materializer<T>::identity(*static_cast<const T*>(value)); };
  }
  return entry;
}

/// One shared entry per type, for saving and loading without a registry.
template <class T>
const MaterializerEntry& materializer_entry() {
  static const MaterializerEntry entry = make_materializer_entry<T>();
  return entry;
}

template <class T>
Digest ArtifactWriter::save_child(std::string_view role, const T& value) {
  detail::require_materializable<T>();
  return save_child(role, materializer_entry<T>(), &value);
}

template <class T>
Digest ArtifactWriter::save_part(std::string_view role, const T& value) {
  detail::require_materializable<T>();
  return save_part(role, materializer_entry<T>(), &value);
}

template <class T>
Digest ArtifactWriter::save_child(std::string_view role, const T& value, const MaterializerOptions& options) {
  detail::require_materializable<T>();
  return save_child(role, materializer_entry<T>(), &value, options);
}

template <class T>
T ArtifactReader::load_child(std::string_view role) const {
  detail::require_materializable<T>();
  ArtifactReader child = open_child(role);
  child.require_materializer(materializer<T>::name, materializer<T>::version, label_ + " child '" + std::string(role) + "'");
  return materializer<T>::load(child);
}

}  // namespace amphora

AMPHORA_API_END
