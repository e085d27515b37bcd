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
#include <amphora/registry.hpp>
#include <amphora/tensor.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
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

/// How a member type is stored as a column of a record list
/// (amphora/record_list.hpp); specialized there for each column kind.
template <class M>
struct Column;

}  // namespace detail

/// T has a record-list column kind: numbers, fixed arrays of numbers,
/// strings, JSON, tensors, and vectors, optionals, string-keyed maps, pairs,
/// tuples and declared structs of those. A std::vector of a declared struct
/// whose members are all Columnar is a record list; otherwise a list of
/// struct artifacts.
template <class T>
concept Columnar = requires { typename detail::Column<T>::Reader; };

namespace detail {

template <class T>
struct is_std_vector : std::false_type {};
template <class T, class A>
struct is_std_vector<std::vector<T, A>> : std::true_type {};

}  // namespace detail

namespace detail {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

/// Longest string or JSON text kept inline; longer ones become children.
inline constexpr std::size_t kMaxInlineBytes = 4096;

/// Whether the JSON text of `value` certainly exceeds `limit` bytes, found
/// without writing it (a large document is not serialized just to be measured).
bool json_longer_than(const nlohmann::json& value, std::size_t limit);

template <class M>
struct is_string_keyed_map : std::false_type {};
template <class V, class C, class A>
struct is_string_keyed_map<std::map<std::string, V, C, A>> : std::true_type {};
template <class V, class H, class E, class A>
struct is_string_keyed_map<std::unordered_map<std::string, V, H, E, A>> : std::true_type {};

/// The scalars JSON holds exactly (floats when finite, strings when UTF-8).
template <class M>
constexpr bool json_scalar() {
  return std::is_same_v<M, bool> || (std::is_integral_v<M> && ArrayElement<M>) || std::is_same_v<M, float> ||
         std::is_same_v<M, double> || std::is_same_v<M, std::string>;
}

/// A string-keyed map of JSON scalars, or a list of strings: what is kept
/// inline beside the scalars when small.
template <class M>
constexpr bool inline_container() {
  if constexpr (is_string_keyed_map<M>::value)
    return json_scalar<typename M::mapped_type>();
  else
    return std::is_same_v<M, std::vector<std::string>>;
}

/// Most entries of a map, or strings of a list, kept inline.
inline constexpr std::size_t kMaxInlineItems = 256;

/// `value` as JSON when it round-trips exactly and is small, else nothing:
/// scalars, short strings, small JSON values, and small string-keyed maps
/// of scalars and lists of strings (a JSON object or array, which loads in
/// other languages as the same dict or list the child artifact would).
template <class M>
std::optional<nlohmann::json> to_inline(const M& value) {
  if constexpr (std::is_same_v<M, bool> || (std::is_integral_v<M> && ArrayElement<M>)) {
    return nlohmann::json(value);
  } else if constexpr (std::is_same_v<M, float> || std::is_same_v<M, double>) {
    if (!std::isfinite(value)) return std::nullopt;
    return nlohmann::json(static_cast<double>(value));
  } else if constexpr (std::is_same_v<M, std::string>) {
    if (value.size() > kMaxInlineBytes || !is_valid_utf8(value)) return std::nullopt;
    return nlohmann::json(value);
  } else if constexpr (std::is_same_v<M, nlohmann::json>) {
    if (value.is_null()) return std::nullopt;  // null inline means an empty optional
    if (json_longer_than(value, kMaxInlineBytes)) return std::nullopt;
    try {
      if (canonical_json(value).size() > kMaxInlineBytes) return std::nullopt;
    } catch (const InvalidArgument&) {
      return std::nullopt;  // the child's save reports why
    }
    return value;
  } else if constexpr (is_optional<M>::value) {
    if (!value) return nlohmann::json(nullptr);
    return to_inline(*value);
  } else if constexpr (inline_container<M>()) {
    if (value.size() > kMaxInlineItems) return std::nullopt;
    nlohmann::json out = is_string_keyed_map<M>::value ? nlohmann::json::object() : nlohmann::json::array();
    std::size_t bytes = 0;
    for (const auto& item : value) {
      if constexpr (is_string_keyed_map<M>::value) {
        auto v = to_inline(item.second);
        if (!v || !is_valid_utf8(item.first)) return std::nullopt;
        bytes += item.first.size() + (v->is_string() ? v->template get_ref<const std::string&>().size() : 24) + 6;
        out[item.first] = std::move(*v);
      } else {
        if (!is_valid_utf8(item)) return std::nullopt;
        bytes += item.size() + 3;
        out.push_back(item);
      }
      if (bytes > kMaxInlineBytes) return std::nullopt;
    }
    return out;
  } else {
    return std::nullopt;
  }
}

/// "a string \"abc\"", "a number 3": a stored inline value, for messages.
std::string stored_value_text(const nlohmann::json& value);

template <class M>
M from_inline(const nlohmann::json& value, const ArtifactReader& in, std::string_view field) {
  if constexpr (is_optional<M>::value) {
    if (value.is_null()) return std::nullopt;
    return from_inline<typename M::value_type>(value, in, field);
  } else if constexpr (std::is_same_v<M, bool> || (std::is_integral_v<M> && ArrayElement<M>) ||
                       std::is_same_v<M, float> || std::is_same_v<M, double> || std::is_same_v<M, std::string> ||
                       std::is_same_v<M, nlohmann::json>) {
    if (!json_holds<M>(value))
      throw TypeMismatch(in.label() + ": field '" + std::string(field) + "' holds " + stored_value_text(value) +
                         ", which the declared member type " + type_display_name(typeid(M)) + " cannot hold");
    return value.get<M>();
  } else if constexpr (inline_container<M>()) {
    auto mismatch = [&] {
      return TypeMismatch(in.label() + ": field '" + std::string(field) + "' holds " + stored_value_text(value) +
                          ", which the declared member type " + type_display_name(typeid(M)) + " cannot hold");
    };
    M out;
    if constexpr (is_string_keyed_map<M>::value) {
      using V = typename M::mapped_type;
      if (!value.is_object()) throw mismatch();
      for (const auto& item : value.items()) {
        if (!json_holds<V>(item.value())) throw mismatch();
        out.emplace(item.key(), item.value().template get<V>());
      }
    } else {
      if (!value.is_array()) throw mismatch();
      out.reserve(value.size());
      for (const auto& item : value) {
        if (!item.is_string()) throw mismatch();
        out.push_back(item.template get<std::string>());
      }
    }
    return out;
  } else {
    throw TypeMismatch(in.label() + ": field '" + std::string(field) + "' holds " + stored_value_text(value) +
                       " inline, but the declared member type " + type_display_name(typeid(M)) +
                       " is stored as a child artifact");
  }
}

template <class M>
constexpr bool storable_member() {
  if constexpr (is_optional<M>::value)
    return storable_member<typename M::value_type>();
  else
    return Materializable<M>;
}

// A concept, so that a failed check's note names the member's type.
template <class M>
concept StorableMember = storable_member<M>();

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

namespace detail {

/// One tensor of a tensor-items layout: where its bytes lie in the data file.
struct TensorItem {
  DType dtype{};
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0, bytes = 0;
};

/// The tensors of a tensor-items layout (PREFIXdata.bin + PREFIXindex.json),
/// their index validated and the data file mapped (or read, for eager loads).
struct TensorItems {
  std::shared_ptr<const Buffer> data;
  std::vector<TensorItem> items;
  std::string label, path;
  std::size_t size() const { return items.size(); }
  /// Item `i` (unchecked index) sharing the data's memory; CorruptData for a
  /// bool item holding a byte other than 0 or 1.
  Tensor get(std::size_t i) const;
};

/// Writes `count` tensors, item(i) for each, as PREFIXdata.bin and
/// PREFIXindex.json, and returns the data file's size. InvalidArgument for a
/// bool tensor holding a byte other than 0 or 1.
std::uint64_t write_tensor_items(ArtifactWriter& out, const std::string& prefix, std::size_t count,
                                 const std::function<const Tensor&(std::size_t)>& item);
/// Reads what write_tensor_items wrote, checking there are `count` items,
/// each a known dtype and a shape whose bytes lie inside the data file at a
/// multiple of 64 bytes. Throws CorruptData naming the artifact and the file.
TensorItems read_tensor_items(const ArtifactReader& in, const std::string& prefix, std::size_t count);

}  // namespace detail

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
  requires(!ArrayElement<T> && !FixedArray<T> && !std::is_same_v<T, std::string> && !std::is_same_v<T, Tensor> &&
           !(Described<T> && Columnar<T>) && Materializable<T>)
struct materializer<std::vector<T>> {
  static constexpr std::string_view name = "amphora.list";
  static constexpr int version = 1;
  static void save(const std::vector<T>& items, ArtifactWriter& out) {
    out.meta()["count"] = items.size();
    // Children are whole artifacts, each hashed and written to files of its
    // own: saved side by side, they keep every core busy.
    parallel_for(items.size(), [&](std::size_t i) { out.save_part(detail::child_role("items/", i), items[i]); });
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
    if (value) out.save_part("value", *value);
  }
  static std::optional<T> load(const ArtifactReader& in) {
    if (!detail::check_optional(in)) return std::nullopt;
    return in.load_child<T>("value");
  }
  static void validate(const ArtifactReader& in) { (void)detail::check_optional(in); }
};

/// A fixed-size array of values that are not numbers: an amphora.list of N.
template <class T, std::size_t N>
  requires(!FixedArray<std::array<T, N>> && Materializable<T>)
struct materializer<std::array<T, N>> {
  static constexpr std::string_view name = "amphora.list";
  static constexpr int version = 1;
  static void save(const std::array<T, N>& items, ArtifactWriter& out) {
    out.meta()["count"] = N;
    parallel_for(N, [&](std::size_t i) { out.save_part(detail::child_role("items/", i), items[i]); });
  }
  static std::array<T, N> load(const ArtifactReader& in) {
    validate(in);
    auto loaded = detail::load_children<T>(in, "items/", N);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::array<T, N>{std::move(*loaded[I])...};
    }(std::make_index_sequence<N>{});
  }
  static void validate(const ArtifactReader& in) {
    const std::size_t count = detail::checked_count(in, "items/");
    if (count != N)
      throw TypeMismatch(in.label() + " holds a list of " + std::to_string(count) + " items, not the " +
                         std::to_string(N) + " of " + type_display_name(typeid(std::array<T, N>)));
  }
};

