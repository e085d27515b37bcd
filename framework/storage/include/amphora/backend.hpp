#pragma once
// The storage backend interface: where artifact bytes and name records live.
// The local-directory backend is the only one today; the interface is kept
// small so an object-store backend can implement it. Hashing, validation and
// manifest handling do not live here but in ArtifactWriter/Reader and Store.

#include <amphora/buffer.hpp>
#include <amphora/digest.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace amphora {

/// A payload file being written in staging. Positional writes may come from
/// several threads at once for disjoint ranges.
class StagedFile {
 public:
  virtual ~StagedFile() = default;
  virtual void write_at(std::uint64_t offset, ConstBytes data) = 0;
  /// Writes `parts` back to back from `offset`. Backends that can gather
  /// (pwritev) override this; the default writes the parts one by one.
  virtual void write_parts_at(std::uint64_t offset, std::span<const ConstBytes> parts) {
    for (const auto& part : parts) {
      write_at(offset, part);
      offset += part.size();
    }
  }
  /// Hint: the file will hold `size` bytes. Backends may preallocate.
  virtual void reserve(std::uint64_t size) { (void)size; }
  /// Flushes and closes; the file is complete afterwards. Throws IoError.
  virtual void close() = 0;
};

/// An artifact under construction, invisible to readers until publish().
/// Destroying an unpublished staging area removes what it wrote.
class Staging {
 public:
  virtual ~Staging() = default;
  /// Creates payload file `relpath` (already validated by the caller).
  virtual std::unique_ptr<StagedFile> create_file(std::string_view relpath) = 0;
  /// Writes manifest.json.
  virtual void write_manifest(std::string_view bytes) = 0;
  /// Atomically makes the artifact visible under `digest`. Returns false when
  /// an artifact with that digest already existed (the staged copy is dropped).
  virtual bool publish(const Digest& digest) = 0;
  /// Atomically puts the staged artifact in place of an existing (damaged)
  /// one with the same digest. Call only while holding repair_lease(digest).
  virtual void replace(const Digest& digest) = 0;
};

/// A stored payload file opened for positional reads (like a file descriptor:
/// reads stay valid even if the file is renamed or collected meanwhile).
/// Thread-safe.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  /// Size when opened.
  virtual std::uint64_t size() const = 0;
  /// Reads exactly `size` bytes at `offset` into `dst`. Throws CorruptData
  /// when the file ends first (it shrank), IoError on failure.
  virtual void read_at(std::uint64_t offset, std::size_t size, std::byte* dst) const = 0;
};

/// One entry found inside an artifact directory.
struct StoredFile {
  std::string path;    ///< '/'-separated, relative to the artifact
  bool regular = true; ///< false for a symbolic link, FIFO, device or socket
  std::string kind;    ///< "a symbolic link", "a FIFO", ... when not regular
};

/// Held while it lives; released on destruction.
class Lease {
 public:
  virtual ~Lease() = default;
};

struct StagingSweep {
  std::size_t removed = 0;     ///< stale staging areas (or ones that would be, on a dry run)
  std::uint64_t bytes = 0;
  std::size_t in_use = 0;      ///< staging areas of live writers, left alone
};

class StorageBackend {
 public:
  virtual ~StorageBackend() = default;

  /// Human-readable location, for messages.
  virtual std::string location() const = 0;

  virtual std::unique_ptr<Staging> begin_artifact() = 0;
  virtual bool has_artifact(const Digest& digest) = 0;
  /// manifest.json bytes; throws NotFound.
  virtual std::string read_manifest(const Digest& digest) = 0;
  /// Maps payload file `relpath` (validated by the caller) read-only. Throws
  /// NotFound when missing, CorruptData when it is a link or not a regular file.
  virtual std::shared_ptr<const Buffer> map_file(const Digest& digest, std::string_view relpath) = 0;
  /// Opens payload file `relpath` for positional reads; errors as map_file.
  virtual std::unique_ptr<RandomAccessFile> open_file(const Digest& digest, std::string_view relpath) = 0;
  /// Every entry in the artifact other than manifest.json and directories,
  /// sorted by path, links and special files included (flagged) so verify can
  /// report them. Throws NotFound when the artifact directory is missing.
  virtual std::vector<StoredFile> list_files(const Digest& digest) = 0;
  /// Every artifact directory, with or without a manifest. A fan-out
  /// directory that is a symbolic link or not a directory is described in
  /// `problems` and skipped when `problems` is given, else throws CorruptData.
  virtual std::vector<Digest> list_artifacts(std::vector<std::string>* problems = nullptr) = 0;
  /// When the artifact was published, or last saved again (touch_artifact):
  /// gc keeps unreferenced artifacts younger than its grace period. Throws
  /// NotFound when the artifact directory is missing.
  virtual std::chrono::system_clock::time_point artifact_time(const Digest& digest) = 0;
  /// Sets artifact_time to now, so a save that found its artifact already
  /// stored protects it anew. Throws NotFound when it is missing.
  virtual void touch_artifact(const Digest& digest) = 0;
  /// Removes an artifact; returns the bytes freed.
  virtual std::uint64_t remove_artifact(const Digest& digest) = 0;
  virtual std::uint64_t artifact_bytes(const Digest& digest) = 0;

