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
// displays them; every other member (tensors, vectors, maps, declared
// structs, a NaN, a long or non-UTF-8 string) becomes a child artifact named
// after the member. A std::vector of a declared struct is a record list,
// stored column by column (amphora/record_list.hpp).

#include <amphora/export.hpp>
#include <amphora/everyday.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

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

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

/// Longest string or JSON text kept inline; longer ones become children.
inline constexpr std::size_t kMaxInlineBytes = 4096;

/// Whether the JSON text of `value` certainly exceeds `limit` bytes, found
/// without writing it (a large document is not serialized just to be measured).
bool json_longer_than(const nlohmann::json& value, std::size_t limit);

/// `value` as JSON when it round-trips exactly and is small, else nothing.
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
  } else {
    return std::nullopt;
  }
}

template <class M>
M from_inline(const nlohmann::json& value, const ArtifactReader& in, std::string_view field) {
  if constexpr (is_optional<M>::value) {
    if (value.is_null()) return std::nullopt;
    return from_inline<typename M::value_type>(value, in, field);
  } else if constexpr (std::is_same_v<M, bool> || (std::is_integral_v<M> && ArrayElement<M>) ||
                       std::is_same_v<M, float> || std::is_same_v<M, double> || std::is_same_v<M, std::string> ||
                       std::is_same_v<M, nlohmann::json>) {
    if (!json_holds<M>(value))
      throw TypeMismatch(in.label() + ": field '" + std::string(field) + "' does not hold the expected type (it is " +
                        value.dump().substr(0, 80) + ")");
    return value.get<M>();
  } else {
    throw TypeMismatch(in.label() + ": field '" + std::string(field) + "' is stored inline, but its type is stored as a child");
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

// Takes the checks AMPHORA_MATERIALIZE makes of each member, so that they
// run where the line stands.
constexpr int members_checked(auto...) { return 0; }

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
          } else if constexpr (is_optional<M>::value) {
            children.emplace_back([&out, &f, &member] { out.save_child(f.name, *member); });
          } else {
            children.emplace_back([&out, &f, &member] { out.save_child(f.name, member); });
          }
        };
        (one(field), ...);
        parallel_for(children.size(), [&](std::size_t i) { children[i](); });
      },
      description_of<T>().fields);
  out.meta()["fields"] = std::move(fields);
}

/// The "fields" object of a declared struct's manifest; CorruptData when
/// missing or not an object.
const nlohmann::json& struct_fields(const ArtifactReader& in);

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
          auto it = fields.find(f.name);
          if (it != fields.end()) {
            member = from_inline<M>(*it, in, f.name);
          } else if (in.has_child(f.name)) {
            if constexpr (is_optional<M>::value)
              children.emplace_back([&in, &f, &member] { member = in.load_child<typename M::value_type>(f.name); });
            else
              children.emplace_back([&in, &f, &member] { member = in.load_child<M>(f.name); });
          } else if constexpr (!is_optional<M>::value) {
            throw CorruptData(in.label() + ": field '" + std::string(f.name) +
                              "' is neither in its \"fields\" nor a child");
          }
        };
        (one(field), ...);
        parallel_for(children.size(), [&](std::size_t i) { children[i](); });
      },
      description_of<T>().fields);
  return value;
}

template <class T>
void validate_struct(const ArtifactReader& in) {
  const nlohmann::json& fields = struct_fields(in);
  std::apply(
      [&](const auto&... field) {
        auto one = [&](const auto& f) {
          using M = typename std::decay_t<decltype(f)>::type;
          if constexpr (!is_optional<M>::value)
            if (!fields.contains(f.name) && !in.has_child(f.name))
              throw CorruptData(in.label() + ": field '" + std::string(f.name) +
                                "' is neither in its \"fields\" nor a child");
        };
        (one(field), ...);
      },
      description_of<T>().fields);
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

// One member's check: its type must be storable (the compiler's note after
// the message names the type).
#define AMPHORA_CHECK_MEMBER_(Type, member)                                                             \
  [] {                                                                                                  \
    static_assert(::amphora::detail::StorableMember<decltype(Type::member)>,                           \
                  "AMPHORA_MATERIALIZE(" #Type ", ...): member '" #member "' has a type Amphora cannot "    \
                  "store (the note below names it). Members may be numbers, bools, strings, "               \
                  "nlohmann::json, amphora::Tensor, std::vector, std::map and std::optional of those, "      \
                  "and any type with a materializer: a struct declared with AMPHORA_MATERIALIZE before "    \
                  "this line, a specialization of amphora::materializer, or a built-in type whose header "  \
                  "is included (<amphora/table.hpp>, <amphora/sparse.hpp>, <amphora/record_collection.hpp>)"); \
    return 0;                                                                                           \
  }()
