// The local-directory storage backend. Layout (docs/FORMAT.md):
//   amphora-store.json                store marker and layout version
//   objects/sha256/<hh>/<64 hex>/     one published artifact
//   names/<name>/<version>.json       name records
//   names/<name>/tombstone.json       highest version issued, once one is removed
//   tmp/                              staging areas (each locked while written)
//   locks/gc.lock                     shared by publishers, exclusive for gc
//   locks/names.lock                  shared while a version is chosen, exclusive to remove one
//   locks/step-<64 hex>.lock          held while a step computes that cache key
//   cache/<64 hex>.json               action cache entries
//   runs/<pipeline>/<run id>.json     run records
//
// Every access starts from a descriptor of the store directory and walks
// down with O_NOFOLLOW (posix.hpp), so no link planted in a store can
// redirect a read, a write, a rename or a deletion outside it.

#include <amphora/backend.hpp>
#include <amphora/error.hpp>
#include <amphora/manifest.hpp>

#include "posix.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fcntl.h>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>

namespace amphora {

namespace fs = std::filesystem;

namespace {

constexpr int kLayoutVersion = 1;
constexpr const char* kMarker = "amphora-store.json";
constexpr const char* kStructure[] = {"objects", "objects/sha256", "names", "tmp", "locks", "cache", "runs"};
constexpr std::size_t kMaxMarkerBytes = 1u << 16;
constexpr const char* kTombstone = "tombstone.json";

std::string random_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 32));
  char buf[17];
  auto v = rng();
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i, v >>= 4) buf[i] = kDigits[v & 15];
  buf[16] = 0;
  return std::to_string(::getpid()) + "-" + buf;
}

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

void sync_fd(int fd, const fs::path& path) {
  if (::fsync(fd) != 0) detail::throw_errno("cannot flush", path);
}

std::string object_rel(const Digest& d) {
  auto hex = d.hex();
  return "objects/sha256/" + hex.substr(0, 2) + "/" + hex;
}
std::string fan_rel(const Digest& d) { return "objects/sha256/" + d.hex().substr(0, 2); }

class FileLease : public Lease {
 public:
  FileLease(int locks_dir, const std::string& file, const fs::path& shown, int operation) {
    fd_ = detail::open_at(locks_dir, file, O_RDWR | O_CREAT);
    if (!fd_) detail::throw_open_error(shown);
    detail::require_regular(fd_.get(), shown);
    while (::flock(fd_.get(), operation) != 0) {
      if (errno != EINTR) detail::throw_errno("cannot lock", shown);
    }
  }

 private:
  detail::Fd fd_;
};

// A lock file its holder unlinks on release, so that lock files do not pile
// up one per cache key. A waiter that locked a file unlinked meanwhile holds
// nothing, so it checks that the path still names the file it locked.
class StepLease : public Lease {
 public:
  static std::unique_ptr<StepLease> acquire(detail::Fd locks, std::string file, fs::path shown, bool wait) {
    for (;;) {
      detail::Fd fd = detail::open_at(locks.get(), file, O_RDWR | O_CREAT);
      if (!fd) detail::throw_open_error(shown);
      detail::require_regular(fd.get(), shown);
      int rc;
      while ((rc = ::flock(fd.get(), LOCK_EX | (wait ? 0 : LOCK_NB))) != 0 && errno == EINTR) {
      }
      if (rc != 0) {
        if (errno == EWOULDBLOCK) return nullptr;
        detail::throw_errno("cannot lock", shown);
      }
      struct stat held {}, named {};
      if (::fstat(fd.get(), &held) != 0) detail::throw_errno("cannot read", shown);
      if (::fstatat(locks.get(), file.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 && named.st_ino == held.st_ino &&
          named.st_dev == held.st_dev)
        return std::unique_ptr<StepLease>(new StepLease(std::move(locks), std::move(file), std::move(fd)));
    }
  }
  ~StepLease() override { ::unlinkat(locks_.get(), file_.c_str(), 0); }  // before fd_ closes and unlocks

 private:
  StepLease(detail::Fd locks, std::string file, detail::Fd fd)
      : locks_(std::move(locks)), file_(std::move(file)), fd_(std::move(fd)) {}
  detail::Fd locks_;
  std::string file_;
  detail::Fd fd_;
};

bool valid_record_stem(std::string_view s) {
  auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
  };
  return !s.empty() && s.size() <= 128 && s.front() != '.' && std::all_of(s.begin(), s.end(), ok);
}

class LocalStagedFile : public StagedFile {
 public:
  LocalStagedFile(detail::Fd fd, fs::path path, bool durable)
      : fd_(std::move(fd)), path_(std::move(path)), durable_(durable) {}
  void write_at(std::uint64_t offset, ConstBytes data) override {
    detail::pwrite_all(fd_.get(), data.data(), data.size(), offset, path_);
  }
  void write_parts_at(std::uint64_t offset, std::span<const ConstBytes> parts) override {
    detail::pwritev_all(fd_.get(), parts, offset, path_);
  }
  // Allocating the extent up front spares the file system a delayed
  // allocation per page while the data streams in.
  void reserve(std::uint64_t size) override {
    if (size > 0) (void)::fallocate(fd_.get(), FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(size));
  }
  void close() override {
    if (durable_ && ::fdatasync(fd_.get()) != 0) detail::throw_errno("cannot flush", path_);
    if (::close(fd_.release()) != 0) detail::throw_errno("cannot close", path_);
  }

