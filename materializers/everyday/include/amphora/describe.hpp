#pragma once
// Structs taught to Amphora by their fields, in one line:
//
//   struct Model { nlohmann::json config; amphora::Tensor weights; std::vector<std::string> vocab; };
//   AMPHORA_MATERIALIZE(Model, "myorg.model", 1, config, weights, vocab)
//
// Put the line beside the struct, in the struct's own namespace (Amphora
// finds it by argument-dependent lookup). Members stored exactly as JSON
// (numbers, bools, short UTF-8 strings, small JSON values, optionals of
// those) go inline into the manifest's "fields" object, where `amphora show`
// displays them; numbers and vectors or std::arrays of numbers that JSON
// does not hold (a NaN, a vector) go, up to 64 KiB, into the struct's own
// MEMBER.npy; every other member (tensors, larger arrays, maps, declared
// structs, a long or non-UTF-8 string) becomes a child artifact named after
// the member. A std::vector of a declared struct is a record list, stored
// column by column (amphora/record_list.hpp).

#include <amphora/export.hpp>
#include <amphora/everyday.hpp>
#include <amphora/registry.hpp>

#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <typeindex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

AMPHORA_API_BEGIN

namespace amphora {

/// One declared member: its stable name and where it lives in C.
template <class C, class M>
struct Field {
  using type = M;
  std::string_view name;
  M C::*member;
};

/// What AMPHORA_MATERIALIZE declares: the stable name, the format version
/// and the fields of T.
template <class T, class... Fs>
struct StructDescription {
  std::string_view name;
  int version;
  std::tuple<Fs...> fields;
};

namespace detail {

template <class T, class... Ms>
constexpr StructDescription<T, Field<T, Ms>...> describe_struct(std::string_view name, int version,
                                                               Field<T, Ms>... fields) {
  return {name, version, std::tuple<Field<T, Ms>...>(fields...)};
}

}  // namespace detail

namespace detail {

// Takes the checks AMPHORA_MATERIALIZE makes of each member, so that they
// run where the line stands.
constexpr int members_checked(auto...) { return 0; }

/// T's member names in declaration order (stored so that readers in other
/// languages can present the members in that order).
template <class T>
nlohmann::json member_names() {
  nlohmann::json names = nlohmann::json::array();
  std::apply([&](const auto&... f) { (names.push_back(f.name), ...); }, description_of<T>().fields);
  return names;
}

/// Numbers, std::vectors and std::arrays of numbers of at most this many
/// bytes that JSON does not hold inline (a NaN, a vector) are stored in the
/// struct's own payload as MEMBER.npy rather than as a child artifact: one
/// small file (its data 64-byte aligned, as numpy aligns it) instead of an
/// artifact with a page-aligned file of its own.
inline constexpr std::size_t kMaxMemberArrayBytes = 64 * 1024;

/// Member types stored as MEMBER.npy when small: numbers, std::vector and
/// std::array of numbers, std::vector of such arrays.
template <class M>
struct MemberArray : std::false_type {};
template <ArrayElement E>
struct MemberArray<E> : std::true_type {
  using Scalar = E;
  static std::vector<std::int64_t> shape(const E&) { return {}; }
  static ConstBytes bytes(const E& v) { return ConstBytes(reinterpret_cast<const std::byte*>(&v), sizeof v); }
};
template <ArrayElement E, class A>
  requires(!std::is_same_v<E, bool>)  // std::vector<bool> packs bits
struct MemberArray<std::vector<E, A>> : std::true_type {
  using Scalar = E;
  static std::vector<std::int64_t> shape(const std::vector<E, A>& v) { return {static_cast<std::int64_t>(v.size())}; }
  static ConstBytes bytes(const std::vector<E, A>& v) { return std::as_bytes(std::span<const E>(v)); }
};
template <FixedArray F>
struct MemberArray<F> : std::true_type {
  using Scalar = typename FixedShape<F>::Scalar;
  static std::vector<std::int64_t> shape(const F&) { return FixedShape<F>::dims(); }
  static ConstBytes bytes(const F& v) { return ConstBytes(reinterpret_cast<const std::byte*>(v.data()), sizeof v); }
};
template <FixedArray F, class A>
struct MemberArray<std::vector<F, A>> : std::true_type {
  using Scalar = typename FixedShape<F>::Scalar;
  static std::vector<std::int64_t> shape(const std::vector<F, A>& v) {
    std::vector<std::int64_t> s = FixedShape<F>::dims();
    s.insert(s.begin(), static_cast<std::int64_t>(v.size()));
    return s;
  }
  static ConstBytes bytes(const std::vector<F, A>& v) {
    return ConstBytes(reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(F));
  }
};

/// The file a member stored in its struct's payload is in.
inline std::string member_file(std::string_view name) { return std::string(name) + ".npy"; }

/// Writes `value` as MEMBER.npy when it is a member array of at most
/// kMaxMemberArrayBytes; false (nothing written) otherwise.
template <class M>
bool write_member_array(ArtifactWriter& out, std::string_view name, const M& value) {
  if constexpr (MemberArray<M>::value) {
    const ConstBytes bytes = MemberArray<M>::bytes(value);
    if (bytes.size() > kMaxMemberArrayBytes) return false;
    out.write_array(member_file(name), dtype_of<typename MemberArray<M>::Scalar>::value, MemberArray<M>::shape(value), bytes);
    return true;
  } else {
    (void)out, (void)name, (void)value;
    return false;
  }
}

/// Maps array file `file` of a struct, checking it holds `dtype` elements in
/// `shape` (-1: any length): TypeMismatch naming `field`, what the file holds
/// and `declared` otherwise.
ArrayView read_member_array(const ArtifactReader& in, const std::string& file, std::string_view field, DType dtype,
                            std::span<const std::int64_t> shape, const std::type_info& declared);

/// Member `field` of type M from its struct's array file `file`.
template <class M>
M load_member_array(const ArtifactReader& in, const std::string& file, std::string_view field) {
  if constexpr (is_optional<M>::value) {
    return load_member_array<typename M::value_type>(in, file, field);
  } else if constexpr (MemberArray<M>::value) {
    using Scalar = typename MemberArray<M>::Scalar;
    std::vector<std::int64_t> want = MemberArray<M>::shape(M{});
    if constexpr (is_std_vector<M>::value) want[0] = -1;
    const ArrayView a = read_member_array(in, file, field, dtype_of<Scalar>::value, want, typeid(M));
    M value{};
    if constexpr (is_std_vector<M>::value) value.resize(static_cast<std::size_t>(a.shape()[0]));
    ConstBytes into = MemberArray<M>::bytes(value);
    if (into.size() != a.bytes().size())
      throw CorruptData(in.label() + ": '" + file + "' holds " + std::to_string(a.bytes().size()) + " bytes, not " +
                        std::to_string(into.size()));
    if (!into.empty()) std::memcpy(const_cast<std::byte*>(into.data()), a.bytes().data(), into.size());
    return value;
  } else {
    throw TypeMismatch(in.label() + ": field '" + std::string(field) + "' is stored as the array file '" + file +
                       "', which the declared member type " + type_display_name(typeid(M)) + " cannot hold");
  }
}

template <class T>
void save_struct(const T& value, ArtifactWriter& out) {
  nlohmann::json fields = nlohmann::json::object();
  std::vector<std::function<void()>> children;  // saved side by side once the inline fields are set
  std::apply(
      [&](const auto&... field) {
        auto one = [&](const auto& f) {
          using M = typename std::decay_t<decltype(f)>::type;
          const M& member = value.*(f.member);
          if (auto inline_value = to_inline(member)) {
            fields[std::string(f.name)] = std::move(*inline_value);
          } else if constexpr (is_optional<M>::value) {  // engaged: an empty one is inline (null)
            if (!write_member_array(out, f.name, *member))
              children.emplace_back([&out, &f, &member] { out.save_part(f.name, *member); });
          } else {
            if (!write_member_array(out, f.name, member))
              children.emplace_back([&out, &f, &member] { out.save_part(f.name, member); });
          }
        };
        (one(field), ...);
        parallel_for(children.size(), [&](std::size_t i) { children[i](); });
      },
      description_of<T>().fields);
  out.meta()["fields"] = std::move(fields);
  out.meta()["members"] = member_names<T>();
}

/// The "fields" object of a declared struct's manifest; CorruptData when
/// missing or not an object.
const nlohmann::json& struct_fields(const ArtifactReader& in);

template <class T>
concept HasRenames = requires(const T* p) { amphora_renames(p); };

/// The name member `name` of T was stored under: its own, or the old name
/// AMPHORA_RENAMED gives it when only that one is in the artifact.
template <class T>
std::string_view stored_name(const ArtifactReader& in, const nlohmann::json& fields, std::string_view name) {
  if constexpr (HasRenames<T>) {
    auto stored = [&](std::string_view n) { return fields.contains(n) || in.has_child(n) || in.has_file(member_file(n)); };
    if (stored(name)) return name;
    for (const auto& [before, now] : amphora_renames(static_cast<const T*>(nullptr)))
      if (now == name && stored(before)) return before;
  }
  return name;
}

/// Loads child `role` as member `field` of type M; a child of another type
/// is a TypeMismatch naming the member.
template <class M>
M load_member_child(const ArtifactReader& in, std::string_view role, std::string_view field) {
  try {
    return in.load_child<M>(role);
  } catch (const TypeMismatch& e) {
    throw TypeMismatch("field '" + std::string(field) + "' (declared " + type_display_name(typeid(M)) + "): " + e.what());
  }
}

}  // namespace detail

namespace detail {

/// The columns of a record list that amphora_migrate looks up by stored
/// name, each opened once (on first use) and shared by every record.
/// Thread-safe.
class StoredColumns {
 public:
  explicit StoredColumns(ArtifactReader in) : in_(std::move(in)) {}
  const ArtifactReader& in() const { return in_; }
  /// The reader of column `path` (of `rows` entries) as an M's column.
  template <class M>
  const typename Column<M>::Reader& reader(const std::string& path, std::size_t rows) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto key = std::make_pair(path, std::type_index(typeid(M)));
    auto it = readers_.find(key);
    if (it == readers_.end()) {
      auto opened = std::make_shared<typename Column<M>::Reader>();
      opened->open(in_, path, rows);
      it = readers_.emplace(std::move(key), std::move(opened)).first;
    }
    return *static_cast<const typename Column<M>::Reader*>(it->second.get());
  }