  /// Appends the next version of `name`, atomically and uniquely even with
  /// concurrent writers, storing `record` (to which "version" is added).
  /// Throws InvalidArgument when the serialized record exceeds kMaxRecordBytes.
  virtual std::uint64_t add_version(std::string_view name, nlohmann::json record) = 0;
  /// Every entry of the names area, valid name or not, for the caller to vet.
  virtual std::vector<std::string> list_names() = 0;
  /// Ascending; empty if the name does not exist. Throws CorruptData when
  /// the name's directory is a link or not a directory.
  virtual std::vector<std::uint64_t> list_versions(std::string_view name) = 0;
  /// Throws NotFound, or CorruptData for a record that is not a small regular
  /// file holding a JSON object.
  virtual nlohmann::json read_version(std::string_view name, std::uint64_t version) = 0;
  /// Largest name record, serialized, that a store accepts.
  static constexpr std::size_t kMaxRecordBytes = 1u << 20;
  /// Removes version `version` of `name`. Its number is never issued again:
  /// the next add_version of `name` continues after the highest version the
  /// name ever had, even once every version is removed. Throws NotFound when
  /// there is no such version, CorruptData when what keeps the numbering
  /// (docs/FORMAT.md §1.3) cannot be read.
  virtual void remove_version(std::string_view name, std::uint64_t version) = 0;

  /// Shared lease taken by writers between publishing an artifact and
  /// recording the name that keeps it alive; gc waits for these.
  virtual std::unique_ptr<Lease> publish_lease() = 0;
  /// Exclusive lease held by gc.
  virtual std::unique_ptr<Lease> gc_lease() = 0;
  /// Exclusive per-digest lease held while replacing a damaged artifact.
  virtual std::unique_ptr<Lease> repair_lease(const Digest& digest) = 0;
  /// Removes staging areas whose writer is gone and which are older than `grace`.
  virtual StagingSweep sweep_staging(bool dry_run, std::chrono::seconds grace) = 0;

  /// The action cache (docs/FORMAT.md §1.7): what one successful step
  /// execution produced, under its cache key. The entry for `key`, or nullopt
  /// when there is none. Throws CorruptData for an entry that is not a small
  /// regular file holding a JSON object.
  virtual std::optional<nlohmann::json> read_cache_entry(const Digest& key) = 0;
  /// Publishes (or atomically replaces) the entry for `key`. Throws
  /// InvalidArgument when it exceeds kMaxRecordBytes, IoError.
  virtual void write_cache_entry(const Digest& key, const nlohmann::json& entry) = 0;
  /// Every cache key with an entry, sorted.
  virtual std::vector<Digest> list_cache_entries() = 0;
  /// Removes the entry for `key`; false when there was none.
  virtual bool remove_cache_entry(const Digest& key) = 0;
  /// Exclusive lease on computing `key`, so that of several processes
  /// missing the same key one computes and the others wait for its entry.
  /// The kernel releases it when the holder exits or is killed. With `wait`
  /// false, returns nullptr at once when another holder has it.
  virtual std::unique_ptr<Lease> step_lease(const Digest& key, bool wait) = 0;

  /// Run records (docs/FORMAT.md §1.8), one JSON object per run of a
  /// pipeline. Publishes or atomically replaces the record of `run_id`.
  /// Throws InvalidArgument for a record over kMaxRunBytes, IoError.
  virtual void write_run(std::string_view pipeline, std::string_view run_id, const nlohmann::json& record) = 0;
  /// Every (pipeline, run id) recorded, in no particular order; entries that
  /// are not run records are skipped and, when `problems` is given, described.
  virtual std::vector<std::pair<std::string, std::string>> list_runs(std::vector<std::string>* problems = nullptr) = 0;
  /// Throws NotFound, or CorruptData for a record that cannot be read.
  virtual nlohmann::json read_run(std::string_view pipeline, std::string_view run_id) = 0;
  /// Largest run record, serialized, that a store accepts.
  static constexpr std::size_t kMaxRunBytes = 64u << 20;
};

/// Opens (or, with `create`, initialises) a store directory on the local file
/// system. With `durable`, file contents and directory entries are flushed to
/// the device (fdatasync/fsync) before anything that depends on them is
/// published, so a power loss cannot expose a published artifact or name whose
/// data never reached the disk. Throws NotFound when the directory is not a
/// store and `create` is false, CorruptData when the marker or one of the
/// store's own directories is a symbolic link or not what it should be.
std::shared_ptr<StorageBackend> open_local_backend(const std::filesystem::path& dir, bool create,
                                                   bool durable = false);

}  // namespace amphora