// ---------------------------------------------------------------------------
// Pairs and tuples: "amphora.tuple", element I under the name "I", inline in
// meta "fields" when it is a small JSON-exact value (as a declared struct's
// members are), else as child artifact "I".

namespace detail {

void check_tuple_size(const ArtifactReader& in, std::size_t size, const std::type_info& declared);
/// The element `index` of a tuple, inline or as a child; CorruptData when neither.
template <class E>
E load_tuple_element(const ArtifactReader& in, const nlohmann::json& fields, std::size_t index) {
  const std::string key = std::to_string(index);
  if (auto it = fields.find(key); it != fields.end()) return from_inline<E>(*it, in, key);
  if (!in.has_child(key)) throw CorruptData(in.label() + " stores no element " + key + " of its tuple");
  if constexpr (is_optional<E>::value)
    return in.load_child<typename E::value_type>(key);
  else
    return in.load_child<E>(key);
}

template <class Tuple>
void save_tuple(const Tuple& value, ArtifactWriter& out) {
  constexpr std::size_t size = std::tuple_size_v<Tuple>;
  nlohmann::json fields = nlohmann::json::object();
  std::vector<std::function<void()>> children;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    auto one = [&](auto index, const auto& element) {
      using E = std::decay_t<decltype(element)>;
      const std::string key = std::to_string(decltype(index)::value);
      if (auto inline_value = to_inline(element)) {
        fields[key] = std::move(*inline_value);
      } else if constexpr (is_optional<E>::value) {
        children.emplace_back([&out, key, &element] { out.save_part(key, *element); });
      } else {
        children.emplace_back([&out, key, &element] { out.save_part(key, element); });
      }
    };
    (one(std::integral_constant<std::size_t, I>{}, std::get<I>(value)), ...);
  }(std::make_index_sequence<size>{});
  parallel_for(children.size(), [&](std::size_t i) { children[i](); });
  out.meta()["count"] = size;
  out.meta()["fields"] = std::move(fields);
}