 private:
  ArtifactReader in_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<std::string, std::type_index>, std::shared_ptr<void>> readers_;
};

bool column_stored(const ArtifactReader& in, const std::string& path);

}  // namespace detail

/// What a declared struct's artifact holds, for an `amphora_migrate`
/// function upgrading a value loaded from an older version of the struct
/// (AMPHORA_MATERIALIZE's version): a struct of its own, or one record of a
/// record list (its columns). Valid during that call only.
class StoredStruct {
 public:
  explicit StoredStruct(const ArtifactReader& in)
      : in_(in), fields_(&detail::struct_fields(in)), version_(in.format_version()) {}
  /// Record `row` of the `rows` at struct column `path` of a record list.
  StoredStruct(const detail::StoredColumns& columns, std::string path, std::size_t row, std::size_t rows, int version)
      : in_(columns.in()), columns_(&columns), path_(std::move(path)), row_(row), rows_(rows), version_(version) {}
  /// The version of the struct that was saved.
  int version() const { return version_; }
  /// Whether the stored value has a member `name` (inline, as a child, or as a column).
  bool has(std::string_view name) const {
    if (columns_) return detail::column_stored(in_, column(name));
    return fields_->contains(name) || in_.has_file(detail::member_file(name)) || in_.has_child(name);
  }
  /// The stored member `name` as an M. Throws NotFound when there is none,
  /// TypeMismatch when it is not an M.
  template <class M>
  M get(std::string_view name) const {
    if (columns_) return get_column<M>(name);
    if (auto it = fields_->find(name); it != fields_->end()) return detail::from_inline<M>(*it, in_, name);
    if (in_.has_file(detail::member_file(name))) return detail::load_member_array<M>(in_, detail::member_file(name), name);
    if (in_.has_child(name)) return detail::load_member_child<M>(in_, name, name);
    throw NotFound(in_.label() + " has no stored member '" + std::string(name) + "'");
  }
  const ArtifactReader& reader() const { return in_; }

