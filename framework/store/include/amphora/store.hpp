#pragma once
// The artifact store: typed save/load, refs, names, verify and gc.

#include <amphora/export.hpp>
#include <amphora/artifact.hpp>
#include <amphora/storage/medium.hpp>
#include <amphora/digest.hpp>
#include <amphora/error.hpp>
#include <amphora/registry.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

namespace detail {
struct AMPHORA_INTERNAL StoreAccess;
}  // namespace detail

/// What a save, import or name_artifact did: the artifact's digest and, when
/// named, the name version recorded.
struct SaveResult {
  Digest digest;
  std::string name;           ///< empty when saved unnamed
  std::uint64_t version = 0;  ///< 0 when saved unnamed
  bool created = false;       ///< false when an identical artifact already existed
};

/// One version of a name, with its provenance record.
struct VersionInfo {
  std::string name;
  std::uint64_t version = 0;
  Digest digest;
  nlohmann::json record;  ///< the stored name record (digest, materializer, created_at, ...)
};

/// What Store::verify examined and found.
struct VerifyReport {
  std::size_t artifacts = 0;  ///< artifact folders examined, manifest-less leftovers included
  std::uint64_t bytes = 0;    ///< payload bytes re-hashed
  std::vector<std::string> problems;     ///< damage, one line each, naming the artifact and file
  std::vector<std::string> unsupported;  ///< artifacts this build cannot check (newer formats)
  std::size_t structure_unchecked = 0;   ///< artifacts of unregistered materializers: hashes checked only
  /// No damage found (unsupported artifacts are not damage, but not checked either).
  bool ok() const { return problems.empty(); }
};

/// The name records of a store, read leniently: one bad record does not hide
/// the healthy ones.
struct NameScan {
  std::vector<VersionInfo> versions;  ///< healthy versions, by name then version
  std::vector<std::string> problems;  ///< one line per record or name entry that could not be read
};

/// What Store::gc removed, or on a dry run would remove.
struct GcReport {
  std::vector<Digest> removed;  ///< artifacts removed (or that would be, on a dry run)
  std::vector<VersionInfo> dropped_versions;  ///< name versions beyond keep_last, removed (or that would be)
  std::size_t dropped_cache_entries = 0;      ///< cache entries whose outputs no kept name reaches any more
  std::uint64_t bytes_freed = 0;  ///< bytes of the files of `removed`
  std::size_t kept = 0;         ///< artifacts kept: reachable from a name or cache entry, or young (below)
  std::size_t young = 0;        ///< unnamed artifacts kept because younger than the grace period
  StagingSweep staging;         ///< the sweep of staging areas whose writer is gone
};

/// What Store::migrate found and did.
struct MigrateResult {
  /// Artifacts of one materializer stored at an older format version than
  /// the registry's.
  struct Upgrade {
    std::string materializer;
    int from = 0;               ///< the stored format version
    int to = 0;                 ///< the registered one
    std::size_t artifacts = 0;  ///< how many in the tree were at `from`
  };
  Digest from;                   ///< the artifact the ref resolved to
  Digest to;                     ///< the rewritten artifact; `from` when nothing was rewritten
  bool rewritten = false;        ///< false when every artifact was current
  std::string name;              ///< the name the rewritten artifact was recorded under
  std::uint64_t version = 0;     ///< its version of `name`; 0 when nothing was rewritten
  std::vector<Upgrade> upgrades; ///< what was outdated, by materializer and version
  /// Some artifact's version could not be judged from the registry (its
  /// materializer is not registered, or records keep struct versions in
  /// their list's metadata): the tree was saved again to find out, and is
  /// rewritten only if that gave another digest.
  bool unchecked = false;
};

/// Called with (done, total) units of work; may be empty.
using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// A store's remote: a second store, elsewhere, that push and pull copy
/// artifacts and names to and from (docs/FORMAT.md §13). Kept in the store's
/// remotes.json; never holds a credential.
struct RemoteSpec {
  std::string name;        ///< as validate_name() allows
  std::string url;         ///< "s3://BUCKET/PREFIX" or "file:///PATH" (a shared file system)
  std::string endpoint{};  ///< s3: "http(s)://HOST[:PORT]" of a service that is not AWS; empty: AWS
  std::string region{};    ///< s3: empty: $AWS_REGION, else $AWS_DEFAULT_REGION, else us-east-1
};

