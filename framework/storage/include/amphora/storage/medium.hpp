#pragma once
// The storage seam: what a medium holding a store's bytes implements. A
// medium is a flat space of keys ('/'-separated relative paths such as
// "names/emb/3.json") to byte objects, each written whole and replaced
// whole. Everything else a store keeps (names and their numbering, the
// action cache, run records, reachability for gc) is built by the framework
// on these few calls, so a new medium (an object store, a shared file
// system) implements only this class; docs/FORMAT.md §1 gives the keys.
//
// A medium implements the pure virtual calls. The others are capabilities
// with generic versions built on them, which a medium overrides when it can
// do better: the local directory stages artifacts in a directory renamed
// into place, maps payloads into memory and locks with flock.
//
// Keys given to a medium have been validated by the framework (no empty,
// '.' or '..' components, no leading '/'); a medium must still refuse any
// other key rather than reach outside its own space.

#include <amphora/export.hpp>
#include <amphora/buffer.hpp>
#include <amphora/digest.hpp>
#include <amphora/error.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

/// What a medium knows of one stored object.
struct ObjectInfo {
  std::uint64_t size = 0;
  /// Changes whenever the object is replaced (an ETag; for a local file its
  /// inode, size and change time). put() compares it for PutCondition::matching.
  std::string tag;
  /// When the object was last written, by the medium's clock.
  std::chrono::system_clock::time_point modified{};
  /// The medium's clock when it answered (an object store's Date), for
  /// comparing with `modified` without the reader's clock; zero when the
  /// medium does not say (a local directory: the reader's clock is its own).
  std::chrono::system_clock::time_point observed{};
};

/// What head() says of one object among several (Medium::head_each).
struct HeadAnswer {
  std::optional<ObjectInfo> info;  ///< nullopt when there is no object, or when `problem` says why not
  std::string problem;             ///< what head() would have thrown as CorruptData, or empty
};

/// A condition that put() checks atomically with the write.
struct PutCondition {
  enum class Kind { always, if_absent, if_match };
  Kind kind = Kind::always;
  std::string tag;  ///< for if_match: the ObjectInfo::tag the object must still have
  /// Writes only when no object has the key.
  static PutCondition absent() { return {Kind::if_absent, {}}; }
  /// Replaces only the version of the object whose tag is `tag`.
  static PutCondition matching(std::string tag) { return {Kind::if_match, std::move(tag)}; }
};

/// One entry of a listing.
struct ListedEntry {
  enum class Kind {
    object,    ///< a stored object
    folder,    ///< a shallow listing's common prefix: keys continue below it (the key ends with '/')
    irregular  ///< something that is neither (a symbolic link, a FIFO on a local medium)
  };
  std::string key;
  Kind kind = Kind::object;
  std::string what;  ///< for irregular entries: what it is, for messages ("a symbolic link")
};

/// One page of a listing, sorted by key.
struct ListPage {
  std::vector<ListedEntry> entries;
  bool truncated = false;  ///< more entries follow entries.back().key
};

/// Largest page a list() call returns.
inline constexpr std::size_t kMaxListPage = 1000;

/// A stored object opened for positional reads (ReadAt). Reads stay valid
/// even if the object is replaced or removed meanwhile, or, on a medium that
/// keeps no old version (an object store), fail with CorruptData saying the
/// object was replaced. Thread-safe.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  /// Size when opened.
  virtual std::uint64_t size() const = 0;
  /// Reads exactly `size` bytes at `offset` into `dst`. Throws CorruptData
  /// when the object ends first (it shrank), IoError on failure.
  virtual void read_at(std::uint64_t offset, std::size_t size, std::byte* dst) const = 0;
};

