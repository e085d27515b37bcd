#pragma once
// A std::vector of a struct declared with AMPHORA_MATERIALIZE is a record
// list, "amphora.record_list": stored column by column, one payload per
// member (nested structs as nested columns), not one artifact per element.
//
//   member type                     column files (PATH is the member's name,
//                                   "outer/inner" for a nested struct's)
//   number or bool                  PATH.npy
//   std::string                     PATH.offsets.npy + PATH.bytes (merged)
//   nlohmann::json                  PATH.json.offsets.npy + PATH.json.bytes (canonical text per record)
//   std::vector<E> of any of these  PATH.offsets.npy + the column of E at PATH.values
//                                   (numbers: PATH.values.npy; structs: PATH.values/...)
//   std::optional of the above      PATH.valid.npy (bool) + the column of the value
//   declared struct                 its own columns under PATH/
//
// RecordList<T> reads element i without loading the others.

#include <amphora/export.hpp>
#include <amphora/describe.hpp>

#include <functional>
#include <tuple>
#include <utility>

AMPHORA_API_BEGIN

namespace amphora {

namespace detail {

inline std::string column_path(const std::string& prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : prefix + "/" + std::string(name);
}

/// Validates a ragged column's offsets: `rows` + 1 of them, from 0, never
/// decreasing, ending at `values`. Throws CorruptData naming `where`.
void check_offsets(const ArtifactReader& in, const std::string& where, std::span<const std::int64_t> offsets,
                   std::size_t rows, std::uint64_t values);
/// Throws CorruptData unless column `where` holds `rows` entries.
void check_rows(const ArtifactReader& in, const std::string& where, std::uint64_t have, std::size_t rows);

template <class M>
struct Column;

// Numbers and bools: one array.
template <ArrayElement M>
struct Column<M> {
  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    // std::vector<bool> packs bits; bools are stored one byte each.
    using Stored = std::conditional_t<std::is_same_v<M, bool>, std::uint8_t, M>;
    std::vector<Stored> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<Stored>(get(i));
    const std::int64_t rows = static_cast<std::int64_t>(n);
    out.write_array(path + ".npy", dtype_of<M>::value, std::span<const std::int64_t>(&rows, 1),
                    ConstBytes(reinterpret_cast<const std::byte*>(values.data()), n * sizeof(Stored)));
  }
  struct Reader {
    ArrayView array;
    void open(const ArtifactReader& in, const std::string& path, std::size_t n) {
      array = in.read_array(path + ".npy", dtype_of<M>::value, 1);
      check_rows(in, path + ".npy", array.size(), n);
    }
    M get(std::size_t i) const {
      M v;
      std::memcpy(&v, array.bytes().data() + i * sizeof(M), sizeof(M));
      return v;
    }
  };
};

template <>
struct Column<std::string> {
  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    std::vector<std::string_view> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = get(i);
    out.write_strings(path, values);
  }
  struct Reader {
    StringsView strings;
    void open(const ArtifactReader& in, const std::string& path, std::size_t n) {
      strings = in.read_strings(path);
      check_rows(in, path, strings.size(), n);
    }
    std::string get(std::size_t i) const { return std::string(strings[i]); }
  };
};

template <>
struct Column<nlohmann::json> {
  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    std::vector<std::string> texts(n);
    for (std::size_t i = 0; i < n; ++i) texts[i] = canonical_json(get(i));
    out.write_strings(path + ".json", texts);
  }
  struct Reader {
    StringsView texts;
    std::string label, path;
    void open(const ArtifactReader& in, const std::string& p, std::size_t n) {
      texts = in.read_strings(p + ".json");
      check_rows(in, p + ".json", texts.size(), n);
      label = in.label();
      path = p;
    }
    nlohmann::json get(std::size_t i) const {
      try {
        return parse_untrusted_json(texts[i]);
      } catch (const CorruptData& e) {
        throw CorruptData(label + ": record " + std::to_string(i) + " of column '" + path + "' is not valid JSON (" +
                          e.what() + ")");
      }
    }
  };
};

// Ragged columns: offsets per record into one column of values.
template <class E>
  requires requires { typename Column<E>::Reader; }
struct Column<std::vector<E>> {
  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    std::vector<std::int64_t> offsets(n + 1, 0);
    std::vector<const E*> flat;
    for (std::size_t i = 0; i < n; ++i) {
      const std::vector<E>& v = get(i);
      offsets[i + 1] = offsets[i] + static_cast<std::int64_t>(v.size());
      if constexpr (!std::is_same_v<E, bool>)
        for (const auto& x : v) flat.push_back(&x);
    }
    out.write_array<std::int64_t>(path + ".offsets.npy", offsets);
    if constexpr (std::is_same_v<E, bool>) {  // std::vector<bool> has no element addresses
      std::vector<bool> bits;
      for (std::size_t i = 0; i < n; ++i) bits.insert(bits.end(), get(i).begin(), get(i).end());
      Column<bool>::write(out, path + ".values", bits.size(), [&](std::size_t k) { return static_cast<bool>(bits[k]); });
    } else {
      Column<E>::write(out, path + ".values", flat.size(), [&](std::size_t k) -> const E& { return *flat[k]; });
    }
  }
  struct Reader {
    ArrayView offsets;
    typename Column<E>::Reader values;
    void open(const ArtifactReader& in, const std::string& path, std::size_t n) {
      offsets = in.read_array(path + ".offsets.npy", DType::int64, 1);
      std::uint64_t total = offsets.size() == 0 ? 0 : static_cast<std::uint64_t>(offsets.values<std::int64_t>().back());
      if (offsets.size() > 0 && offsets.values<std::int64_t>().back() < 0) total = 0;
      values.open(in, path + ".values", static_cast<std::size_t>(total));
      check_offsets(in, path + ".offsets.npy", offsets.values<std::int64_t>(), n, total);
    }
    std::vector<E> get(std::size_t i) const {
      auto o = offsets.values<std::int64_t>();
      std::vector<E> out;
      out.reserve(static_cast<std::size_t>(o[i + 1] - o[i]));
      for (auto k = o[i]; k < o[i + 1]; ++k) out.push_back(values.get(static_cast<std::size_t>(k)));
      return out;
    }
  };
};