/// Where a push or pull stands.
struct TransferStatus {
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;    ///< of the artifacts found missing at the destination
  std::size_t artifacts_done = 0;
  std::size_t artifacts_total = 0;
};

/// How one push or pull runs; every member has a default.
struct TransferOptions {
  /// The remote's name; empty: the store's only remote.
  std::string remote{};
  /// Requests in flight at once (and threads copying).
  std::size_t jobs = 8;
  /// Called from the copying threads, one at a time, as bytes arrive.
  std::function<void(const TransferStatus&)> progress{};
};

/// What a push or pull did.
struct TransferReport {
  std::string remote;                  ///< the remote's name
  std::string location;                ///< its URL
  std::vector<Digest> roots;           ///< what the refs resolved to, in order, without repeats
  std::size_t artifacts_copied = 0;    ///< children included
  /// Found at the destination already; an artifact there has its whole tree
  /// there (a manifest is published after its files and children).
  std::size_t artifacts_present = 0;
  std::uint64_t bytes_copied = 0;      ///< payload and manifest bytes moved
  std::vector<VersionInfo> named;      ///< name versions recorded at the destination
};

/// A handle to a store directory. Copies share one store; every method is
/// thread-safe, and several processes may use one store at once.
class Store {
 public:
  /// Every member has a default initializer, so `{.create = true}` leaves the
  /// others out without a -Wmissing-field-initializers warning.
  struct OpenOptions {
    bool create = false;                   ///< initialise the store if it is not one yet
    /// Materializers for type-erased use (verify, show, export, load_erased);
    /// empty = Registry::with_defaults(): the built-ins when a header of the
    /// materializers is included, and any library's defaults.
    std::shared_ptr<Registry> registry{};
    /// Flush data and directories to the device before publishing (survives
    /// power loss, at disk speed). Off by default: publishing is then atomic
    /// against process crashes and kill -9. $AMPHORA_DURABLE=1 also turns it on.
    /// For the local directory; a medium given below keeps its own setting.
    bool durable = false;
    /// Where the store's bytes live, when not in a local directory: any
    /// Medium (amphora/storage/medium.hpp)...
    std::shared_ptr<Medium> medium{};
    /// ...or the URI of one, opened by its scheme's factory (open_medium):
    /// "file:///data/store", or a scheme a library registered.
    std::string uri{};
    /// Read through to the store's remote (its only one): a ref or digest
    /// this store lacks is opened there (open_artifact reads ranges of it
    /// as it goes: a row, a column, a record), or pulled whole by load<T>.
    bool read_through = true;
  };

  /// Opens the store in the directory `dir` (or, when `dir` reads as a URI,
  /// "file:///data/store", the medium it names). Throws NotFound when it is
  /// missing or not a store and `create` is false, InvalidArgument when the
  /// path is a file or leads through one, CorruptData when its marker or
  /// one of its own directories is damaged or a symbolic link, Unsupported
  /// for a newer layout, IoError when it cannot be created.
  static Store open(const std::filesystem::path& dir, OpenOptions options);
  /// Opens the store in `options.medium`, or at `options.uri` (exactly one
  /// of them). Throws InvalidArgument for neither or both, Unsupported for
  /// an unregistered URI scheme, and as open(dir) does.
  static Store open(OpenOptions options);
  static Store open(const std::filesystem::path& dir) { return open(dir, OpenOptions{}); }
  /// `$AMPHORA_STORE` when set and not empty, else `.amphora` (the CLI's `--store` wins over both).
  static std::filesystem::path default_path();

  /// Where the store is, for messages: its directory, or its medium's location.
  const std::filesystem::path& path() const;
  /// The same as text: a directory, or a medium's URL (s3://BUCKET/PREFIX).
  std::string location() const;
  /// The registry loads and saves go through; shared by copies of the store.
  Registry& registry() const;

  /// Materializes `value` with materializer<T>; a type without one does not
  /// compile (one static_assert saying how to teach Amphora the type; a
  /// value whose type only a plugin knows goes through save_erased with the
  /// registry's entry). Throws InvalidArgument for a bad name, for
  /// provenance or metadata that cannot be stored exactly (NaN, invalid UTF-8)
  /// or that exceeds the record or manifest size limit, before anything is
  /// published.
  template <class T>
  SaveResult save(const T& value, const SaveOptions& options = {}) {
    detail::require_materializable<T>();
    if constexpr (Materializable<T>)
      return save_erased(materializer_entry<T>(), &value, options);
    else
      std::abort();  // not compiled: the assertion above has failed
  }

