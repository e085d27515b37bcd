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
//   };
//
// then register it once: registry.add<BBoxes>().

#include <amphora/artifact.hpp>

#include <concepts>
#include <string_view>

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

}  // namespace amphora