template <class Tuple>
Tuple load_tuple(const ArtifactReader& in) {
  check_tuple_size(in, std::tuple_size_v<Tuple>, typeid(Tuple));
  const nlohmann::json& fields = in.meta().at("fields");
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return Tuple(load_tuple_element<std::tuple_element_t<I, Tuple>>(in, fields, I)...);
  }(std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

}  // namespace detail

template <class... Es>
  requires(detail::StorableMember<Es> && ...)
struct materializer<std::tuple<Es...>> {
  static constexpr std::string_view name = "amphora.tuple";
  static constexpr int version = 1;
  static void save(const std::tuple<Es...>& value, ArtifactWriter& out) { detail::save_tuple(value, out); }
  static std::tuple<Es...> load(const ArtifactReader& in) { return detail::load_tuple<std::tuple<Es...>>(in); }
  static void validate(const ArtifactReader& in) { detail::check_tuple_size(in, sizeof...(Es), typeid(std::tuple<Es...>)); }
};

template <class A, class B>
  requires(detail::StorableMember<A> && detail::StorableMember<B>)
struct materializer<std::pair<A, B>> {
  static constexpr std::string_view name = "amphora.tuple";
  static constexpr int version = 1;
  static void save(const std::pair<A, B>& value, ArtifactWriter& out) { detail::save_tuple(value, out); }
  static std::pair<A, B> load(const ArtifactReader& in) { return detail::load_tuple<std::pair<A, B>>(in); }
  static void validate(const ArtifactReader& in) { detail::check_tuple_size(in, 2, typeid(std::pair<A, B>)); }
};