  /// Loads `ref` as a T (which must have a materializer, as for save).
  /// Throws NotFound, TypeMismatch (an intact value of another type),
  /// Unsupported (a newer format version), CorruptData (damaged bytes).
  template <class T>
  T load(std::string_view ref, const LoadOptions& options = {}) const {
    return load_from<T>(open_loadable(ref).with_options(options));
  }
  /// Loads the artifact `digest` as a T: no ref parsing, so no name can
  /// shadow it. Throws as load(ref).
  template <class T>
  T load(const Digest& digest, const LoadOptions& options = {}) const {
    return load_from<T>(open_loadable(digest.str()).with_options(options));
  }

  /// save() through a type-erased entry: `value` points to an `entry.type`.
  /// Throws as save() does.
  SaveResult save_erased(const MaterializerEntry& entry, const void* value, const SaveOptions& options);

  /// Records the stored artifact `digest` as the next version of `name`,
  /// with `provenance` in its name record, as a save of the same value under
  /// that name would. Throws NotFound when the artifact is not in the store,
  /// InvalidArgument for a bad name or provenance, CorruptData for a damaged
  /// manifest.
  SaveResult name_artifact(const Digest& digest, std::string_view name,
                           const nlohmann::json& provenance = nlohmann::json::object());

  /// Rewrites the artifact `ref`, children included, at the format versions
  /// of this store's registry, for users who want to drop old readers: loads
  /// it as its materializer reads old versions (its migrations) and saves the
  /// value again as the next version of `name` (default: the name in `ref`),
  /// whose record says `migrated_from` (the old digest and ref, and what was
  /// upgraded). The whole tree is saved again with default
  /// MaterializerOptions (a compressed tensor is stored as the defaults
  /// choose). Writes nothing when every artifact in the tree is current, or
  /// when saving again gives the same digest. Throws InvalidArgument when a
  /// rewrite is needed and no name is given or in `ref`, when `ref` is
  /// NAME@N and N is not NAME's latest version (its copy would become the
  /// latest; give `name`), or when `name` gets another version meanwhile;
  /// Unsupported when the materializer is not registered, when the root is
  /// a container only its C++ type loads (see migrate<T>), or when an
  /// artifact is newer than the registry reads; as load and save do
  /// otherwise.
  MigrateResult migrate(std::string_view ref, std::string_view name = {});
  /// migrate(ref, name) through materializer<T> rather than the registry:
  /// loads `ref` as a T and saves it again. For what a type-erased load
  /// cannot rebuild: a container's own artifact (std::vector, std::map,
  /// std::optional of your types, a record list). Throws as migrate and
  /// load<T> do.
  template <class T>
  MigrateResult migrate(std::string_view ref, std::string_view name = {}) {
    detail::require_materializable<T>();
    return migrate_with(ref, name, [this](const Digest& digest) { return save(load<T>(digest)).digest; });
  }

  /// Saves the file `file` as what the registry's format for its extension
  /// reads (".npy" a tensor, ".csv" a table, ...): streamed when the format
  /// can (bounded memory; `options.progress` counts input bytes), else read
  /// whole. Throws InvalidArgument when `file` is no regular file or its path
  /// runs through one, then Unsupported for an extension no format handles,
  /// and as the format's reader and save() do.
  SaveResult import_file(const std::filesystem::path& file, const SaveOptions& options = {});
  /// Loads `ref` with the materializer its manifest names. Throws
  /// Unsupported when that is not registered (saying which plugin on
  /// $AMPHORA_PLUGIN_PATH provides it), TypeMismatch when
  /// `expected_materializer` is given and differs, and as load() does.
  std::shared_ptr<void> load_erased(std::string_view ref, std::string_view expected_materializer = {}) const;
  std::shared_ptr<void> load_erased(const Digest& digest, std::string_view expected_materializer = {}) const;

