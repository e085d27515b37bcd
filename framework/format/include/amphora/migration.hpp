#pragma once
// Reading what older format versions of a materializer wrote: a chain of
// one-version steps, each turning what version V stored into what V+1
// stores, so that load() only ever decodes the current layout.
//
//   template <> struct amphora::materializer<Config> : amphora::json_materializer<Config> {
//     static constexpr std::string_view name = "myorg.config";
//     static constexpr int version = 3;
//     // value.json as versions 1 and 2 wrote it, brought up to version 3
//     static constexpr auto migrations = amphora::migration_chain<nlohmann::json>(
//         [](nlohmann::json& v1) { v1["rate"] = v1["rate_percent"].get<double>() / 100; v1.erase("rate_percent"); },
//         [](nlohmann::json& v2) { v2["schedule"] = "constant"; });
//   };
//
// A json_materializer runs `migrations` on the stored document by itself; a
// hand-written load() calls amphora::upgrade<T>(in, stored) on whatever it
// decodes first (its metadata, a header struct). Artifacts older than the
// chain's first version, and newer than the materializer, are refused with
// both versions named. `amphora migrate REF` rewrites an old artifact at the
// current version for users who want to drop old readers.

#include <amphora/export.hpp>
#include <amphora/artifact.hpp>
#include <amphora/error.hpp>

#include <exception>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

AMPHORA_API_BEGIN

namespace amphora {

template <class T>
struct materializer;

/// Steps upgrading a `Stored` value (what the materializer decodes before
/// building its value) one format version at a time: step i turns what
/// version First + i wrote into what version First + i + 1 writes. Steps
/// are callables taking `Stored&`; captureless lambdas keep the chain a
/// constant expression. Immutable, so safe to share between threads.
template <class Stored, int First, class... Steps>
class MigrationChain {
  static_assert(First >= 1, "amphora: format versions start at 1");
  static_assert((std::is_invocable_v<const Steps&, Stored&> && ...),
                "amphora: each step of a migration chain takes the stored representation by reference (Stored&)");

 public:
  using stored_type = Stored;
  /// The oldest format version the chain reads.
  static constexpr int first = First;
  /// The version the chain upgrades to: the materializer's current version.
  static constexpr int last = First + static_cast<int>(sizeof...(Steps));

  constexpr explicit MigrationChain(Steps... steps) : steps_(std::move(steps)...) {}

  /// Runs the steps that take `value`, written by format version `stored`,
  /// to version `last`; none when `stored` is `last`. Throws Unsupported,
  /// naming `what` and both versions, when `stored` is outside [first, last].
  void upgrade(Stored& value, int stored, std::string_view what) const {
    if (stored < first || stored > last)
      throw Unsupported(std::string(what) + " was written by format version " + std::to_string(stored) +
                        (stored < first ? ", older than the oldest version (" + std::to_string(first) +
                                              ") this build reads: migrate it with a build that still reads it"
                                        : ", newer than the version " + std::to_string(last) + " this build reads"));
    run_from(value, stored, std::index_sequence_for<Steps...>{});
  }

 private:
  template <std::size_t... I>
  void run_from(Stored& value, int stored, std::index_sequence<I...>) const {
    static_cast<void>(value), static_cast<void>(stored);  // unused by an empty chain
    // In order, each step only when the value is still at or below its version.
    ((stored <= First + static_cast<int>(I) ? static_cast<void>(std::get<I>(steps_)(value)) : static_cast<void>(0)), ...);
  }

  std::tuple<Steps...> steps_;
};

/// A chain reading format versions 1 to 1 + sizeof...(steps).
template <class Stored, class... Steps>
constexpr MigrationChain<Stored, 1, Steps...> migration_chain(Steps... steps) {
  return MigrationChain<Stored, 1, Steps...>(std::move(steps)...);
}

/// A chain reading versions First to First + sizeof...(steps), for a
/// materializer that dropped the readers of versions before First.
template <class Stored, int First, class... Steps>
constexpr MigrationChain<Stored, First, Steps...> migration_chain_from(Steps... steps) {
  return MigrationChain<Stored, First, Steps...>(std::move(steps)...);
}

namespace detail {
template <class C>
struct is_migration_chain : std::false_type {};
template <class Stored, int First, class... Steps>
struct is_migration_chain<MigrationChain<Stored, First, Steps...>> : std::true_type {};
}  // namespace detail

/// Satisfied when materializer<T> declares `static constexpr auto migrations`
/// built by migration_chain.
template <class T>
concept HasMigrations =
    requires { materializer<T>::migrations; } &&
    detail::is_migration_chain<std::remove_cvref_t<decltype(materializer<T>::migrations)>>::value;

/// Brings `stored`, decoded from `in` as the format version `in` was written
/// with, up to materializer<T>'s current version through its `migrations`.
/// Throws Unsupported naming the artifact and both versions when the chain
/// does not reach back to the stored version, OutOfResources when a step
/// runs out of memory, CorruptData when it throws anything else but an
/// amphora::Error (what it read was not what that version wrote).
template <class T, class Stored>
void upgrade(const ArtifactReader& in, Stored& stored) {
  static_assert(HasMigrations<T>,
                "amphora::upgrade<T> needs `static constexpr auto migrations = amphora::migration_chain<...>(...)` "
                "in amphora::materializer<T>");
  using Chain = std::remove_cvref_t<decltype(materializer<T>::migrations)>;
  static_assert(Chain::last == materializer<T>::version,
                "amphora: the last step of materializer<T>::migrations must upgrade to materializer<T>::version "
                "(one step per version after the chain's first)");
  static_assert(std::is_same_v<typename Chain::stored_type, Stored>,
                "amphora: materializer<T>::migrations upgrades another stored type than the one given to upgrade<T>");
  const std::string what = in.label() + " ('" + std::string(materializer<T>::name) + "')";
  try {
    materializer<T>::migrations.upgrade(stored, in.format_version(), what);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw OutOfResources(what + " could not be upgraded from format version " + std::to_string(in.format_version()) +
                         ": out of memory");
  } catch (const std::exception& e) {
    // A step meeting what its version should not hold: the bytes, not the build.
    throw CorruptData(what + " could not be upgraded from format version " + std::to_string(in.format_version()) +
                      " to " + std::to_string(Chain::last) + ": " + e.what());
  } catch (...) {
    throw CorruptData(what + " could not be upgraded from format version " + std::to_string(in.format_version()) +
                      " to " + std::to_string(Chain::last) + ": a step threw something that is not a std::exception");
  }
}

}  // namespace amphora

AMPHORA_API_END
