#pragma once
// What a store keeps, each area built by the framework on a Medium's object
// calls, so a new medium implements none of it (docs/FORMAT.md §1):
//   ArtifactArea  objects/sha256/<hh>/<hex>/...  artifacts, manifest last; claims/ for gc
//   NameIndex     names/<NAME>/<N>.json          versioned names and their numbering
//   ActionCache   cache/<hex>.json               what a step's execution produced (owns the entry format)
//   RunLog        runs/<PIPELINE>/<ID>.json      run records, as the pipeline writes them
// Internal to the framework.

#include <amphora/digest.hpp>
#include <amphora/storage/medium.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace amphora::detail {

/// One entry found inside an artifact's folder.
struct StoredFile {
  std::string path;    ///< '/'-separated, relative to the artifact
  bool regular = true; ///< false for a symbolic link, FIFO, device or socket
  std::string kind;    ///< "a symbolic link", "a FIFO", ... when not regular
};

/// Published artifacts. An artifact exists when its manifest does.
class ArtifactArea {
 public:
  explicit ArtifactArea(std::shared_ptr<Medium> medium) : medium_(std::move(medium)) {}
  static constexpr std::string_view kManifest = "manifest.json";

  Medium& medium() const { return *medium_; }
  std::string location() const { return medium_->location(); }

  /// "objects/sha256/<hh>/<hex>/".
  static std::string prefix(const Digest& digest);

  std::unique_ptr<Staging> begin() const { return medium_->begin_staging(); }
  /// Publishes a staged artifact; false when it was stored already.
  bool publish(Staging& staging, const Digest& digest, std::string_view manifest) const;
  /// Publishes a staged artifact in place of a damaged copy (hold repair_lease).
  void replace(Staging& staging, const Digest& digest, std::string_view manifest) const;

  /// Whether the manifest is there as an object (anything else: no artifact).
  bool has(const Digest& digest) const;
  /// The manifest's bytes, at most `max_bytes`. Throws NotFound, CorruptData.
  std::string read_manifest(const Digest& digest, std::size_t max_bytes) const;
  /// A payload file mapped, or opened for positional reads. `relpath` was
  /// validated by the caller. Throws NotFound, CorruptData.
  std::unique_ptr<RandomAccessFile> open(const Digest& digest, std::string_view relpath) const;
  /// The same for a file the manifest lists with `size` bytes: an object
  /// store is not asked for the size first (Medium::open_sized).
  std::shared_ptr<const Buffer> map_listed(const Digest& digest, std::string_view relpath, std::uint64_t size) const;
  std::unique_ptr<RandomAccessFile> open_listed(const Digest& digest, std::string_view relpath, std::uint64_t size) const;
  /// A payload file's size and time, without opening it; nullopt when missing.
  /// Throws CorruptData when it is not an object (a link, a FIFO).
  std::optional<ObjectInfo> head(const Digest& digest, std::string_view relpath) const;
  /// Medium::head_each of files of one artifact: one look at its folder.
  std::vector<HeadAnswer> heads(const Digest& digest, std::span<const std::string> relpaths) const;
  /// Every entry of the artifact but its manifest, sorted by path. Throws
  /// NotFound when nothing is stored under the digest.
  std::vector<StoredFile> files(const Digest& digest) const;
  /// Every digest with a folder (manifest or not) whose hex starts with
  /// `hex_prefix`, sorted. A fan-out entry that is not a folder is described
  /// in `problems` when given, else CorruptData.
  std::vector<Digest> list(std::string_view hex_prefix = {}, std::vector<std::string>* problems = nullptr) const;
  /// When the artifact was published or last claimed. Throws NotFound.
  std::chrono::system_clock::time_point time(const Digest& digest) const;
  /// Protects a stored artifact from gc's grace-period collection for
  /// another grace period, by a claim object (no artifact is touched).
  void claim(const Digest& digest) const;
  /// Claims recorded, by digest (what gc reads once instead of one per artifact).
  std::map<Digest, std::chrono::system_clock::time_point> claims() const;
  /// Removes the claim of `digest`, if any.
  void drop_claim(const Digest& digest) const;
  /// Removes an artifact; returns the bytes freed.
  std::uint64_t remove(const Digest& digest) const;
  /// Bytes of the artifact's objects.
  std::uint64_t bytes(const Digest& digest) const;