  /// Resolves `NAME`, `NAME@N`, `sha256:HEX` or a unique hex prefix of at
  /// least 8 digits. Throws NotFound, InvalidArgument (an empty ref, an
  /// invalid name, a bad `@N` or digest, an ambiguous prefix) or CorruptData
  /// (the name's records cannot be read or listed).
  Digest resolve(std::string_view ref) const;
  /// Opens a published artifact for reading (manifest parsed and validated).
  /// One this store lacks is opened on its remote when it reads through
  /// (OpenOptions::read_through): the reader then fetches only what is read.
  ArtifactReader open_artifact(std::string_view ref) const;
  /// Opens the published artifact `digest` (no ref parsing), here or, as
  /// above, on the remote. Throws NotFound, CorruptData, Unsupported.
  ArtifactReader open_artifact(const Digest& digest) const;

  /// Every name with at least one readable version, sorted.
  std::vector<std::string> names() const;
  /// The version numbers `name` has, ascending, without reading their
  /// records; empty when it has none. Throws InvalidArgument (bad name),
  /// CorruptData when the name's entry is not a directory.
  std::vector<std::uint64_t> version_numbers(std::string_view name) const;
  /// Every version of `name`, ascending. Throws NotFound if there is none,
  /// CorruptData if one of its records cannot be read.
  std::vector<VersionInfo> versions(std::string_view name) const;
  /// Every readable version of every name (or of `name` only), with a line
  /// for each record that could not be read instead of an exception.
  NameScan scan_names(std::optional<std::string_view> name = std::nullopt) const;
  /// Every readable name version that points at `digest`; unreadable records
  /// are skipped and, when `problems` is given, described there.
  std::vector<VersionInfo> names_of(const Digest& digest, std::vector<std::string>* problems = nullptr) const;
  /// What the tree of an artifact holds on disk: its payload bytes and those
  /// of every distinct artifact it reaches through children, each counted
  /// once however many parents list it.
  struct TreeSize {
    std::uint64_t payload_bytes = 0;
    std::uint64_t artifacts = 0;
    /// False when a child is missing or unreadable (not counted); verify says why.
    bool complete = true;
  };
  /// Walks the tree of `digest`, reading each distinct manifest once, at
  /// most `max_artifacts` of them (past that, `complete` is false and the
  /// figures count what was read). Throws NotFound when `digest` itself is
  /// not published, CorruptData when its manifest is damaged; thread-safe.
  TreeSize tree_size(const Digest& digest, std::uint64_t max_artifacts = std::numeric_limits<std::uint64_t>::max()) const;

  /// Every published artifact, sorted.
  std::vector<Digest> artifacts() const;
  /// Whether the artifact `digest` is published in this store.
  bool contains(const Digest& digest) const;

  /// What makes the opened `artifact` unusable, one line each, or nothing:
  /// every payload file it and its children list must be a regular file of
  /// its recorded size, and each child's manifest must read and match its
  /// digest; with `rehash`, payloads are re-hashed and unlisted files
  /// reported too (Store::verify without the materializers' checks). Cheap
  /// without `rehash`: a few system calls per file. Throws IoError.
  std::vector<std::string> damage(const ArtifactReader& artifact, bool rehash = false) const;

  /// Re-hashes every payload file of `ref` (or of every artifact and checks
  /// every name record) against the manifests, each manifest against its
  /// digest, and runs the materializer's structural validation.
  VerifyReport verify(std::optional<std::string_view> ref = std::nullopt, const Progress& progress = {}) const;

  /// Removes every version of `name`, or only `version`, so that gc can
  /// collect what nothing else reaches; returns the versions removed. A record
  /// that cannot be read is removed all the same (its VersionInfo then has a
  /// null record and an empty digest). Removed numbers are never issued again:
  /// the next save under `name` gets a version above every one it ever had.
  /// Throws NotFound (no such name or version), InvalidArgument (bad name).
  std::vector<VersionInfo> remove(std::string_view name, std::optional<std::uint64_t> version = std::nullopt);

  /// The store's remotes, by name.
  std::vector<RemoteSpec> remotes() const;
  /// Records a remote. Throws InvalidArgument for a bad name or URL, an
  /// endpoint or region on a file:// remote, or a name taken already.
  void add_remote(const RemoteSpec& remote);
  /// Forgets a remote (nothing on it is touched). Throws NotFound.
  void remove_remote(std::string_view name);
  /// The remote `name` (empty: the only one) as a store, sharing this
  /// store's registry; with `create`, made a store if it is not one yet.
  /// Opening an S3 remote makes no request; credentials are looked up
  /// (NotFound saying where, when there are none). Throws NotFound for an
  /// unknown remote, InvalidArgument when `name` is empty and the store has
  /// several, and as Store::open does.
  Store remote_store(std::string_view name = {}, bool create = false, std::size_t jobs = 8) const;