/// A file being written in a staging area. Positional writes may come from
/// several threads at once for disjoint ranges.
class StagedFile {
 public:
  virtual ~StagedFile() = default;
  virtual void write_at(std::uint64_t offset, ConstBytes data) = 0;
  /// Writes `parts` back to back from `offset`. Media that can gather
  /// (pwritev) override this; the default writes the parts one by one.
  virtual void write_parts_at(std::uint64_t offset, std::span<const ConstBytes> parts) {
    for (const auto& part : parts) {
      write_at(offset, part);
      offset += part.size();
    }
  }
  /// Hint: the file will hold `size` bytes. A medium may preallocate.
  virtual void reserve(std::uint64_t size) { (void)size; }
  /// The size of the writes, at offsets that are multiples of it, for
  /// which write_hashed_at saves work (an object store's part size: each
  /// part is signed with its SHA-256); 0 when the medium has no use for it.
  virtual std::uint64_t hashed_write_size() const { return 0; }
  /// write_at with `sha256`, the SHA-256 of `data`, from a caller that
  /// hashes the bytes anyway: a medium that signs what it sends uses it
  /// instead of hashing them again (the server refuses a wrong one). The
  /// default ignores it.
  virtual void write_hashed_at(std::uint64_t offset, ConstBytes data, const Sha256Value& sha256) {
    (void)sha256;
    write_at(offset, data);
  }
  /// Flushes and closes; the file is complete afterwards. Throws IoError.
  virtual void close() = 0;
};

/// A folder of files written out of sight, then published under one key
/// prefix at once: readers see all of it or nothing. Destroying an
/// unpublished staging area removes what it wrote.
class Staging {
 public:
  virtual ~Staging() = default;
  /// Creates file `relpath` (validated by the caller) in the staged folder.
  /// Throws InvalidArgument when the area has created it already.
  virtual std::unique_ptr<StagedFile> create_file(std::string_view relpath) = 0;
  /// Makes the staged files visible under `prefix` (ending with '/'), with
  /// the file `marker` holding `marker_bytes` written last: a reader that
  /// sees the marker sees every file. Returns false, dropping the staged
  /// copy, when `prefix + marker` already exists.
  virtual bool publish(std::string_view prefix, std::string_view marker, std::string_view marker_bytes) = 0;
  /// Puts the staged folder in place of the one already at `prefix` (a
  /// damaged copy), never leaving `prefix + marker` missing where the medium
  /// allows. Call only while holding the folder's repair lease.
  virtual void replace(std::string_view prefix, std::string_view marker, std::string_view marker_bytes) = 0;
};

/// Held while it lives; released on destruction.
class Lease {
 public:
  virtual ~Lease() = default;
  /// False once the lease is known to be lost (it expired unrenewed and
  /// another holder took it over); a holder checks before committing work
  /// only the lease's holder may commit.
  virtual bool held() const { return true; }
};

enum class LeaseMode { shared, exclusive };

/// What sweep_staging found.
struct StagingSweep {
  std::size_t removed = 0;     ///< stale staging areas (or ones that would be, on a dry run)
  std::uint64_t bytes = 0;
  std::size_t in_use = 0;      ///< staging areas of live writers, left alone
};

/// Where a store's bytes live. Every method is thread-safe, and several
/// processes (or machines) may use one medium's space at once. Errors:
/// NotFound for a missing object where one is required, CorruptData for
/// what is there but is not an object of the medium (a link, a FIFO, an
/// oversized record), InvalidArgument for a key the medium refuses,
/// IoError and OutOfResources for failures of the medium itself.
class Medium {
 public:
  virtual ~Medium() = default;

  /// Where the medium is, for messages (a directory, a URL).
  virtual std::string location() const = 0;

  /// The object's size, tag and time, or nullopt when there is none.
  virtual std::optional<ObjectInfo> head(std::string_view key) = 0;
  /// The whole object. Throws NotFound, CorruptData when it is larger than
  /// `max_bytes` or not an object.
  virtual std::string get(std::string_view key, std::size_t max_bytes) = 0;
  /// Opens the object for positional reads. Throws as get().
  virtual std::unique_ptr<RandomAccessFile> open(std::string_view key) = 0;
  /// Writes `bytes` as the object `key`, atomically: readers see the old
  /// object or the new one, never part of either. Returns what was written
  /// (its tag, for a later PutCondition::matching), or nullopt, writing
  /// nothing, when `condition` does not hold at the moment of the write.
  virtual std::optional<ObjectInfo> put(std::string_view key, std::string_view bytes,
                                        const PutCondition& condition = {}) = 0;
  /// Removes the object; false when there was none.
  virtual bool remove(std::string_view key) = 0;
  /// Keys beginning with `prefix`, in byte order, after `start_after` (a
  /// key, or empty for the start), at most `limit` (up to kMaxListPage). A
  /// shallow listing rolls the keys that continue past the next '/' after
  /// `prefix` into one folder entry each, as S3's delimiter does.
  virtual ListPage list(std::string_view prefix, std::string_view start_after = {}, bool shallow = true,
                        std::size_t limit = kMaxListPage) = 0;