// ---------------------------------------------------------------------------
// Variants: "amphora.variant", meta "index" (which alternative, from 0) and
// the value: inline in meta "value" when it is a small JSON-exact value,
// else child artifact "value"; std::monostate stores nothing.

namespace detail {

/// The stored alternative's index, checked against `alternatives` and the
/// children; `inline_value` is set to meta "value" when there is one.
std::size_t check_variant(const ArtifactReader& in, std::size_t alternatives, const std::type_info& declared,
                          const nlohmann::json** inline_value);

template <class A>
constexpr bool storable_alternative() {
  return std::is_same_v<A, std::monostate> || (!is_optional<A>::value && Materializable<A>);
}

}  // namespace detail

template <class... As>
  requires(detail::storable_alternative<As>() && ...)
struct materializer<std::variant<As...>> {
  using Variant = std::variant<As...>;
  static constexpr std::string_view name = "amphora.variant";
  static constexpr int version = 1;
  static void save(const Variant& value, ArtifactWriter& out) {
    if (value.valueless_by_exception()) throw InvalidArgument("a std::variant that is valueless by exception cannot be saved");
    out.meta()["index"] = value.index();
    std::visit(
        [&](const auto& alternative) {
          using A = std::decay_t<decltype(alternative)>;
          if constexpr (!std::is_same_v<A, std::monostate>) {
            if (auto inline_value = detail::to_inline(alternative))
              out.meta()["value"] = std::move(*inline_value);
            else
              out.save_part("value", alternative);
          }
        },
        value);
  }
  static Variant load(const ArtifactReader& in) {
    const nlohmann::json* inline_value = nullptr;
    const std::size_t index = detail::check_variant(in, sizeof...(As), typeid(Variant), &inline_value);
    return load_alternative(in, index, inline_value, std::index_sequence_for<As...>{});
  }
  static void validate(const ArtifactReader& in) {
    const nlohmann::json* inline_value = nullptr;
    (void)detail::check_variant(in, sizeof...(As), typeid(Variant), &inline_value);
  }

 private:
  template <std::size_t... I>
  static Variant load_alternative(const ArtifactReader& in, std::size_t index, const nlohmann::json* inline_value,
                                  std::index_sequence<I...>) {
    std::optional<Variant> out;
    auto one = [&](auto i) {
      constexpr std::size_t k = decltype(i)::value;
      using A = std::variant_alternative_t<k, Variant>;
      if (index != k) return;
      if constexpr (std::is_same_v<A, std::monostate>) {
        if (inline_value || in.has_child("value"))
          throw CorruptData(in.label() + ": a variant holding std::monostate (alternative " + std::to_string(k) +
                            ") stores a value");
        out.emplace(std::in_place_index<k>);
      } else if (inline_value)
        out.emplace(std::in_place_index<k>, detail::from_inline<A>(*inline_value, in, "value"));
      else
        out.emplace(std::in_place_index<k>, in.load_child<A>("value"));
    };
    (one(std::integral_constant<std::size_t, I>{}), ...);
    return std::move(*out);
  }
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
    parallel_for(entries.size(), [&](std::size_t i) { out.save_part(child_role("values/", i), entries[i]->second); });
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
