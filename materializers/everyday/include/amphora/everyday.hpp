#pragma once
// Materializers for everyday C++ types, so they save and load with no code:
//
//   type                                   materializer           payload
//   bool, integers, floats, complex        amphora.tensor (0-d)   tensor.npy     (from tensor.hpp)
//   std::vector of those                   amphora.tensor (1-d)   tensor.npy     (from tensor.hpp)
//   std::string                            amphora.string         string.bin
//   nlohmann::json                         amphora.json           value.json
//   std::vector<std::string>               amphora.strings        merged strings
//   std::vector<Tensor>                    amphora.tensor_list    one data file + index
//   std::vector<T> of other materializable amphora.list           children items/0, items/1, ...
//   std::map/unordered_map<std::string, V> amphora.map            keys + values (inline or children)
//   std::optional<T>                       amphora.optional       child "value" when engaged
//
// docs/FORMAT.md describes each payload.

#include <amphora/export.hpp>
#include <amphora/materializer.hpp>
#include <amphora/parallel.hpp>
#include <amphora/tensor.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

/// T was declared with AMPHORA_MATERIALIZE (amphora/describe.hpp).
template <class T>
concept Described = requires(const T* p) { amphora_describe(p); };

template <Described T>
constexpr auto description_of() {
  return amphora_describe(static_cast<const T*>(nullptr));
}

namespace detail {

template <class T>
struct is_std_vector : std::false_type {};
template <class T, class A>
struct is_std_vector<std::vector<T, A>> : std::true_type {};

}  // namespace detail

// ---------------------------------------------------------------------------
// Text and JSON.

template <>
struct materializer<std::string> {
  static constexpr std::string_view name = "amphora.string";
  static constexpr int version = 1;
  /// Any bytes; meta records the length and whether they are valid UTF-8.
  static void save(const std::string& value, ArtifactWriter& out);
  static std::string load(const ArtifactReader& in);
};

template <>
struct materializer<nlohmann::json> {
  static constexpr std::string_view name = "amphora.json";
  static constexpr int version = 1;
  /// Canonical JSON; NaN, infinities and invalid UTF-8 are refused (InvalidArgument).
  static void save(const nlohmann::json& value, ArtifactWriter& out);
  static nlohmann::json load(const ArtifactReader& in);
};

template <>
struct materializer<std::vector<std::string>> {
  static constexpr std::string_view name = "amphora.strings";
  static constexpr int version = 1;
  static void save(const std::vector<std::string>& values, ArtifactWriter& out);
  static std::vector<std::string> load(const ArtifactReader& in);
  static void validate(const ArtifactReader& in);
};

/// Reads the strings of an amphora.strings artifact without copying them.
StringsView load_strings_view(const ArtifactReader& in);

// ---------------------------------------------------------------------------
// A list of tensors of any dtypes and shapes: one data file, each item at a
// multiple of 64 bytes, and an index; loaded items map the file.

template <>
struct materializer<std::vector<Tensor>> {
  static constexpr std::string_view name = "amphora.tensor_list";
  static constexpr int version = 1;
  static void save(const std::vector<Tensor>& items, ArtifactWriter& out);
  static std::vector<Tensor> load(const ArtifactReader& in);
  static void validate(const ArtifactReader& in);
};

// ---------------------------------------------------------------------------
// Containers of other materializable values: children.

namespace detail {

/// How amphora.map stores its values: numbers as one array, strings merged,
/// JSON as one document, anything else as one child artifact per value.
template <class V>
constexpr std::string_view map_values_encoding() {
  if constexpr (ArrayElement<V> && !std::is_same_v<V, bool>)
    return "array";
  else if constexpr (std::is_same_v<V, bool>)
    return "array";
  else if constexpr (std::is_same_v<V, std::string>)
    return "strings";
  else if constexpr (std::is_same_v<V, nlohmann::json>)
    return "json";
  else
    return "children";
}

/// The items of a list or map saved as children, `prefix` + index.
std::string child_role(std::string_view prefix, std::size_t index);
/// The child count recorded in meta "count", checked against the children.
std::size_t checked_count(const ArtifactReader& in, std::string_view prefix);
/// Whether an amphora.optional is engaged, checked against its children.
bool check_optional(const ArtifactReader& in);

/// Loads children PREFIX0 .. PREFIX(count-1) side by side (each opens and
/// maps, or for eager loads reads, files of its own); slot i holds child i.
template <class T>
std::vector<std::optional<T>> load_children(const ArtifactReader& in, std::string_view prefix, std::size_t count) {
  std::vector<std::optional<T>> loaded(count);
  parallel_for(count, [&](std::size_t i) { loaded[i].emplace(in.load_child<T>(child_role(prefix, i))); });
  return loaded;
}

}  // namespace detail

template <class T>
  requires(!ArrayElement<T> && !std::is_same_v<T, std::string> && !std::is_same_v<T, Tensor> && !Described<T> &&
           Materializable<T>)
struct materializer<std::vector<T>> {
  static constexpr std::string_view name = "amphora.list";
  static constexpr int version = 1;
  static void save(const std::vector<T>& items, ArtifactWriter& out) {
    out.meta()["count"] = items.size();
    // Children are whole artifacts, each hashed and written to files of its
    // own: saved side by side, they keep every core busy.
    parallel_for(items.size(), [&](std::size_t i) { out.save_child(detail::child_role("items/", i), items[i]); });
  }
  static std::vector<T> load(const ArtifactReader& in) {
    std::size_t count = detail::checked_count(in, "items/");
    auto loaded = detail::load_children<T>(in, "items/", count);
    std::vector<T> items;
    items.reserve(count);
    for (auto& item : loaded) items.push_back(std::move(*item));
    return items;
  }
  static void validate(const ArtifactReader& in) { (void)detail::checked_count(in, "items/"); }
};