 private:
  detail::Fd fd_;
  fs::path path_;
  bool durable_;
};

class LocalRandomAccessFile : public RandomAccessFile {
 public:
  LocalRandomAccessFile(detail::Fd fd, std::uint64_t size, fs::path path)
      : fd_(std::move(fd)), size_(size), path_(std::move(path)) {}
  std::uint64_t size() const override { return size_; }
  void read_at(std::uint64_t offset, std::size_t size, std::byte* dst) const override {
    detail::pread_exact(fd_.get(), dst, size, offset, path_);
  }

 private:
  detail::Fd fd_;
  std::uint64_t size_;
  fs::path path_;
};

class LocalStaging : public Staging {
 public:
  LocalStaging(int root_fd, const fs::path& root, bool durable) : root_fd_(root_fd), root_(root), durable_(durable) {
    tmp_fd_ = detail::open_dir_at(root_fd_, "tmp", root_ / "tmp");
    // The staging directory is its own lock: no lock file is created and
    // deleted per save (on an ext4 without a journal every deleted inode
    // slows the next minutes of file creation).
    for (int attempt = 0;; ++attempt) {
      id_ = "stage-" + random_id();
      if (::mkdirat(tmp_fd_.get(), id_.c_str(), 0755) != 0) detail::throw_errno("cannot create staging directory", shown(id_));
      // A writer stalled between creating and locking its directory for
      // longer than gc's grace period may have had it swept as abandoned.
      dir_fd_ = detail::Fd(::openat(tmp_fd_.get(), id_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!dir_fd_ && errno != ENOENT) detail::throw_errno("cannot open", shown(id_));
      if (dir_fd_ && ::flock(dir_fd_.get(), LOCK_EX) != 0) detail::throw_errno("cannot lock", shown(id_));
      struct stat held {}, named {};
      if (dir_fd_ && ::fstat(dir_fd_.get(), &held) == 0 &&
          ::fstatat(tmp_fd_.get(), id_.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
          held.st_ino == named.st_ino && held.st_dev == named.st_dev)
        break;
      // Only a gc run with no grace period, sweeping in a loop, gets here often.
      if (attempt == 99) throw IoError("cannot hold a staging directory in " + (root_ / "tmp").string());
    }
  }

  ~LocalStaging() override {
    if (!published_) {
      try {
        detail::remove_tree_at(tmp_fd_.get(), id_, shown(id_));
      } catch (const Error&) {
        // gc sweeps what is left once this writer's lock is released
      }
    }
  }

  // Safe to call from several threads at once for different paths.
  std::unique_ptr<StagedFile> create_file(std::string_view relpath) override {
    std::string rel(relpath);
    auto slash = rel.rfind('/');
    detail::Fd parent;
    if (slash != std::string::npos) {
      std::string sub = rel.substr(0, slash);
      {
        std::lock_guard lock(mutex_);
        for (auto at = sub.find('/'); at != std::string::npos; at = sub.find('/', at + 1)) subdirs_.insert(sub.substr(0, at));
        subdirs_.insert(sub);
      }
      parent = detail::open_dir_at(dir_fd_.get(), sub, shown(id_ + "/" + sub), true);
    }
    int at = parent ? parent.get() : dir_fd_.get();
    std::string leaf = slash == std::string::npos ? rel : rel.substr(slash + 1);
    detail::Fd fd(::openat(at, leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd) detail::throw_errno("cannot create", shown(id_ + "/" + rel));
    return std::make_unique<LocalStagedFile>(std::move(fd), shown(id_ + "/" + rel), durable_);
  }

  void write_manifest(std::string_view bytes) override {
    detail::Fd fd(::openat(dir_fd_.get(), "manifest.json", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd) detail::throw_errno("cannot create", shown(id_ + "/manifest.json"));
    detail::pwrite_all(fd.get(), bytes.data(), bytes.size(), 0, shown(id_ + "/manifest.json"));
    if (durable_) sync_fd(fd.get(), shown(id_ + "/manifest.json"));
  }

  bool publish(const Digest& digest) override {
    detail::Fd fan = detail::open_dir_at(root_fd_, fan_rel(digest), root_ / fan_rel(digest), true);
    flush_before_publish();
    auto hex = digest.hex();
    if (::renameat(tmp_fd_.get(), id_.c_str(), fan.get(), hex.c_str()) == 0) {
      published_ = true;
      flush_after_publish(fan.get());
      return true;
    }
    // Something already holds the digest: identical content, or (not a
    // directory) damage that the caller's check will find and replace.
    if (errno == EEXIST || errno == ENOTEMPTY || errno == ENOTDIR || errno == EISDIR) return false;
    detail::throw_errno("cannot publish staged artifact to", root_ / object_rel(digest));
  }

  // The staged copy and the damaged one trade places in one atomic step, so
  // the digest never names nothing, whenever the process dies.
  void replace(const Digest& digest) override {
    detail::Fd fan = detail::open_dir_at(root_fd_, fan_rel(digest), root_ / fan_rel(digest), true);
    flush_before_publish();
    auto hex = digest.hex();
    detail::fault_point("repair-before-swap");
    if (::renameat2(tmp_fd_.get(), id_.c_str(), fan.get(), hex.c_str(), RENAME_EXCHANGE) == 0) {
      published_ = true;  // what is now at tmp/<id> is the damaged copy
      flush_after_publish(fan.get());
      detail::fault_point("repair-after-swap");
      try {
        detail::remove_tree_at(tmp_fd_.get(), id_, shown(id_));
      } catch (const Error&) {
        // unlocked once we return: gc sweeps it
      }
      return;
    }
    if (errno == ENOENT) {  // the damaged copy vanished meanwhile: plain publish
      // False means another writer published a copy first, which the
      // caller's next check will judge like any other.
      (void)publish(digest);
      return;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
      detail::throw_errno("cannot swap repaired artifact into", root_ / object_rel(digest));
    // File systems without RENAME_EXCHANGE: move the damaged copy aside and
    // the staged one in; a crash between the two leaves the digest missing
    // until the next save of the value (the damaged copy is in tmp/).
    std::string trash = "trash-" + random_id();
    bool moved = ::renameat(fan.get(), hex.c_str(), tmp_fd_.get(), trash.c_str()) == 0;
    if (!moved && errno != ENOENT) detail::throw_errno("cannot move damaged artifact aside", root_ / object_rel(digest));
    if (::renameat(tmp_fd_.get(), id_.c_str(), fan.get(), hex.c_str()) != 0) {
      int err = errno;
      if (moved) ::renameat(tmp_fd_.get(), trash.c_str(), fan.get(), hex.c_str());
      detail::throw_errno("cannot publish staged artifact to", root_ / object_rel(digest), err);
    }
    published_ = true;
    flush_after_publish(fan.get());
    if (moved) {
      try {
        detail::remove_tree_at(tmp_fd_.get(), trash, shown(trash));
      } catch (const Error&) {
      }
    }
  }

 private:
  fs::path shown(const std::string& rel) const { return root_ / "tmp" / rel; }

  // With durability on, everything staged reaches the device before the
  // rename that publishes it, and the rename itself right after.
  void flush_before_publish() {
    if (!durable_) return;
    std::lock_guard lock(mutex_);
    for (const auto& sub : subdirs_) {
      detail::Fd fd = detail::open_dir_at(dir_fd_.get(), sub, shown(id_ + "/" + sub));
      sync_fd(fd.get(), shown(id_ + "/" + sub));
    }
    sync_fd(dir_fd_.get(), shown(id_));
  }
  void flush_after_publish(int fan_fd) {
    if (!durable_) return;
    sync_fd(fan_fd, root_ / "objects/sha256");
    detail::Fd objects = detail::open_dir_at(root_fd_, "objects/sha256", root_ / "objects/sha256");
    sync_fd(objects.get(), root_ / "objects/sha256");
    sync_fd(tmp_fd_.get(), root_ / "tmp");
  }

  int root_fd_;
  fs::path root_;
  bool durable_;
  detail::Fd tmp_fd_, dir_fd_;  // dir_fd_ holds the staging lock
  std::string id_;
  std::mutex mutex_;
  std::set<std::string> subdirs_;
  bool published_ = false;
};

class LocalBackend : public StorageBackend {
 public:
  LocalBackend(fs::path root, detail::Fd root_fd, bool durable)
      : root_(std::move(root)), root_fd_(std::move(root_fd)), durable_(durable) {}

  std::string location() const override { return root_.string(); }

  std::unique_ptr<Staging> begin_artifact() override {
    return std::make_unique<LocalStaging>(root_fd_.get(), root_, durable_);
  }

  detail::Fd dir(const std::string& rel, bool create = false) const {
    return detail::open_dir_at(root_fd_.get(), rel, root_ / rel, create);
  }

  bool has_artifact(const Digest& d) override {
    detail::Fd fd = detail::open_at(root_fd_.get(), object_rel(d) + "/manifest.json", O_RDONLY);
    if (!fd && (errno == EMFILE || errno == ENFILE || errno == ENOMEM))
      detail::throw_errno("cannot open", root_ / object_rel(d) / "manifest.json");
    struct stat st {};
    return fd && ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode);
  }

  std::string read_manifest(const Digest& d) override {
    fs::path shown = root_ / object_rel(d) / "manifest.json";
    detail::Fd fd = detail::open_at(root_fd_.get(), object_rel(d) + "/manifest.json", O_RDONLY);
    if (!fd) {
      if (errno == ENOENT) throw NotFound("no artifact " + d.str() + " in store " + location());
      detail::throw_open_error(shown);
    }
    return detail::read_small_fd(fd.get(), shown, Manifest::kMaxBytes);
  }

  detail::Fd open_payload(const Digest& d, std::string_view relpath, struct stat& st) {
    fs::path shown = root_ / object_rel(d) / std::string(relpath);
    detail::Fd fd = detail::open_at(root_fd_.get(), object_rel(d) + "/" + std::string(relpath), O_RDONLY);
    if (!fd) {
      if (errno == ELOOP) throw CorruptData("'" + std::string(relpath) + "' is a symbolic link (" + shown.string() + ")");
      detail::throw_open_error(shown);
    }
    if (::fstat(fd.get(), &st) != 0) detail::throw_errno("cannot stat", shown);
    if (!S_ISREG(st.st_mode))
      throw CorruptData("'" + std::string(relpath) + "' is " + detail::describe_file_type(st.st_mode) +
                        ", not a regular file (" + shown.string() + ")");
    return fd;
  }

  std::shared_ptr<const Buffer> map_file(const Digest& d, std::string_view relpath) override {
    struct stat st {};
    detail::Fd fd = open_payload(d, relpath, st);
    return detail::map_fd(fd.get(), root_ / object_rel(d) / std::string(relpath));
  }

  std::unique_ptr<RandomAccessFile> open_file(const Digest& d, std::string_view relpath) override {
    struct stat st {};
    detail::Fd fd = open_payload(d, relpath, st);
    return std::make_unique<LocalRandomAccessFile>(std::move(fd), static_cast<std::uint64_t>(st.st_size),
                                                   root_ / object_rel(d) / std::string(relpath));
  }

  void walk(int dirfd, const fs::path& shown, const std::string& prefix, std::vector<StoredFile>& out, int depth) {
    if (depth > 64) throw CorruptData(shown.string() + " nests directories more than 64 deep");
    for (const auto& e : detail::list_dir_at(dirfd, shown)) {
      std::string rel = prefix.empty() ? e.name : prefix + "/" + e.name;
      if (e.is_dir()) {
        detail::Fd sub = detail::open_dir_at(dirfd, e.name, shown / e.name);
        walk(sub.get(), shown / e.name, rel, out, depth + 1);
      } else if (rel != "manifest.json") {
        out.push_back({rel, e.is_regular(), e.is_regular() ? "" : detail::describe_file_type(e.mode)});
      }
    }
  }

  std::vector<StoredFile> list_files(const Digest& d) override {
    std::vector<StoredFile> out;
    detail::Fd art = dir(object_rel(d));
    walk(art.get(), root_ / object_rel(d), "", out, 0);
    std::sort(out.begin(), out.end(), [](const StoredFile& a, const StoredFile& b) { return a.path < b.path; });
    return out;
  }

  std::vector<Digest> list_artifacts(std::vector<std::string>* problems) override {
    std::vector<Digest> out;
    detail::Fd objects = dir("objects/sha256");
    for (const auto& fan : detail::list_dir_at(objects.get(), root_ / "objects/sha256")) {
      bool fan_name = fan.name.size() == 2 && is_hex(fan.name);
      if (!fan.is_dir()) {
        if (!fan_name) continue;
        std::string problem = root_.string() + ": objects/sha256/" + fan.name + " is " +
                              detail::describe_file_type(fan.mode) + ", not a directory";
        if (!problems) throw CorruptData(problem);
        problems->push_back(problem);
        continue;
      }
      if (!fan_name) continue;
      detail::Fd fan_fd = dir("objects/sha256/" + fan.name);
      for (const auto& entry : detail::list_dir_at(fan_fd.get(), root_ / "objects/sha256" / fan.name))
        if (entry.name.size() == 64 && is_hex(entry.name) && entry.name.compare(0, 2, fan.name) == 0)
          out.push_back(Digest(Sha256Value::from_hex(entry.name)));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // The artifact directory's own mtime: set when its last entry (the
  // manifest) was written in staging, kept by the publishing rename, and
  // reset by touch_artifact.
  std::chrono::system_clock::time_point artifact_time(const Digest& d) override {
    detail::Fd art = dir(object_rel(d));
    struct stat st {};
    if (::fstat(art.get(), &st) != 0) detail::throw_errno("cannot stat", root_ / object_rel(d));
    return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  }

  void touch_artifact(const Digest& d) override {
    detail::Fd art = dir(object_rel(d));
    if (::futimens(art.get(), nullptr) != 0) detail::throw_errno("cannot touch", root_ / object_rel(d));
  }

  std::uint64_t artifact_bytes(const Digest& d) override {
    try {
      detail::Fd fan = dir(fan_rel(d));
      return detail::tree_bytes_at(fan.get(), d.hex());
    } catch (const NotFound&) {
      return 0;
    }
  }

  std::uint64_t remove_artifact(const Digest& d) override {
    detail::Fd fan;
    try {
      fan = dir(fan_rel(d));
    } catch (const NotFound&) {
      return 0;
    }
    detail::Fd tmp = dir("tmp");
    auto hex = d.hex();
    std::uint64_t bytes = detail::tree_bytes_at(fan.get(), hex);
    // Renaming first makes the removal atomic for readers resolving the digest.
    std::string trash = "trash-" + random_id();
    if (::renameat(fan.get(), hex.c_str(), tmp.get(), trash.c_str()) != 0) {
      if (errno == ENOENT) return 0;
      detail::throw_errno("cannot remove artifact", root_ / object_rel(d));
    }
    detail::remove_tree_at(tmp.get(), trash, root_ / "tmp" / trash);
    return bytes;
  }

  std::uint64_t add_version(std::string_view name, nlohmann::json record) override {
    std::string rel = "names/" + std::string(name);
    auto numbering = lease("names.lock", LOCK_SH);  // no version is removed while one is chosen
    detail::Fd name_dir = dir(rel, true);
    detail::Fd tmp = dir("tmp");
    auto versions = versions_in(name_dir.get(), root_ / rel);
    // Numbers of removed versions are never issued again.
    std::uint64_t highest = std::max(versions.empty() ? 0 : versions.back(), tombstone_of(name_dir.get(), rel));
    if (highest == std::numeric_limits<std::uint64_t>::max())
      throw CorruptData("name '" + std::string(name) + "' has reached the largest possible version number");
    std::uint64_t version = highest + 1;
    std::string tmp_name = "name-" + random_id() + ".json";
    fs::path tmp_shown = root_ / "tmp" / tmp_name;
    for (;; ++version) {
      record["version"] = version;
      auto text = record.dump(2, ' ', false, nlohmann::json::error_handler_t::strict) + "\n";
      if (text.size() > kMaxRecordBytes)
        throw InvalidArgument("the name record for '" + std::string(name) + "' is " + std::to_string(text.size()) +
                              " bytes, more than the " + std::to_string(kMaxRecordBytes) + " a record may hold");
      {
        detail::Fd fd(::openat(tmp.get(), tmp_name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
        if (!fd) detail::throw_errno("cannot create", tmp_shown);
        detail::pwrite_all(fd.get(), text.data(), text.size(), 0, tmp_shown);
        if (::ftruncate(fd.get(), static_cast<off_t>(text.size())) != 0) detail::throw_errno("cannot truncate", tmp_shown);
        if (durable_) sync_fd(fd.get(), tmp_shown);
      }
      // link() never replaces an existing file: exactly one writer wins each version.
      std::string file = std::to_string(version) + ".json";
      if (::linkat(tmp.get(), tmp_name.c_str(), name_dir.get(), file.c_str(), 0) == 0) {
        if (durable_) {
          sync_fd(name_dir.get(), root_ / rel);
          detail::Fd names = dir("names");
          sync_fd(names.get(), root_ / "names");
        }
        break;
      }
      if (errno != EEXIST) {
        int err = errno;
        ::unlinkat(tmp.get(), tmp_name.c_str(), 0);
        detail::throw_errno("cannot record version", root_ / rel / file, err);
      }
    }
    ::unlinkat(tmp.get(), tmp_name.c_str(), 0);
    return version;
  }

  std::vector<std::string> list_names() override {
    detail::Fd names = dir("names");
    return detail::list_names_at(names.get(), root_ / "names");
  }

  static std::vector<std::uint64_t> versions_in(int name_dir, const fs::path& shown) {
    std::vector<std::uint64_t> out;
    for (const auto& file : detail::list_names_at(name_dir, shown)) {
      if (file.size() < 6 || !file.ends_with(".json") || file[0] == '0') continue;
      std::uint64_t v = 0;
      auto [ptr, err] = std::from_chars(file.data(), file.data() + file.size() - 5, v);
      if (err == std::errc() && ptr == file.data() + file.size() - 5) out.push_back(v);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::vector<std::uint64_t> list_versions(std::string_view name) override {
    std::string rel = "names/" + std::string(name);
    detail::Fd name_dir;
    try {
      name_dir = dir(rel);
    } catch (const NotFound&) {
      return {};
    }
    return versions_in(name_dir.get(), root_ / rel);
  }

  nlohmann::json read_version(std::string_view name, std::uint64_t version) override {
    std::string rel = "names/" + std::string(name) + "/" + std::to_string(version) + ".json";
    try {
      return read_json_record(rel, kMaxRecordBytes, "name record");
    } catch (const NotFound&) {
      throw NotFound("no version " + std::to_string(version) + " of name '" + std::string(name) + "'");
    }
  }

  std::optional<nlohmann::json> read_cache_entry(const Digest& key) override {
    std::string rel = "cache/" + key.hex() + ".json";
    try {
      return read_json_record(rel, kMaxRecordBytes, "cache entry");
    } catch (const NotFound&) {
      return std::nullopt;
    }
  }
  void write_cache_entry(const Digest& key, const nlohmann::json& entry) override {
    write_json_record("cache", key.hex() + ".json", entry, kMaxRecordBytes, "cache entry");
  }
  std::vector<Digest> list_cache_entries() override {
    detail::Fd cache = dir("cache", true);
    std::vector<Digest> keys;
    for (const auto& file : detail::list_names_at(cache.get(), root_ / "cache")) {
      if (file.size() != 64 + 5 || !file.ends_with(".json") || !is_hex(std::string_view(file).substr(0, 64))) continue;
      keys.push_back(Digest::parse("sha256:" + file.substr(0, 64)));
    }
    return keys;
  }
  bool remove_cache_entry(const Digest& key) override {
    detail::Fd cache = dir("cache", true);
    std::string file = key.hex() + ".json";
    if (::unlinkat(cache.get(), file.c_str(), 0) == 0) return true;
    if (errno == ENOENT) return false;
    detail::throw_errno("cannot remove", root_ / "cache" / file);
  }
  std::unique_ptr<Lease> step_lease(const Digest& key, bool wait) override {
    std::string file = "step-" + key.hex() + ".lock";
    return StepLease::acquire(dir("locks"), file, root_ / "locks" / file, wait);
  }

  void write_run(std::string_view pipeline, std::string_view run_id, const nlohmann::json& record) override {
    if (!valid_record_stem(pipeline) || !valid_record_stem(run_id))
      throw InvalidArgument("invalid run '" + std::string(pipeline) + "/" + std::string(run_id) + "'");
    write_json_record("runs/" + std::string(pipeline), std::string(run_id) + ".json", record, kMaxRunBytes,
                      "run record");
  }
  std::vector<std::pair<std::string, std::string>> list_runs(std::vector<std::string>* problems) override {
    std::vector<std::pair<std::string, std::string>> runs;
    detail::Fd all = dir("runs", true);
    for (const auto& e : detail::list_dir_at(all.get(), root_ / "runs")) {
      fs::path shown = root_ / "runs" / e.name;
      if (!e.is_dir() || !valid_record_stem(e.name)) {
        if (problems) problems->push_back(shown.string() + " is not a pipeline's run directory");
        continue;
      }
      detail::Fd sub = detail::open_dir_at(all.get(), e.name, shown);
      for (const auto& file : detail::list_names_at(sub.get(), shown)) {
        if (file.ends_with(".json") && valid_record_stem(file.substr(0, file.size() - 5)))
          runs.emplace_back(e.name, file.substr(0, file.size() - 5));
        else if (problems)
          problems->push_back((shown / file).string() + " is not a run record");
      }
    }
    return runs;
  }
  nlohmann::json read_run(std::string_view pipeline, std::string_view run_id) override {
    if (!valid_record_stem(pipeline) || !valid_record_stem(run_id))
      throw NotFound("no run '" + std::string(run_id) + "' of pipeline '" + std::string(pipeline) + "'");
    try {
      return read_json_record("runs/" + std::string(pipeline) + "/" + std::string(run_id) + ".json", kMaxRunBytes,
                              "run record");
    } catch (const NotFound&) {
      throw NotFound("no run '" + std::string(run_id) + "' of pipeline '" + std::string(pipeline) + "' in store " +
                     root_.string());
    }
  }

  // A small JSON object file outside artifacts and names.
  nlohmann::json read_json_record(const std::string& rel, std::size_t max_bytes, const char* what) {
    fs::path path = root_ / rel;
    std::string text;
    try {
      text = detail::read_small_at(root_fd_.get(), rel, path, max_bytes);
    } catch (const CorruptData& e) {
      throw CorruptData(std::string(what) + " " + e.what());
    }
    try {
      auto doc = parse_untrusted_json(text);
      if (doc.is_object()) return doc;
    } catch (const nlohmann::json::exception& e) {
      throw CorruptData(std::string(what) + " " + path.string() + " is not valid JSON: " + e.what());
    }
    throw CorruptData(std::string(what) + " " + path.string() + " is not a JSON object");
  }
  // Written in tmp/ and renamed over: readers see the old record or the new.
  void write_json_record(const std::string& rel_dir, const std::string& file, const nlohmann::json& record,
                         std::size_t max_bytes, const char* what) {
    auto text = record.dump(1, ' ', false, nlohmann::json::error_handler_t::strict) + "\n";
    if (text.size() > max_bytes)
      throw InvalidArgument(std::string(what) + " " + (root_ / rel_dir / file).string() + " would be " +
                            std::to_string(text.size()) + " bytes, more than the " + std::to_string(max_bytes) +
                            " a store accepts");
    detail::Fd target = dir(rel_dir, true);
    replace_file_at(target.get(), rel_dir, file, text, "record-");
  }

  // Writes `text` to `file` in the directory `dirfd` (`rel_dir` in the store)
  // by a temporary in tmp/ renamed over it: readers see the old file or the
  // new one, never part of one.
  void replace_file_at(int dirfd, const std::string& rel_dir, const std::string& file, const std::string& text,
                       const char* tmp_prefix) {
    detail::Fd tmp = dir("tmp");
    std::string tmp_name = tmp_prefix + random_id() + ".json";
    fs::path tmp_shown = root_ / "tmp" / tmp_name;
    {
      detail::Fd fd(::openat(tmp.get(), tmp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!fd) detail::throw_errno("cannot create", tmp_shown);
      try {
        detail::pwrite_all(fd.get(), text.data(), text.size(), 0, tmp_shown);
        if (durable_) sync_fd(fd.get(), tmp_shown);
      } catch (...) {
        ::unlinkat(tmp.get(), tmp_name.c_str(), 0);
        throw;
      }
    }
    if (::renameat(tmp.get(), tmp_name.c_str(), dirfd, file.c_str()) != 0) {
      int err = errno;
      ::unlinkat(tmp.get(), tmp_name.c_str(), 0);
      detail::throw_errno("cannot write", root_ / rel_dir / file, err);
    }
    if (durable_) sync_fd(dirfd, root_ / rel_dir);
  }

  std::unique_ptr<Lease> lease(const std::string& file, int operation) {
    detail::Fd locks = dir("locks");
    return std::make_unique<FileLease>(locks.get(), file, root_ / "locks" / file, operation);
  }
  std::unique_ptr<Lease> publish_lease() override { return lease("gc.lock", LOCK_SH); }
  std::unique_ptr<Lease> gc_lease() override { return lease("gc.lock", LOCK_EX); }
  std::unique_ptr<Lease> repair_lease(const Digest& digest) override {
    return lease("repair-" + digest.hex() + ".lock", LOCK_EX);
  }

  StagingSweep sweep_staging(bool dry_run, std::chrono::seconds grace) override {
    StagingSweep sweep;
    detail::Fd tmp = dir("tmp");
    fs::path shown = root_ / "tmp";
    struct timespec now {};
    ::clock_gettime(CLOCK_REALTIME, &now);
    auto old_enough = [&](const detail::DirEntry& e) {
      auto age_ns = (static_cast<std::int64_t>(now.tv_sec) - e.mtime.tv_sec) * 1'000'000'000 + (now.tv_nsec - e.mtime.tv_nsec);
      return age_ns > std::chrono::duration_cast<std::chrono::nanoseconds>(grace).count();
    };
    auto entries = detail::list_dir_at(tmp.get(), shown);
    std::set<std::string> present;
    for (const auto& e : entries) present.insert(e.name);
    auto drop = [&](const detail::DirEntry& e) {
      sweep.bytes += detail::tree_bytes_at(tmp.get(), e.name);
      ++sweep.removed;
      if (!dry_run) detail::remove_tree_at(tmp.get(), e.name, shown / e.name);
    };
    for (const auto& e : entries) {
      if (e.name.ends_with(".lock") && e.is_regular()) {
        detail::Fd fd = detail::open_at(tmp.get(), e.name, O_RDWR);
        if (!fd) continue;
        if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 || !old_enough(e)) {
          ++sweep.in_use;  // a live writer holds it, or it is too young to judge
          continue;
        }
        std::string staged = e.name.substr(0, e.name.size() - 5);
        auto it = std::find_if(entries.begin(), entries.end(), [&](const detail::DirEntry& x) { return x.name == staged; });
        if (it != entries.end()) drop(*it);
        if (!dry_run) ::unlinkat(tmp.get(), e.name.c_str(), 0);
      } else if (e.is_dir()) {
        if (present.count(e.name + ".lock")) continue;  // an older writer's lock file decides
        detail::Fd fd = detail::open_at(tmp.get(), e.name, O_RDONLY | O_DIRECTORY);
        if (!fd) continue;
        if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 || !old_enough(e)) {
          if (e.name.starts_with("stage-")) ++sweep.in_use;
          continue;
        }
        drop(e);
      } else if (old_enough(e)) {
        if (!dry_run) ::unlinkat(tmp.get(), e.name.c_str(), 0);  // a link is removed, never followed
      }
    }
    return sweep;
  }

  void remove_version(std::string_view name, std::uint64_t version) override {
    std::string rel = "names/" + std::string(name);
    std::string file = std::to_string(version) + ".json";
    auto numbering = lease("names.lock", LOCK_EX);  // no version is chosen meanwhile
    detail::Fd name_dir;
    try {
      name_dir = dir(rel);
    } catch (const NotFound&) {
      throw NotFound("no name '" + std::string(name) + "' in store " + location());
    }
    auto versions = versions_in(name_dir.get(), root_ / rel);
    if (!std::binary_search(versions.begin(), versions.end(), version))
      throw NotFound("no version " + std::to_string(version) + " of name '" + std::string(name) + "' in store " +
                     location());
    // The tombstone records the highest number issued before the version
    // goes, so add_version never issues a removed number again.
    if (versions.back() > tombstone_of(name_dir.get(), rel)) write_tombstone(name_dir.get(), rel, versions.back());
    detail::remove_tree_at(name_dir.get(), file, root_ / rel / file);  // a link is removed, never followed
    if (durable_) sync_fd(name_dir.get(), root_ / rel);
  }

  // The highest version `name` had when one of its versions was last
  // removed, or 0 when none ever was.
  std::uint64_t tombstone_of(int name_dir, const std::string& rel) {
    fs::path shown = root_ / rel / kTombstone;
    std::string text;
    try {
      text = detail::read_small_at(name_dir, kTombstone, shown, kMaxMarkerBytes);
    } catch (const NotFound&) {
      return 0;
    }
    nlohmann::json doc;
    try {
      doc = parse_untrusted_json(text);
    } catch (const nlohmann::json::exception&) {
    }
    auto it = doc.is_object() ? doc.find("highest_version") : doc.end();
    if (!doc.is_object() || it == doc.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() == 0)
      throw CorruptData(shown.string() + " is not a tombstone ({\"highest_version\": N}); versions of this name "
                        "cannot be numbered safely until it holds the highest version the name ever had");
    return it->get<std::uint64_t>();
  }

  // Replaces the tombstone atomically: written in tmp/, then renamed over.
  void write_tombstone(int name_dir, const std::string& rel, std::uint64_t highest) {
    replace_file_at(name_dir, rel, kTombstone, nlohmann::json{{"highest_version", highest}}.dump(2) + "\n", "tombstone-");
  }

 private:
  fs::path root_;
  detail::Fd root_fd_;
  bool durable_;
};

nlohmann::json read_marker(int root_fd, const fs::path& dir) {
  fs::path marker = dir / kMarker;
  std::string text = detail::read_small_at(root_fd, kMarker, marker, kMaxMarkerBytes);
  nlohmann::json doc;
  try {
    doc = parse_untrusted_json(text);
  } catch (const nlohmann::json::exception&) {
    throw CorruptData(marker.string() + " is not valid JSON");
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "amphora-store" ||
      !doc.contains("layout_version") || !doc["layout_version"].is_number_integer())
    throw CorruptData(marker.string() + " is not an Amphora store marker");
  const auto& layout = doc["layout_version"];
  bool newer = layout.is_number_unsigned() ? layout.get<std::uint64_t>() > kLayoutVersion
                                           : layout.get<std::int64_t>() > kLayoutVersion;
  if (newer)
    throw Unsupported("store " + dir.string() + " has layout version " + layout.dump() +
                      ", newer than the version " + std::to_string(kLayoutVersion) + " this build understands");
  if (layout.get<std::int64_t>() < 1) throw CorruptData(marker.string() + " has an invalid layout_version " + layout.dump());
  return doc;
}

}  // namespace

std::shared_ptr<StorageBackend> open_local_backend(const fs::path& dir, bool create, bool durable) {
  const char* how = create ? "" : "; create one with `amphora init` (from C++: Store::open with .create = true)";
  detail::Fd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root && errno == ENOENT && create) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw IoError("cannot create store directory " + dir.string() + ": " + ec.message());
    root = detail::Fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  if (!root) {
    if (errno == ENOENT) throw NotFound("store directory " + dir.string() + " does not exist" + how);
    if (errno == ENOTDIR) throw NotFound(dir.string() + " is not a directory, so not an Amphora store" + how);
    detail::throw_errno("cannot open store directory", dir);
  }
  struct stat st {};
  if (::fstatat(root.get(), kMarker, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) detail::throw_errno("cannot read", dir / kMarker);
    if (!create) throw NotFound(dir.string() + " is not an Amphora store (it has no " + kMarker + ")" + how);
    for (const char* sub : kStructure) detail::open_dir_at(root.get(), sub, dir / sub, true);
    nlohmann::json doc = {{"format", "amphora-store"}, {"layout_version", kLayoutVersion}};
    std::string text = doc.dump(2) + "\n";
    // Written beside the other files through the store's descriptor, so a
    // store path swapped for a link meanwhile cannot redirect it.
    std::string tmp = std::string(kMarker) + ".tmp-" + random_id();
    detail::Fd fd(::openat(root.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd) detail::throw_errno("cannot write", dir / kMarker);
    try {
      detail::pwrite_all(fd.get(), text.data(), text.size(), 0, dir / kMarker);
      if (::close(fd.release()) != 0) detail::throw_errno("cannot write", dir / kMarker);
      if (::renameat(root.get(), tmp.c_str(), root.get(), kMarker) != 0) detail::throw_errno("cannot write", dir / kMarker);
    } catch (...) {
      ::unlinkat(root.get(), tmp.c_str(), 0);
      throw;
    }
  } else {
    read_marker(root.get(), dir);
    // A store's own directories must be real: a link there could aim gc's
    // deletions, or a writer's files, anywhere on the machine.
    for (const char* sub : kStructure) detail::open_dir_at(root.get(), sub, dir / sub, true);
  }
  return std::make_shared<LocalBackend>(fs::absolute(dir), std::move(root), durable);
}

}  // namespace amphora
