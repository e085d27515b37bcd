#pragma once
// A std::vector of a struct declared with AMPHORA_MATERIALIZE is a record
// list, "amphora.record_list", when every member has a column kind: stored
// column by column, one payload per member (nested structs as nested
// columns), not one artifact per element. A struct with a member of no
// column kind (a table, a sparse matrix, a std::variant, a type with a
// materializer of its own, ...) is stored as an amphora.list instead, one
// struct artifact per element: the choice is made here, at compile time,
// and a load expects that layout (the other is a TypeMismatch).
//
//   member type                     column files (PATH is the member's name,
//                                   "outer/inner" for a nested struct's)
//   number or bool                  PATH.npy
//   std::array of numbers           PATH.npy of shape (rows, N[, M...]): fixed width
//   std::string                     PATH.offsets.npy + PATH.bytes (merged)
//   nlohmann::json                  PATH.json.offsets.npy + PATH.json.bytes (canonical text per record)
//   amphora::Tensor                 PATH.data.bin + PATH.index.json (dtype and shape per row)
//   std::vector<E> of any of these  PATH.offsets.npy + the column of E at PATH.values
//                                   (numbers: PATH.values.npy; structs: PATH.values/...)
//   std::map/unordered_map<std::string, V>
//                                   PATH.offsets.npy + keys at PATH.keys + the column of V at PATH.values
//   std::optional of the above      PATH.valid.npy (bool) + the column of the value
//   std::pair / std::tuple          a column per element under PATH/0, PATH/1, ...
//   declared struct                 its own columns under PATH/
//
// Records evolve as single structs do (docs/FORMAT.md §7.9): a member with
// no column loads as its default, columns no member names are ignored,
// AMPHORA_RENAMED finds a column under its old name, and a column stored as
// another type is a TypeMismatch naming it.
//
// RecordList<T> reads element i without loading the others.

#include <amphora/export.hpp>
#include <amphora/describe.hpp>

#include <array>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
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
/// The last of a ragged column's offsets (0 when there are none or it is
/// negative: check_offsets then reports them), i.e. how many values it holds.
std::uint64_t offsets_end(const ArrayView& offsets);
/// Whether the record list stores anything for the column at `path`: a
/// payload file PATH.* or PATH/*.
bool column_stored(const ArtifactReader& in, const std::string& path);
/// Maps array column file `file`, of `rows` rows of shape `row_shape` (empty
/// for one number per row) and elements of `dtype`. Throws TypeMismatch,
/// naming the file, what it holds and `declared` (the member's type), when
/// it holds other elements or rows of another shape, CorruptData when
/// damaged or of another row count.
ArrayView read_column_array(const ArtifactReader& in, const std::string& file, DType dtype,
                            std::span<const std::int64_t> row_shape, std::size_t rows, const std::type_info& declared);
/// The version of the struct whose columns are at `path`, as saved: meta
/// "struct_versions", else for the record itself "element_version", else
/// `declared` (saved before versions were recorded per struct column).
int stored_struct_version(const ArtifactReader& in, const std::string& path, int declared);
/// The Unsupported of struct column `path` saved by a newer version of its struct.
[[noreturn]] void newer_struct_version(const ArtifactReader& in, const std::string& path, int stored, int declared);
/// The TypeMismatch of a member whose column is stored, but not as its
/// declared type needs (`why` is what the column reader found missing).
[[noreturn]] void column_type_mismatch(const ArtifactReader& in, const std::string& path, const std::type_info& declared,
                                       const std::string& why);

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
      array = read_column_array(in, path + ".npy", dtype_of<M>::value, {}, n, typeid(M));
    }
    M get(std::size_t i) const {
      M v;
      std::memcpy(&v, array.bytes().data() + i * sizeof(M), sizeof(M));
      return v;
    }
  };
};