template <class T>
  requires Materializable<T>
struct materializer<std::optional<T>> {
  static constexpr std::string_view name = "amphora.optional";
  static constexpr int version = 1;
  static void save(const std::optional<T>& value, ArtifactWriter& out) {
    out.meta()["engaged"] = value.has_value();
    if (value) out.save_child("value", *value);
  }
  static std::optional<T> load(const ArtifactReader& in) {
    if (!detail::check_optional(in)) return std::nullopt;
    return in.load_child<T>("value");
  }
  static void validate(const ArtifactReader& in) { (void)detail::check_optional(in); }
};

namespace detail {

/// The map layout shared by every key/value type: keys merged in byte order
/// (`keys`), the values by map_values_encoding.
struct MapLayout {
  std::size_t count = 0;
  std::string values;  ///< the encoding
  StringsView keys;    ///< validated: as many as `count`, sorted, unique
};
void save_map_keys(ArtifactWriter& out, std::span<const std::string_view> keys, std::string_view values_encoding);
MapLayout check_map(const ArtifactReader& in);

template <class Map>
void save_map(const Map& map, ArtifactWriter& out) {
  using V = typename Map::mapped_type;
  std::vector<const typename Map::value_type*> entries;
  entries.reserve(map.size());
  for (const auto& e : map) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  std::vector<std::string_view> keys;
  keys.reserve(entries.size());
  for (const auto* e : entries) keys.emplace_back(e->first);
  constexpr std::string_view encoding = map_values_encoding<V>();
  save_map_keys(out, keys, encoding);
  if constexpr (encoding == "array") {
    std::vector<V> values;
    values.reserve(entries.size());
    for (const auto* e : entries) values.push_back(e->second);
    out.save_child("values", values);
  } else if constexpr (encoding == "strings") {
    std::vector<std::string_view> values;
    for (const auto* e : entries) values.emplace_back(e->second);
    out.write_strings("values", values);
  } else if constexpr (encoding == "json") {
    nlohmann::json values = nlohmann::json::array();
    for (const auto* e : entries) values.push_back(e->second);
    out.write_json("values.json", values);
  } else {
    parallel_for(entries.size(), [&](std::size_t i) { out.save_child(child_role("values/", i), entries[i]->second); });
  }
}

template <class Map>
Map load_map(const ArtifactReader& in) {
  using V = typename Map::mapped_type;
  MapLayout layout = check_map(in);
  constexpr std::string_view encoding = map_values_encoding<V>();
  if (layout.values != encoding)
    throw TypeMismatch(in.label() + ": map values are stored as '" + layout.values + "', but " +
                      std::string(encoding) + " is how this value type is stored");
  const StringsView& keys = layout.keys;
  Map map;
  auto put = [&](std::size_t i, V value) { map.emplace(std::string(keys[i]), std::move(value)); };
  if constexpr (encoding == "array") {
    auto values = in.load_child<std::vector<V>>("values");
    if (values.size() != keys.size()) throw CorruptData(in.label() + ": map has " + std::to_string(keys.size()) +
                                                        " keys but " + std::to_string(values.size()) + " values");
    for (std::size_t i = 0; i < keys.size(); ++i) put(i, values[i]);
  } else if constexpr (encoding == "strings") {
    StringsView values = in.read_strings("values");
    if (values.size() != keys.size()) throw CorruptData(in.label() + ": map has " + std::to_string(keys.size()) +
                                                        " keys but " + std::to_string(values.size()) + " values");
    for (std::size_t i = 0; i < keys.size(); ++i) put(i, std::string(values[i]));
  } else if constexpr (encoding == "json") {
    nlohmann::json values = in.read_json("values.json");
    if (!values.is_array() || values.size() != keys.size())
      throw CorruptData(in.label() + ": 'values.json' is not an array of " + std::to_string(keys.size()) + " values");
    for (std::size_t i = 0; i < keys.size(); ++i) put(i, std::move(values[i]));
  } else {
    auto values = load_children<V>(in, "values/", keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) put(i, std::move(*values[i]));
  }
  return map;
}

}  // namespace detail

template <class V, class C, class A>
  requires Materializable<V>
struct materializer<std::map<std::string, V, C, A>> {
  static constexpr std::string_view name = "amphora.map";
  static constexpr int version = 1;
  static void save(const std::map<std::string, V, C, A>& map, ArtifactWriter& out) { detail::save_map(map, out); }
  static std::map<std::string, V, C, A> load(const ArtifactReader& in) {
    return detail::load_map<std::map<std::string, V, C, A>>(in);
  }
  static void validate(const ArtifactReader& in) { (void)detail::check_map(in); }
};

template <class V, class H, class E, class A>
  requires Materializable<V>
struct materializer<std::unordered_map<std::string, V, H, E, A>> {
  static constexpr std::string_view name = "amphora.map";
  static constexpr int version = 1;
  /// Keys are stored sorted, so equal maps get equal digests whatever their bucket order.
  static void save(const std::unordered_map<std::string, V, H, E, A>& map, ArtifactWriter& out) {
    detail::save_map(map, out);
  }
  static std::unordered_map<std::string, V, H, E, A> load(const ArtifactReader& in) {
    return detail::load_map<std::unordered_map<std::string, V, H, E, A>>(in);
  }
  static void validate(const ArtifactReader& in) { (void)detail::check_map(in); }
};

}  // namespace amphora

AMPHORA_API_END