 private:
  std::string column(std::string_view name) const {
    return path_.empty() ? std::string(name) : path_ + "/" + std::string(name);
  }
  template <class M>
  M get_column(std::string_view name) const {
    const std::string at = column(name);
    if (!detail::column_stored(in_, at))
      throw NotFound(in_.label() + " has no stored column '" + at + "' for record " + std::to_string(row_));
    if constexpr (Columnar<M>) {
      try {
        return columns_->reader<M>(at, rows_).get(row_);
      } catch (const NotFound& e) {
        throw TypeMismatch(in_.label() + ": column '" + at + "' is not stored as " + type_display_name(typeid(M)) +
                           " is (" + e.what() + ")");
      }
    } else {
      throw TypeMismatch(in_.label() + ": column '" + at + "' cannot be read as " + type_display_name(typeid(M)) +
                         ", which has no record-list column kind");
    }
  }

  const ArtifactReader& in_;
  const nlohmann::json* fields_ = nullptr;
  const detail::StoredColumns* columns_ = nullptr;
  std::string path_;
  std::size_t row_ = 0, rows_ = 0;
  int version_ = 0;
};

namespace detail {

template <class T>
concept HasMigration = requires(T& value, const StoredStruct& stored) { amphora_migrate(value, stored); };

// Loads a declared struct by the evolution rules (docs/FORMAT.md §7.9): a
// member the artifact lacks keeps its default initializer (it was added
// later); a stored member the struct no longer declares is ignored; a
// renamed member is read under its old name; a member stored as another
// type is a TypeMismatch naming it and both types. A value of an older
// version then goes through the struct's amphora_migrate, if it has one.
template <class T>
T load_struct(const ArtifactReader& in) {
  const nlohmann::json& fields = struct_fields(in);
  T value{};
  std::vector<std::function<void()>> children;  // loaded side by side, each into its own member
  std::apply(
      [&](const auto&... field) {
        auto one = [&](const auto& f) {
          using M = typename std::decay_t<decltype(f)>::type;
          M& member = value.*(f.member);
          const std::string_view stored = stored_name<T>(in, fields, f.name);
          if (auto it = fields.find(stored); it != fields.end()) {
            member = from_inline<M>(*it, in, f.name);
          } else if (in.has_file(member_file(stored))) {
            member = load_member_array<M>(in, member_file(stored), f.name);
          } else if (in.has_child(stored)) {
            if constexpr (is_optional<M>::value)
              children.emplace_back([&in, &f, &member, stored] {
                member = load_member_child<typename M::value_type>(in, stored, f.name);
              });
            else
              children.emplace_back([&in, &f, &member, stored] { member = load_member_child<M>(in, stored, f.name); });
          }
        };
        (one(field), ...);
        parallel_for(children.size(), [&](std::size_t i) { children[i](); });
      },
      description_of<T>().fields);
  if constexpr (HasMigration<T>)
    if (in.format_version() < description_of<T>().version) amphora_migrate(value, StoredStruct(in));
  return value;
}

template <class T>
void validate_struct(const ArtifactReader& in) {
  (void)struct_fields(in);
}

/// The (old, new) pairs of AMPHORA_RENAMED's arguments.
template <class... S>
constexpr auto rename_pairs(S... names) {
  static_assert(sizeof...(S) % 2 == 0, "AMPHORA_RENAMED takes pairs of names: \"old\", \"new\", ...");
  const std::array<std::string_view, sizeof...(S)> flat{std::string_view(names)...};
  std::array<std::pair<std::string_view, std::string_view>, sizeof...(S) / 2> pairs{};
  for (std::size_t i = 0; i < pairs.size(); ++i) pairs[i] = {flat[2 * i], flat[2 * i + 1]};
  return pairs;
}

/// True when every AMPHORA_RENAMED pair of T names a declared member as its
/// new name and a name no member has as its old one (a name is never reused).
template <class T>
constexpr bool renames_valid() {
  for (const auto& [before, now] : amphora_renames(static_cast<const T*>(nullptr))) {
    bool now_declared = false, before_declared = false;
    std::apply([&](const auto&... f) { ((now_declared |= f.name == now, before_declared |= f.name == before), ...); },
               description_of<T>().fields);
    if (!now_declared || before_declared) return false;
  }
  return true;
}

}  // namespace detail