// Fixed-size arrays of numbers: one array with a row of shape (N[, M...]) per record.
template <FixedArray A>
struct Column<A> {
  using Scalar = typename FixedShape<A>::Scalar;
  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    std::vector<std::byte> bytes(n * sizeof(A));
    for (std::size_t i = 0; i < n; ++i) {
      const A& row = get(i);
      std::memcpy(bytes.data() + i * sizeof(A), row.data(), sizeof(A));
    }
    std::vector<std::int64_t> shape = FixedShape<A>::dims();
    shape.insert(shape.begin(), static_cast<std::int64_t>(n));
    out.write_array(path + ".npy", dtype_of<Scalar>::value, shape, ConstBytes(bytes.data(), bytes.size()));
  }
  struct Reader {
    ArrayView array;
    void open(const ArtifactReader& in, const std::string& path, std::size_t n) {
      array = read_column_array(in, path + ".npy", dtype_of<Scalar>::value, FixedShape<A>::dims(), n, typeid(A));
    }
    A get(std::size_t i) const {
      A v;
      std::memcpy(v.data(), array.bytes().data() + i * sizeof(A), sizeof(A));
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

// Tensors of any dtype and shape, one per record: the tensor-items layout
// of amphora.tensor_list under the column's path.
template <>
struct Column<Tensor> {
  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    write_tensor_items(out, path + ".", n, [&](std::size_t i) -> const Tensor& { return get(i); });
  }
  struct Reader {
    TensorItems items;
    void open(const ArtifactReader& in, const std::string& path, std::size_t n) {
      items = read_tensor_items(in, path + ".", n);
    }
    Tensor get(std::size_t i) const { return items.get(i); }
  };
};

// Ragged columns: offsets per record into one column of values.
template <Columnar E>
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
      const std::uint64_t total = offsets_end(offsets);
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

/// Throws CorruptData unless the keys of every record are sorted and unique.
void check_map_column_keys(const ArtifactReader& in, const std::string& path, std::span<const std::int64_t> offsets,
                           const StringsView& keys);

// Maps with string keys: offsets per record into one column of keys
// (sorted within each record) and one of values.
template <class Map>
  requires(is_string_keyed_map<Map>::value && Columnar<typename Map::mapped_type>)
struct Column<Map> {
  using V = typename Map::mapped_type;
  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    std::vector<std::int64_t> offsets(n + 1, 0);
    std::vector<const typename Map::value_type*> flat;
    for (std::size_t i = 0; i < n; ++i) {
      const Map& m = get(i);
      const std::size_t first = flat.size();
      for (const auto& e : m) flat.push_back(&e);
      std::sort(flat.begin() + static_cast<std::ptrdiff_t>(first), flat.end(),
                [](const auto* a, const auto* b) { return a->first < b->first; });
      offsets[i + 1] = static_cast<std::int64_t>(flat.size());
    }
    std::vector<std::string_view> keys(flat.size());
    for (std::size_t k = 0; k < flat.size(); ++k) keys[k] = flat[k]->first;
    out.write_array<std::int64_t>(path + ".offsets.npy", offsets);
    out.write_strings(path + ".keys", keys);
    Column<V>::write(out, path + ".values", flat.size(), [&](std::size_t k) -> const V& { return flat[k]->second; });
  }
  struct Reader {
    ArrayView offsets;
    StringsView keys;
    typename Column<V>::Reader values;
    void open(const ArtifactReader& in, const std::string& path, std::size_t n) {
      offsets = in.read_array(path + ".offsets.npy", DType::int64, 1);
      const std::uint64_t total = offsets_end(offsets);
      keys = in.read_strings(path + ".keys");
      check_rows(in, path + ".keys", keys.size(), static_cast<std::size_t>(total));
      values.open(in, path + ".values", static_cast<std::size_t>(total));
      check_offsets(in, path + ".offsets.npy", offsets.values<std::int64_t>(), n, total);
      check_map_column_keys(in, path, offsets.values<std::int64_t>(), keys);
    }
    Map get(std::size_t i) const {
      auto o = offsets.values<std::int64_t>();
      Map out;
      for (auto k = o[i]; k < o[i + 1]; ++k)
        out.emplace(std::string(keys[static_cast<std::size_t>(k)]), values.get(static_cast<std::size_t>(k)));
      return out;
    }
  };
};

template <Columnar E>
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

// Pairs and tuples: a column per element, under PATH/0, PATH/1, ...
template <class Tuple, class... Es>
struct ElementColumns {
  using Readers = std::tuple<typename Column<Es>::Reader...>;
  static constexpr auto indices = std::index_sequence_for<Es...>{};

  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    write_each(out, path, n, get, indices);
  }
  struct Reader {
    Readers readers;
    void open(const ArtifactReader& in, const std::string& path, std::size_t n) { open_each(in, path, n, indices); }
    Tuple get(std::size_t i) const { return get_each(i, indices); }

   private:
    template <std::size_t... I>
    void open_each(const ArtifactReader& in, const std::string& path, std::size_t n, std::index_sequence<I...>) {
      (std::get<I>(readers).open(in, column_path(path, std::to_string(I)), n), ...);
    }
    template <std::size_t... I>
    Tuple get_each(std::size_t i, std::index_sequence<I...>) const {
      return Tuple(std::get<I>(readers).get(i)...);
    }
  };

 private:
  template <class Get, std::size_t... I>
  static void write_each(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get,
                         std::index_sequence<I...>) {
    (Column<Es>::write(out, column_path(path, std::to_string(I)), n,
                       [&](std::size_t i) -> const Es& { return std::get<I>(get(i)); }),
     ...);
  }
};