  // Capabilities, with generic versions built on the calls above.

  /// head() of `prefix` (empty or ending with '/') followed by each of
  /// `names`, in order, where what head() throws as CorruptData for one
  /// object is that object's answer instead. The local medium opens the
  /// folder once for all of them. Throws as head() for anything else.
  virtual std::vector<HeadAnswer> head_each(std::string_view prefix, std::span<const std::string> names);
  /// The whole object as a buffer; the local medium maps it read-only.
  /// Throws as get() (without a size limit).
  virtual std::shared_ptr<const Buffer> map(std::string_view key);
  /// Whether map() shares the stored bytes (a local file's mapping) rather
  /// than copying them in (the generic version, an object store): a reader
  /// after a small part of a large object reads that part where it is not.
  virtual bool maps_in_place() const { return false; }
  /// open() of an object whose size is known from elsewhere (a manifest).
  /// A medium where looking costs a request (an object store) skips the
  /// look: a missing object is then NotFound, and one of another size
  /// CorruptData, at the first read. The generic version is open().
  virtual std::unique_ptr<RandomAccessFile> open_sized(std::string_view key, std::uint64_t size);
  /// map() of an object whose size is known from elsewhere, likewise.
  virtual std::shared_ptr<const Buffer> map_sized(std::string_view key, std::uint64_t size);
  /// Makes the folder `prefix` (ending with '/') visible while empty, where
  /// the medium has folders of their own (a directory); the generic media
  /// have none, and do nothing.
  virtual void make_folder(std::string_view prefix);
  /// A staging area for one folder (an artifact). The generic one holds the
  /// files in memory and publishes them with put(), the marker last and
  /// only if absent.
  virtual std::unique_ptr<Staging> begin_staging();
  /// A staging area for the folder `prefix` (ending with '/'), known in
  /// advance, as when an artifact is copied from another medium: a medium
  /// where nothing under a folder counts until its marker is there (an
  /// object store) writes the files in place as they come, in parts, and
  /// holds none in memory; publish() and replace() must then name the same
  /// prefix. The generic version is begin_staging().
  virtual std::unique_ptr<Staging> begin_staging_at(std::string_view prefix);
  /// Removes every object under `prefix` (ending with '/'), `marker` first
  /// so the folder stops counting as published before it is gone; returns
  /// the bytes freed.
  virtual std::uint64_t remove_folder(std::string_view prefix, std::string_view marker);
  /// A lease named `name` (letters, digits, '-' and '_'): shared leases of a
  /// name coexist, an exclusive one excludes every other. With `wait`
  /// false, returns nullptr at once when it cannot be had. The generic
  /// leases are objects under "leases/" that expire unless renewed
  /// (ObjectLeases); the local medium locks files with flock, which the
  /// kernel releases when the holder dies.
  virtual std::unique_ptr<Lease> lease(std::string_view name, LeaseMode mode, bool wait);
  /// Removes what writers that are gone left behind in the medium's own
  /// scratch space, if it has one, when older than `grace`. The generic
  /// media have none.
  virtual StagingSweep sweep_staging(bool dry_run, std::chrono::seconds grace);

 private:
  std::shared_ptr<class ObjectLeases> leases_;
  std::once_flag leases_once_;
};