template <Described T>
struct materializer<T> {
  static constexpr std::string_view name = description_of<T>().name;
  static constexpr int version = description_of<T>().version;
  static void save(const T& value, ArtifactWriter& out) { detail::save_struct(value, out); }
  static T load(const ArtifactReader& in) { return detail::load_struct<T>(in); }
  static void validate(const ArtifactReader& in) { detail::validate_struct<T>(in); }
};

}  // namespace amphora

AMPHORA_API_END

// Implementation detail of AMPHORA_MATERIALIZE: applies F(T, x) to each x.
#define AMPHORA_PP_NARG(...) AMPHORA_PP_NARG_(__VA_ARGS__, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
#define AMPHORA_PP_NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, N, ...) N
#define AMPHORA_PP_CAT(a, b) AMPHORA_PP_CAT_(a, b)
#define AMPHORA_PP_CAT_(a, b) a##b
#define AMPHORA_PP_MAP(F, T, ...) AMPHORA_PP_CAT(AMPHORA_PP_MAP_, AMPHORA_PP_NARG(__VA_ARGS__))(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_1(F, T, a) F(T, a)
#define AMPHORA_PP_MAP_2(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_1(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_3(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_2(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_4(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_3(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_5(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_4(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_6(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_5(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_7(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_6(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_8(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_7(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_9(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_8(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_10(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_9(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_11(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_10(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_12(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_11(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_13(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_12(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_14(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_13(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_15(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_14(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_16(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_15(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_17(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_16(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_18(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_17(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_19(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_18(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_20(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_19(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_21(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_20(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_22(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_21(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_23(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_22(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_24(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_23(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_25(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_24(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_26(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_25(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_27(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_26(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_28(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_27(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_29(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_28(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_30(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_29(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_31(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_30(F, T, __VA_ARGS__)
#define AMPHORA_PP_MAP_32(F, T, a, ...) F(T, a), AMPHORA_PP_MAP_31(F, T, __VA_ARGS__)

