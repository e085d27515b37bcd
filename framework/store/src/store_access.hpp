#pragma once
// The areas of a store, for the layers built on Store inside the framework
// (pipelines: the action cache, run records, name lookups). Not installed:
// programs go through Store's own methods.

#include <amphora/store.hpp>

#include "store_areas.hpp"

namespace amphora::detail {

struct StoreAccess {
  static const NameIndex& names(const Store& store);
  static const ActionCache& cache(const Store& store);
  static const RunLog& runs(const Store& store);
  static const ArtifactArea& artifacts(const Store& store);
  /// Store::name_artifact, with the artifact's manifest given when the
  /// caller has it (read and checked against the digest): no read of it.
  /// With `only_after`, as NameIndex::add: version 0 in the result when
  /// another version of `name` came first.
  static SaveResult name_artifact(Store& store, const Digest& digest, std::string_view name,
                                  const nlohmann::json& provenance, const Manifest* known,
                                  std::optional<std::uint64_t> only_after = {});
  /// One artifact to name, for name_artifacts.
  struct Naming {
    Digest digest;
    std::string name;
    nlohmann::json provenance;
    const Manifest* known = nullptr;  ///< as name_artifact's
  };
  /// Names several artifacts together (a step's outputs): every artifact is
  /// found and every record built and measured before the first is written,
  /// so a missing artifact or an oversized record (NotFound,
  /// InvalidArgument) names none of them. An I/O failure while writing may
  /// still leave the earlier ones named. Results in the order given;
  /// `only_after` as name_artifact's, for each name.
  static std::vector<SaveResult> name_artifacts(Store& store, const std::vector<Naming>& namings,
                                                std::optional<std::uint64_t> only_after = {});
  /// The remote `spec` (from one reading of the store's remotes) as a store
  /// sharing `store`'s registry: Store::remote_store for a remote in hand,
  /// so a caller never opens another remote than the one it looked at.
  static Store remote(const Store& store, const RemoteSpec& spec, bool create, std::size_t jobs = 8);
  /// Store::push and Store::pull with the remote in hand (`remote`, opened
  /// from the spec named `remote_name`): no second reading of the remotes.
  static TransferReport push(Store& local, const std::string& remote_name, Store& remote,
                             const std::vector<std::string>& refs, const TransferOptions& options);
  static TransferReport pull(Store& local, const std::string& remote_name, const Store& remote,
                             const std::vector<std::string>& refs, const TransferOptions& options);
  /// The registry the store was opened with, for a store opened beside it.
  static std::shared_ptr<Registry> registry(const Store& store);
  /// What Store::damage without hashing reports first for `digest` (made by
  /// `made_by`, unless empty), "" when intact, or nullopt when that needs
  /// the full check: answered from a manifest kept by an earlier read whose
  /// tag is unchanged, with one look at the artifact's folder. Throws as
  /// damage(). When intact and `intact` is given, it receives a reader of
  /// the kept manifest, built without reading anything.
  static std::optional<std::string> quick_problem(const Store& store, const Digest& digest, std::string_view made_by,
                                                  std::optional<ArtifactReader>* intact = nullptr);
};

/// "a, b, c": the remotes' names, for messages.
std::string remote_names(const std::vector<RemoteSpec>& remotes);

}  // namespace amphora::detail