  /// Copies `refs` (NAME, NAME@N, a digest or a unique prefix), with every
  /// artifact they reach, to the remote, then records their names there:
  /// a name's version is added on the remote unless one of its versions
  /// there has the same digest, and NAME leaves the remote's latest version
  /// of NAME at the local latest's digest. No refs: every version of every
  /// name, in order. Artifacts already on the remote are not sent again;
  /// every piece sent is checked against its manifest on the way, and each
  /// artifact's manifest is written after its files and children. Throws
  /// as resolve() and remote_store() do, CorruptData when a local file does
  /// not match its manifest (nothing of that artifact is published),
  /// RemoteError when the remote fails a request after its retries.
  TransferReport push(const std::vector<std::string>& refs = {}, const TransferOptions& options = {});
  /// Copies `refs`, resolved on the remote, with every artifact they reach,
  /// into this store, each published as a save publishes (staged, then
  /// renamed into place, manifest last) only after every byte of it
  /// matched its manifest; then names: a NAME or NAME@N ref is recorded as
  /// a new local version of NAME unless one has its digest already (NAME:
  /// unless the local latest has it). Throws NotFound for a ref the remote
  /// does not hold, CorruptData naming the file and piece when a byte does
  /// not match (nothing of that artifact is published), and as push does.
  TransferReport pull(const std::vector<std::string>& refs, const TransferOptions& options = {});

  /// Removes artifacts that no name reaches, directly or as a child of what
  /// a name reaches, and staging areas whose writer is gone. Unnamed
  /// artifacts published or saved again less than `grace` ago are kept, with
  /// everything they reach: a composite's children are published before the
  /// parent that names them, and an unnamed save is not collected the moment
  /// it returns. Refuses (CorruptData, saying where) while a name record or
  /// the manifest of a named artifact cannot be read: what it reaches would
  /// otherwise be collected. A refusal changes nothing (no version dropped).
  ///
  /// Outputs of action-cache entries are kept like named artifacts. With
  /// `keep_last` N > 0, only the newest N versions of each name are kept
  /// first; the older ones are removed, and so are the cache entries whose
  /// outputs no kept name reaches, so what only old versions reached goes.
  GcReport gc(bool dry_run = false, std::chrono::seconds grace = kDefaultGcGrace, std::uint64_t keep_last = 0);
  static constexpr std::chrono::seconds kDefaultGcGrace{60};

 private:
  friend struct detail::StoreAccess;
  struct Impl;
  /// What load<T> reads: the artifact here, or, reading through, pulled
  /// from the remote first (whole, verified) and then read here.
  ArtifactReader open_loadable(std::string_view ref) const;
  MigrateResult migrate_with(std::string_view ref, std::string_view name,
                             const std::function<Digest(const Digest&)>& rewrite);
  explicit Store(std::shared_ptr<Impl> impl);
  template <class T>
  T load_from(const ArtifactReader& reader) const {
    detail::require_materializable<T>();
    if constexpr (Materializable<T>)
      return std::move(*static_cast<T*>(load_as(reader, materializer_entry<T>()).get()));
    else
      std::abort();  // not compiled: the assertion above has failed
  }
  std::shared_ptr<void> load_as(const ArtifactReader& reader, const MaterializerEntry& entry) const;
  std::shared_ptr<void> load_reader(const ArtifactReader& reader, std::string_view expected) const;
  std::vector<VersionInfo> versions_checked(std::string_view name) const;
  SaveResult import_checked(const std::filesystem::path& file, const SaveOptions& options);
  VerifyReport verify_checked(std::optional<std::string_view> ref, const Progress& progress) const;
  std::shared_ptr<Impl> impl_;
};


/// Validates a name for versioning: 1-128 characters of [A-Za-z0-9._-],
/// starting with a letter, digit or underscore. Throws InvalidArgument.
void validate_name(std::string_view name);

}  // namespace amphora

AMPHORA_API_END