#define AMPHORA_FIELD_(Type, member) ::amphora::Field<Type, decltype(Type::member)>{#member, &Type::member}

/// Declares `Type` to Amphora by its stable name (a persisted string such as
/// "myorg.model"), its format version and its members (up to 32). Use it in
/// Type's namespace: elsewhere, argument-dependent lookup cannot find it,
/// and the line itself fails to compile saying so.
#define AMPHORA_MATERIALIZE(Type, Name, Version, ...)                                                  \
  [[maybe_unused]] constexpr auto amphora_describe(const Type*) {                                     \
    return ::amphora::detail::describe_struct<Type>(Name, Version,                                    \
                                                    AMPHORA_PP_MAP(AMPHORA_FIELD_, Type, __VA_ARGS__)); \
  }                                                                                                   \
  /* Checks made where the line stands, before any save or load is compiled; */                      \
  /* a function body, so that the line needs no semicolon. */                                         \
  [[maybe_unused]] inline void amphora_check_declaration(const Type*) {                               \
    static_assert(::amphora::Described<Type>, "AMPHORA_MATERIALIZE(" #Type ", ...) must stand in the "\
                  "namespace that declares " #Type " (Amphora finds it by argument-dependent lookup)"); \
    (void)::amphora::detail::members_checked(AMPHORA_PP_MAP(AMPHORA_CHECK_MEMBER_, Type, __VA_ARGS__));  \
  }

/// Declares members of `Type` that were stored under other names by earlier
/// versions: pairs of "old name", "new name" (the member as declared in
/// AMPHORA_MATERIALIZE, which must come first). A value saved before the
/// rename loads with the old member's stored value in the new member. Use it
/// in Type's namespace, beside AMPHORA_MATERIALIZE:
///   AMPHORA_RENAMED(Model, "lr", "learning_rate", "w", "weights")
/// An old name may not be a current member's name (names are never reused).
#define AMPHORA_RENAMED(Type, ...)                                                                       \
  [[maybe_unused]] constexpr auto amphora_renames(const Type*) {                                        \
    return ::amphora::detail::rename_pairs(__VA_ARGS__);                                                \
  }                                                                                                     \
  [[maybe_unused]] inline void amphora_check_renames(const Type*) {                                     \
    static_assert(::amphora::detail::HasRenames<Type>, "AMPHORA_RENAMED(" #Type ", ...) must stand in "  \
                  "the namespace that declares " #Type " (Amphora finds it by argument-dependent lookup)"); \
    static_assert(::amphora::detail::renames_valid<Type>(), "AMPHORA_RENAMED(" #Type ", ...): each new "  \
                  "name must be a member declared with AMPHORA_MATERIALIZE, and no old name may be one"); \
  }

// One member's check: its type must be storable (the compiler's note after
// the message names the type).
#define AMPHORA_CHECK_MEMBER_(Type, member)                                                             \
  [] {                                                                                                  \
    static_assert(::amphora::detail::StorableMember<decltype(Type::member)>,                           \
                  "AMPHORA_MATERIALIZE(" #Type ", ...): member '" #member "' has a type Amphora cannot "    \
                  "store (the note below names it). Members may be numbers, bools, strings, "               \
                  "nlohmann::json, amphora::Tensor, and std::vector, std::array, std::map, std::optional, "   \
                  "std::pair, std::tuple and std::variant of those, "                                          \
                  "and any type with a materializer: a struct declared with AMPHORA_MATERIALIZE before "    \
                  "this line, a specialization of amphora::materializer, or a built-in type whose header "  \
                  "is included (<amphora/table.hpp>, <amphora/sparse.hpp>, <amphora/record_collection.hpp>)"); \
    return 0;                                                                                           \
  }()

// A std::vector of a declared struct is a record list wherever the struct is
// declared: every translation unit picks the same layout.
#include <amphora/record_list.hpp>