/// Throws InvalidArgument unless `key` is one a medium may hold: not empty,
/// no empty, '.' or '..' component, no leading '/', no NUL, at most 4096
/// bytes; with `folder`, a trailing '/' is allowed. For media to refuse what
/// could reach outside their space.
void check_storage_key(std::string_view key, bool folder = false);
/// Throws InvalidArgument unless `name` is a lease name: 1-100 letters,
/// digits, '-' and '_'.
void check_lease_name(std::string_view name);

/// Every entry under `prefix`, all pages of list() joined.
std::vector<ListedEntry> list_all(Medium& medium, std::string_view prefix, bool shallow = true);

/// Expiring leases kept as objects of a medium, for media whose holders
/// cannot count on a lock dying with them (an object store, several hosts):
/// an exclusive lease is the object "leases/NAME" created only if absent,
/// a shared one "leases/NAME.shared/ID" (one per name for all the shared
/// leases of that name taken through one ObjectLeases, released with the
/// last of them); each holds its holder and expiry,
/// and is renewed by a background thread every ttl/3. A lease whose expiry
/// has passed (its holder died or stalled) is taken over with a put that
/// matches its tag, after which its old holder's held() is false.
/// docs/FORMAT.md §1.5 gives the records.
class ObjectLeases : public std::enable_shared_from_this<ObjectLeases> {
 public:
  struct Options {
    /// How long a lease lasts unrenewed.
    std::chrono::milliseconds ttl{30000};
    /// How often a waiter looks again (doubling up to 16 times this).
    std::chrono::milliseconds poll{20};
    /// How far the clocks of the holders may disagree: a lease counts as
    /// expired only this long after the expiry its holder wrote.
    std::chrono::milliseconds clock_skew{2000};
  };
  /// Leases on `medium`, which must outlive every lease taken.
  static std::shared_ptr<ObjectLeases> create(Medium& medium, Options options);
  static std::shared_ptr<ObjectLeases> create(Medium& medium) { return create(medium, Options{}); }
  ~ObjectLeases();
  /// As Medium::lease(). A lease must not outlive the medium.
  std::unique_ptr<Lease> acquire(std::string_view name, LeaseMode mode, bool wait);

  struct Impl;

 private:
  explicit ObjectLeases(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The options Medium::lease() gives its object leases: the defaults, with
/// the ttl from $AMPHORA_LEASE_SECONDS when set (1 to 3600; InvalidArgument
/// otherwise).
ObjectLeases::Options object_lease_options();

/// Opens (or, with `create`, makes) the directory `dir` as a medium; the
/// store's own marker and layout are the framework's business (Store::open).
/// With `durable`, file contents and directory entries are flushed to the
/// device before anything that depends on them is published, so a power
/// loss cannot expose a published artifact or name whose data never reached
/// the disk. Every access walks from a descriptor of `dir` with O_NOFOLLOW:
/// no link inside it is followed. Throws NotFound when `dir` is missing and
/// `create` is false, IoError when it cannot be made or opened.
std::shared_ptr<Medium> open_local_medium(const std::filesystem::path& dir, bool create, bool durable = false);

/// What a URI scheme's factory receives.
struct MediumRequest {
  std::string uri;   ///< the whole URI, e.g. "file:///data/store"
  std::string rest;  ///< what follows "SCHEME://"
  bool create = false;
  bool durable = false;
};
using MediumFactory = std::function<std::shared_ptr<Medium>(const MediumRequest&)>;

/// Registers `factory` for URIs "SCHEME://..." (`scheme`: lower-case letters,
/// digits, '+', '-', '.'). "file" is registered by the framework. Throws
/// InvalidArgument for a bad scheme or one registered already.
void register_medium_scheme(std::string_view scheme, MediumFactory factory);
/// Opens the medium `uri` names through its scheme's factory. Throws
/// InvalidArgument for a URI without a scheme, Unsupported for a scheme no
/// factory is registered for (naming the ones that are), and what the
/// factory throws.
std::shared_ptr<Medium> open_medium(std::string_view uri, bool create = false, bool durable = false);
/// Whether `text` starts like a URI ("SCHEME://").
bool is_medium_uri(std::string_view text);

}  // namespace amphora

AMPHORA_API_END