template <Columnar... Es>
struct Column<std::tuple<Es...>> : ElementColumns<std::tuple<Es...>, Es...> {};
template <Columnar A, Columnar B>
struct Column<std::pair<A, B>> : ElementColumns<std::pair<A, B>, A, B> {};

template <Described M>
constexpr bool members_columnar() {
  return std::apply([](const auto&... f) { return (Columnar<typename std::decay_t<decltype(f)>::type> && ...); },
                    description_of<M>().fields);
}

// A declared struct: a column per member under PATH/. Loaded by the
// evolution rules: a member with no column keeps its default, a renamed
// member is read under its old name, a member stored as another type is a
// TypeMismatch naming it.
template <Described M>
  requires(members_columnar<M>())
struct Column<M> {
  template <class Get>
  static void write(ArtifactWriter& out, const std::string& path, std::size_t n, const Get& get) {
    out.meta()["member_order"][path] = member_names<M>();
    out.meta()["struct_versions"][path] = description_of<M>().version;
    std::apply(
        [&](const auto&... field) {
          auto one = [&](const auto& f) {
            using F = typename std::decay_t<decltype(f)>::type;
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
  static constexpr std::size_t kMembers = std::tuple_size_v<Fields>;
  using Readers = decltype(readers_of(std::declval<Fields>(), std::make_index_sequence<kMembers>{}));

  struct Reader {
    Readers readers;
    std::array<bool, kMembers> stored{};
    // For amphora_migrate: where these records are and the version saved.
    std::shared_ptr<const StoredColumns> columns;
    std::string path;
    std::size_t rows = 0;
    int stored_version = description_of<M>().version;
    void open(const ArtifactReader& in, const std::string& at, std::size_t n) {
      open_each(in, at, n, std::make_index_sequence<kMembers>{});
      stored_version = stored_struct_version(in, at, description_of<M>().version);
      if (stored_version > description_of<M>().version) newer_struct_version(in, at, stored_version, description_of<M>().version);
      if constexpr (HasMigration<M>) {
        if (stored_version < description_of<M>().version) {
          columns = std::make_shared<const StoredColumns>(in);
          path = at;
          rows = n;
        }
      }
    }
    M get(std::size_t i) const { return get_each(i, std::make_index_sequence<kMembers>{}); }

   private:
    // The column member `name` is stored under: its own, an old name
    // AMPHORA_RENAMED gives it, or none (added after the records were saved).
    static std::optional<std::string> stored_path(const ArtifactReader& in, const std::string& path, std::string_view name) {
      std::string own = column_path(path, name);
      if (column_stored(in, own)) return own;
      if constexpr (HasRenames<M>) {
        for (const auto& [before, now] : amphora_renames(static_cast<const M*>(nullptr)))
          if (now == name && column_stored(in, column_path(path, before))) return column_path(path, before);
      }
      return std::nullopt;
    }
    template <std::size_t... I>
    void open_each(const ArtifactReader& in, const std::string& path, std::size_t n, std::index_sequence<I...>) {
      constexpr auto fields = description_of<M>().fields;
      auto one = [&](auto& reader, const auto& f, bool& is_stored) {
        using F = typename std::decay_t<decltype(f)>::type;
        auto at = stored_path(in, path, f.name);
        if (!at) return;
        try {
          reader.open(in, *at, n);
        } catch (const NotFound& e) {
          column_type_mismatch(in, *at, typeid(F), e.what());
        }
        is_stored = true;
      };
      (one(std::get<I>(readers), std::get<I>(fields), stored[I]), ...);
    }
    template <std::size_t... I>
    M get_each(std::size_t i, std::index_sequence<I...>) const {
      constexpr auto fields = description_of<M>().fields;
      M value{};
      ((stored[I] ? (void)(value.*(std::get<I>(fields).member) = std::get<I>(readers).get(i)) : (void)0), ...);
      if constexpr (HasMigration<M>)
        if (columns) amphora_migrate(value, StoredStruct(*columns, path, i, rows, stored_version));
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
  requires Columnar<T>
class RecordList {
 public:
  /// Opens `in`; a member whose column is missing keeps its default (see
  /// above). Throws TypeMismatch when a column is stored as another type,
  /// CorruptData when one has the wrong length or invalid offsets, and
  /// Unsupported when the records were written by a newer version of T.
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
  requires Columnar<T>
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