  /// Shared by writers from publishing an artifact until a name keeps it.
  std::unique_ptr<Lease> publish_lease() const { return medium_->lease("gc", LeaseMode::shared, true); }
  /// Exclusive, held by gc.
  std::unique_ptr<Lease> gc_lease() const { return medium_->lease("gc", LeaseMode::exclusive, true); }
  /// Exclusive per digest, held while replacing a damaged copy.
  std::unique_ptr<Lease> repair_lease(const Digest& digest) const {
    return medium_->lease("repair-" + digest.hex(), LeaseMode::exclusive, true);
  }

 private:
  std::shared_ptr<Medium> medium_;
};

/// One entry of the names area, valid name or not, for the caller to vet.
struct ListedName {
  std::string name;
  std::string problem;  ///< empty for a name's folder; else what is there instead
};

/// Versioned names (docs/FORMAT.md §1.3).
/// The digest name record `record` (of `name`@`version`) names. Throws
/// CorruptData when it names none, or no valid one.
Digest record_digest(const nlohmann::json& record, std::string_view name, std::uint64_t version);

class NameIndex {
 public:
  explicit NameIndex(std::shared_ptr<Medium> medium) : medium_(std::move(medium)) {}
  /// Largest name record, serialized, that a store accepts.
  static constexpr std::size_t kMaxRecordBytes = 1u << 20;

  /// Appends the next version of `name` (never one issued before, even if
  /// removed), storing `record` with "version" added; unique with any
  /// number of concurrent writers. Throws InvalidArgument over kMaxRecordBytes.
  /// With `only_after`, only while the name's highest version is that one (0:
  /// none): 0 is returned, and nothing added, once another writer's came first.
  std::uint64_t add(std::string_view name, nlohmann::json record, std::optional<std::uint64_t> only_after = {}) const;
  std::vector<ListedName> list() const;
  /// Ascending; empty if the name has no version. With `tombstoned`, sets
  /// it when the name's folder holds a tombstone. Throws CorruptData when
  /// the name's folder cannot be listed (a link).
  std::vector<std::uint64_t> versions(std::string_view name, bool* tombstoned = nullptr) const;
  /// Throws NotFound, or CorruptData for a record that is not a small JSON object.
  nlohmann::json read(std::string_view name, std::uint64_t version) const;
  /// The digest version `version` of `name` names, for a version just
  /// listed by versions(): remembered as newest() remembers it, so a steady
  /// name's latest version is read once. Throws NotFound, or CorruptData for
  /// a record that is not a small JSON object naming a valid digest.
  Digest digest(std::string_view name, std::uint64_t version) const;
  /// The newest version of `name` and the digest its record names; nullopt
  /// when the name has none, or the newest record is unreadable or names no
  /// digest. A record is written once under a number never issued again, so
  /// the digest read for a version is remembered (bounded): a steady name
  /// costs one listing. Thread-safe. Throws CorruptData as versions() does.
  std::optional<std::pair<std::uint64_t, Digest>> newest(std::string_view name) const;
  /// Removes one version, recording the highest number issued first (the
  /// tombstone). Throws NotFound, CorruptData for an unreadable tombstone.
  void remove(std::string_view name, std::uint64_t version) const;

 private:
  static constexpr std::string_view kTombstone = "tombstone.json";
  std::uint64_t tombstone(const std::string& name) const;
  std::string location() const { return medium_->location(); }
  std::shared_ptr<Medium> medium_;
  mutable std::mutex newest_mutex_;
  mutable std::unordered_map<std::string, std::pair<std::uint64_t, Digest>> newest_;
  mutable std::unordered_map<std::string, std::uint64_t> highest_;  // the highest version this process issued
};