template <class E>
struct Column<std::optional<E>> {
  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    Column<bool>::write(out, path + ".valid", n, [&](std::size_t i) { return get(i).has_value(); });
    static const E empty{};
    Column<E>::write(out, path, n, [&](std::size_t i) -> const E& { return get(i) ? *get(i) : empty; });
  }
  struct Reader {
    typename Column<bool>::Reader valid;
    typename Column<E>::Reader values;
    void open(const ArtifactReader& in, const std::string& path, std::size_t n) {
      valid.open(in, path + ".valid", n);
      values.open(in, path, n);
    }
    std::optional<E> get(std::size_t i) const {
      if (!valid.get(i)) return std::nullopt;
      return values.get(i);
    }
  };
};

template <Described M>
struct Column<M> {
  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    std::apply(
        [&](const auto&... field) {
          auto one = [&](const auto& f) {
            using F = typename std::decay_t<decltype(f)>::type;
            static_assert(requires { typename Column<F>::Reader; },
                          "amphora: a member of a struct stored in a record list must be a number, bool, string, "
                          "nlohmann::json, a struct declared with AMPHORA_MATERIALIZE, or a std::vector or "
                          "std::optional of those");
            Column<F>::write(out, column_path(path, f.name), n, [&](std::size_t i) -> const F& {
              return get(i).*(f.member);
            });
          };
          (one(field), ...);
        },
        description_of<M>().fields);
  }

  template <class Fields, std::size_t... I>
  static auto readers_of(const Fields&, std::index_sequence<I...>)
      -> std::tuple<typename Column<typename std::tuple_element_t<I, Fields>::type>::Reader...>;
  using Fields = decltype(description_of<M>().fields);
  using Readers = decltype(readers_of(std::declval<Fields>(), std::make_index_sequence<std::tuple_size_v<Fields>>{}));

  struct Reader {
    Readers readers;
    void open(const ArtifactReader& in, const std::string& path, std::size_t n) {
      open_each(in, path, n, std::make_index_sequence<std::tuple_size_v<Fields>>{});
    }
    M get(std::size_t i) const { return get_each(i, std::make_index_sequence<std::tuple_size_v<Fields>>{}); }

   private:
    template <std::size_t... I>
    void open_each(const ArtifactReader& in, const std::string& path, std::size_t n, std::index_sequence<I...>) {
      constexpr auto fields = description_of<M>().fields;
      (std::get<I>(readers).open(in, column_path(path, std::get<I>(fields).name), n), ...);
    }
    template <std::size_t... I>
    M get_each(std::size_t i, std::index_sequence<I...>) const {
      constexpr auto fields = description_of<M>().fields;
      M value{};
      ((value.*(std::get<I>(fields).member) = std::get<I>(readers).get(i)), ...);
      return value;
    }
  };
};

/// Checks the record list's metadata names element type `name` at most
/// `version`, and returns its record count.
std::size_t check_record_list(const ArtifactReader& in, std::string_view name, int version);

}  // namespace detail

/// The records of an amphora.record_list artifact, read one at a time: every
/// column is mapped and validated when opened, and operator[] builds one
/// record from its columns. Copies share the mappings; thread-safe for reading.
template <Described T>
class RecordList {
 public:
  /// Opens `in`. Throws CorruptData when a column is missing, the wrong
  /// dtype or length, or its offsets are invalid; Unsupported when the
  /// records were written by a newer format version of T.
  static RecordList open(const ArtifactReader& in) {
    RecordList list;
    list.size_ = detail::check_record_list(in, description_of<T>().name, description_of<T>().version);
    list.columns_.open(in, "", list.size_);
    return list;
  }
  std::size_t size() const { return size_; }
  /// Record `i` (unchecked index).
  T operator[](std::size_t i) const { return columns_.get(i); }
  /// Record `i`; throws InvalidArgument when out of range.
  T at(std::size_t i) const {
    if (i >= size_) throw InvalidArgument("record " + std::to_string(i) + " is out of range (" + std::to_string(size_) + " records)");
    return columns_.get(i);
  }
  std::vector<T> all() const {
    std::vector<T> out;
    out.reserve(size_);
    for (std::size_t i = 0; i < size_; ++i) out.push_back(columns_.get(i));
    return out;
  }

 private:
  std::size_t size_ = 0;
  typename detail::Column<T>::Reader columns_;
};

template <Described T>
struct materializer<std::vector<T>> {
  static constexpr std::string_view name = "amphora.record_list";
  static constexpr int version = 1;
  static void save(const std::vector<T>& records, ArtifactWriter& out) {
    out.meta()["element"] = description_of<T>().name;
    out.meta()["element_version"] = description_of<T>().version;
    out.meta()["count"] = records.size();
    detail::Column<T>::write(out, "", records.size(), [&](std::size_t i) -> const T& { return records[i]; });
  }
  static std::vector<T> load(const ArtifactReader& in) { return RecordList<T>::open(in).all(); }
  static void validate(const ArtifactReader& in) { (void)RecordList<T>::open(in); }
};

}  // namespace amphora

AMPHORA_API_END