/// How many name records and cache entries a store keeps in memory.
inline constexpr std::size_t kKeptRecords = 4096;

/// One action-cache entry (docs/FORMAT.md §1.7); this class owns the format.
struct CacheEntry {
  Digest key;  ///< as the entry records it (all zeros when it records none): the lookup checks it
  std::string pipeline;
  std::string step;
  std::map<std::string, Digest> outputs;  ///< by output name; ill-formed ones are left out when read
  nlohmann::json provenance = nlohmann::json::object();
  std::string created_at;
};

class ActionCache {
 public:
  explicit ActionCache(std::shared_ptr<Medium> medium) : medium_(std::move(medium)) {}
  /// The entry for `key`, or null. An entry read once is kept (bounded) and
  /// served again while the medium's version tag of its object is unchanged:
  /// a hit costs a head, not a read and a parse. Thread-safe. Throws
  /// CorruptData for a record that is not a small JSON object.
  std::shared_ptr<const CacheEntry> get(const Digest& key) const;
  /// The entry for `key`, or null, read at once: one request on an object
  /// store, where get() asks for the tag first; nothing is kept. For a
  /// cache looked up once per run (a remote's). Throws as get().
  std::shared_ptr<const CacheEntry> read(const Digest& key) const;
  /// Publishes (or replaces) the entry; with `only_if_absent`, only when
  /// there is none, and returns false, writing nothing, when there is.
  /// Throws InvalidArgument over 1 MiB.
  bool put(const CacheEntry& entry, bool only_if_absent = false) const;
  /// Every key with an entry, sorted.
  std::vector<Digest> keys() const;
  bool remove(const Digest& key) const;
  /// Exclusive lease on computing `key`; nullptr when `wait` is false and
  /// another holder has it.
  std::unique_ptr<Lease> lease(const Digest& key, bool wait) const {
    return medium_->lease("step-" + key.hex(), LeaseMode::exclusive, wait);
  }

 private:
  static void parse_entry(nlohmann::json doc, CacheEntry& entry);
  std::shared_ptr<Medium> medium_;
  mutable std::mutex kept_mutex_;
  mutable std::map<Digest, std::pair<std::string, std::shared_ptr<const CacheEntry>>> kept_;
};

/// Run records (docs/FORMAT.md §1.8), stored as the pipeline writes them.
class RunLog {
 public:
  explicit RunLog(std::shared_ptr<Medium> medium) : medium_(std::move(medium)) {}
  /// Largest run record, serialized, that a store accepts: a step takes
  /// about 0.7 KB (a 1,000-step run of the document-frequency example is
  /// 680 KB), so 16 MiB holds over 20,000 steps, and reading one stays far
  /// from exhausting memory.
  static constexpr std::size_t kMaxRunBytes = 16u << 20;
  /// Publishes or replaces the record of `run_id`. Throws InvalidArgument
  /// for a bad pipeline or id, or a record over kMaxRunBytes.
  void write(std::string_view pipeline, std::string_view run_id, const nlohmann::json& record) const;
  /// Every (pipeline, run id); entries that are not run records are
  /// skipped and, when `problems` is given, described.
  std::vector<std::pair<std::string, std::string>> list(std::vector<std::string>* problems = nullptr) const;
  /// Throws NotFound, or CorruptData for a record that cannot be read.
  nlohmann::json read(std::string_view pipeline, std::string_view run_id) const;
  /// The record's text, unparsed (at most kMaxRunBytes). Throws NotFound, CorruptData.
  std::string read_text(std::string_view pipeline, std::string_view run_id) const;

 private:
  std::shared_ptr<Medium> medium_;
};

/// A small JSON object record at `key`: NotFound, or CorruptData naming it
/// as `what` ("name record") when it is not an object of at most `max_bytes`.
nlohmann::json read_record(Medium& medium, const std::string& key, std::size_t max_bytes, const char* what);
/// The record `text` read from `key`, parsed: CorruptData as read_record says.
nlohmann::json parse_record(const std::string& text, Medium& medium, const std::string& key, const char* what);

}  // namespace amphora::detail
