// The local directory medium: each key is the file of that relative path.
// Besides the keys it keeps two folders of its own (docs/FORMAT.md §1.4,
// §1.5), which no key may name and no listing shows:
//   tmp/     staging areas and temporaries, renamed into place
//   locks/   empty files locked with flock()
//
// Every access starts from a descriptor of the directory and walks down
// with O_NOFOLLOW (posix.hpp), so no link planted inside can redirect a
// read, a write, a rename or a deletion outside it.

#include <amphora/storage/medium.hpp>

#include "posix.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <list>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>

namespace amphora {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTmp = "tmp";
constexpr const char* kLocks = "locks";

std::string random_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 32));
  char buf[17];
  auto v = rng();
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i, v >>= 4) buf[i] = kDigits[v & 15];
  buf[16] = 0;
  return std::to_string(::getpid()) + "-" + buf;
}

void sync_fd(int fd, const fs::path& path) {
  if (::fsync(fd) != 0) detail::throw_errno("cannot flush", path);
}

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Keys of the medium's own folders, which no caller may write or remove.
bool reserved(std::string_view key) {
  auto first = key.substr(0, key.find('/'));
  return first == kTmp || first == kLocks;
}

void check_key(std::string_view key, bool folder = false) { check_storage_key(key, folder); }

std::pair<std::string, std::string> split_key(std::string_view key) {
  auto slash = key.rfind('/');
  if (slash == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

std::string tag_of(const struct stat& st) {
  return std::to_string(st.st_ino) + "-" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + "-" + std::to_string(st.st_size);
}

ObjectInfo info_of(const struct stat& st) {
  ObjectInfo info;
  info.size = static_cast<std::uint64_t>(st.st_size);
  info.tag = tag_of(st);
  info.modified = std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  return info;
}

// A lock file of locks/. A per-key lease (KIND-<64 hex>) removes its file
// when released, so files do not pile up one per key; a waiter that locked
// a file removed meanwhile holds nothing, so every taker checks that the
// path still names the file it locked. The store-wide files stay.
// A lock file opened to be locked: made if missing, and, where this process
// may not write it (a store it can only read), opened read-only, which flock
// needs no more than.
detail::Fd open_lock_file(int locks, const std::string& file) {
  detail::Fd fd = detail::open_at(locks, file, O_RDWR | O_CREAT);
  if (!fd && (errno == EACCES || errno == EROFS || errno == EPERM)) fd = detail::open_at(locks, file, O_RDONLY);
  return fd;
}

class FileLease : public Lease {
 public:
  static std::unique_ptr<FileLease> acquire(detail::Fd locks, std::string file, fs::path shown, int operation,
                                            bool transient) {
    for (;;) {
      detail::Fd fd = open_lock_file(locks.get(), file);
      if (!fd) detail::throw_open_error(shown);
      detail::require_regular(fd.get(), shown);
      int rc;
      while ((rc = ::flock(fd.get(), operation)) != 0 && errno == EINTR) {
      }
      if (rc != 0) {
        if (errno == EWOULDBLOCK) return nullptr;
        detail::throw_errno("cannot lock", shown);
      }
      struct stat held {}, named {};
      if (::fstat(fd.get(), &held) != 0) detail::throw_errno("cannot read", shown);
      if (::fstatat(locks.get(), file.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 && named.st_ino == held.st_ino &&
          named.st_dev == held.st_dev)
        return std::unique_ptr<FileLease>(new FileLease(std::move(locks), std::move(file), std::move(fd), transient));
    }
  }
  ~FileLease() override {
    if (transient_) ::unlinkat(locks_.get(), file_.c_str(), 0);  // before fd_ closes and unlocks
  }

 private:
  FileLease(detail::Fd locks, std::string file, detail::Fd fd, bool transient)
      : locks_(std::move(locks)), file_(std::move(file)), fd_(std::move(fd)), transient_(transient) {}
  detail::Fd locks_;
  std::string file_;
  detail::Fd fd_;
  bool transient_;
};

// Shared leases of one name taken in one process share one lock: the first
// locks the file, the last unlocks it, those between cost no system call,
// and the file stays open for the next. (A flock belongs to the open file
// description, so two shared leases on one description would both end with
// the first unlock: hence the count.) Exclusive leases keep a description
// each. A forked child starts its own count on a description of its own.
struct SharedLock {
  std::mutex mutex;
  detail::Fd dir, fd;  // locks/ and the lock file, opened once
  pid_t pid = 0;
  std::size_t holders = 0;
};

class SharedFileLease : public Lease {
 public:
  explicit SharedFileLease(std::shared_ptr<SharedLock> lock) : lock_(std::move(lock)), pid_(::getpid()) {}
  ~SharedFileLease() override {
    std::lock_guard guard(lock_->mutex);
    if (lock_->pid != pid_ || ::getpid() != pid_) return;  // copied into a forked child: not its to release
    if (--lock_->holders == 0) ::flock(lock_->fd.get(), LOCK_UN);
  }

 private:
  std::shared_ptr<SharedLock> lock_;
  pid_t pid_;
};

// Descriptors of staged files are bounded per process: a table import
// writes a file per column at once, and a wide table would otherwise exhaust
// the open-file limit. Past the bound the least recently used descriptor no
// write holds is closed; its file is opened again at its next write.
class LocalStagedFile;

class StagedDescriptors {
 public:
  static StagedDescriptors& instance() {
    static StagedDescriptors* budget = new StagedDescriptors(limit_from_rlimit());  // outlives static destructors
    return *budget;
  }
  // A descriptor of `f` that stays open until unpin(f).
  int pin(LocalStagedFile& f);
  void unpin(LocalStagedFile& f);
  // Counts a descriptor just opened for `f`, pinned by the caller.
  void adopt_pinned();
  // Closes `f`'s descriptor for good; returns close()'s errno (0 when fine).
  int release(LocalStagedFile& f);
  std::size_t limit() const { return limit_; }
  std::size_t open() const {
    std::lock_guard lock(mutex_);
    return open_;
  }

 private:
  explicit StagedDescriptors(std::size_t limit) : limit_(limit) {}
  static std::size_t limit_from_rlimit() {
    struct rlimit r {};
    std::size_t soft = 1024;
    if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY) soft = static_cast<std::size_t>(r.rlim_cur);
    return std::clamp<std::size_t>(soft / 4, 16, 256);
  }
  void make_room();  // under mutex_

  mutable std::mutex mutex_;
  std::list<LocalStagedFile*> idle_;  // open and unpinned, least recently used first
  std::size_t open_ = 0;
  const std::size_t limit_;
};

class LocalStagedFile : public StagedFile {
 public:
  LocalStagedFile(detail::Fd fd, std::shared_ptr<const detail::Fd> staging, std::string rel, fs::path path, bool durable)
      : fd_(fd.release()), staging_(std::move(staging)), rel_(std::move(rel)), path_(std::move(path)), durable_(durable) {
    StagedDescriptors::instance().adopt_pinned();
    pins_ = 1;
    StagedDescriptors::instance().unpin(*this);
  }
  ~LocalStagedFile() override { (void)StagedDescriptors::instance().release(*this); }

  void write_at(std::uint64_t offset, ConstBytes data) override {
    Pinned fd(*this);
    detail::pwrite_all(fd.get(), data.data(), data.size(), offset, path_);
  }
  void write_parts_at(std::uint64_t offset, std::span<const ConstBytes> parts) override {
    Pinned fd(*this);
    detail::pwritev_all(fd.get(), parts, offset, path_);
  }
  // Allocating the extent up front spares the file system a delayed
  // allocation per page while the data streams in.
  void reserve(std::uint64_t size) override {
    if (size == 0) return;
    Pinned fd(*this);
    (void)::fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(size));
  }
  void close() override {
    if (durable_) {
      Pinned fd(*this);
      if (::fdatasync(fd.get()) != 0) detail::throw_errno("cannot flush", path_);
    }
    const int closing = StagedDescriptors::instance().release(*this);
    const int error = deferred_errno_ != 0 ? deferred_errno_ : closing;
    if (error != 0) {
      errno = error;
      detail::throw_errno("cannot close", path_);
    }
  }

 private:
  friend class StagedDescriptors;
  class Pinned {
   public:
    explicit Pinned(LocalStagedFile& f) : f_(f), fd_(StagedDescriptors::instance().pin(f)) {}
    ~Pinned() { StagedDescriptors::instance().unpin(f_); }
    int get() const { return fd_; }

   private:
    LocalStagedFile& f_;
    int fd_;
  };

  // Opens the file again after its descriptor was closed to make room.
  int reopen() {
    const auto slash = rel_.rfind('/');
    detail::Fd parent;
    if (slash != std::string::npos) parent = detail::open_dir_at(staging_->get(), rel_.substr(0, slash), path_, false);
    const std::string leaf = slash == std::string::npos ? rel_ : rel_.substr(slash + 1);
    const int fd = ::openat(parent ? parent.get() : staging_->get(), leaf.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) detail::throw_errno("cannot open again", path_);
    return fd;
  }

  // Guarded by StagedDescriptors' mutex.
  int fd_;
  unsigned pins_ = 0;
  bool closed_ = false;
  std::list<LocalStagedFile*>::iterator idle_at_;
  bool idle_ = false;
  int deferred_errno_ = 0;  // from closing the descriptor to make room

  std::shared_ptr<const detail::Fd> staging_;
  std::string rel_;
  fs::path path_;
  bool durable_;
};

void StagedDescriptors::make_room() {
  while (open_ >= limit_ && !idle_.empty()) {
    LocalStagedFile* f = idle_.front();
    idle_.pop_front();
    f->idle_ = false;
    if (::close(f->fd_) != 0 && f->deferred_errno_ == 0) f->deferred_errno_ = errno;
    f->fd_ = -1;
    --open_;
  }
}

int StagedDescriptors::pin(LocalStagedFile& f) {
  std::lock_guard lock(mutex_);
  if (f.closed_) throw InvalidArgument("write to closed staged file " + f.path_.string());
  if (f.idle_) {
    idle_.erase(f.idle_at_);
    f.idle_ = false;
  }
  if (f.fd_ < 0) {
    make_room();
    f.fd_ = f.reopen();  // rare: only past the limit
    ++open_;
  }
  ++f.pins_;
  return f.fd_;
}

void StagedDescriptors::unpin(LocalStagedFile& f) {
  std::lock_guard lock(mutex_);
  if (--f.pins_ > 0 || f.fd_ < 0 || f.closed_) return;
  f.idle_at_ = idle_.insert(idle_.end(), &f);
  f.idle_ = true;
  make_room();
}

void StagedDescriptors::adopt_pinned() {
  std::lock_guard lock(mutex_);
  ++open_;
}

int StagedDescriptors::release(LocalStagedFile& f) {
  std::lock_guard lock(mutex_);
  if (f.closed_) return 0;
  f.closed_ = true;
  if (f.idle_) idle_.erase(f.idle_at_), f.idle_ = false;
  if (f.fd_ < 0) return 0;
  const int error = ::close(f.fd_) != 0 ? errno : 0;
  f.fd_ = -1;
  --open_;
  return error;
}

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

// A staged folder is the directory tmp/stage-<pid>-<16 hex>/, locked with
// flock for the writer's lifetime and published by renaming it into place.
// Opens a directory of the medium by its relative path (making it with `create`).
using DirOpener = std::function<detail::Fd(const std::string& rel, bool create)>;

class LocalStaging : public Staging {
 public:
  LocalStaging(int root_fd, const fs::path& root, bool durable, DirOpener open_dir)
      : root_fd_(root_fd), root_(root), durable_(durable), open_dir_(std::move(open_dir)) {
    tmp_fd_ = detail::open_dir_at(root_fd_, kTmp, root_ / kTmp, true);
    // The staging directory is its own lock: no lock file is created and
    // deleted per save (on an ext4 without a journal every deleted inode
    // slows the next minutes of file creation).
    for (int attempt = 0;; ++attempt) {
      id_ = "stage-" + random_id();
      if (::mkdirat(tmp_fd_.get(), id_.c_str(), 0755) != 0) detail::throw_errno("cannot create staging directory", shown(id_));
      // A writer stalled between creating and locking its directory for
      // longer than gc's grace period may have had it swept as abandoned.
      detail::Fd dir(::openat(tmp_fd_.get(), id_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!dir && errno != ENOENT) detail::throw_errno("cannot open", shown(id_));
      dir_fd_ = std::make_shared<detail::Fd>(std::move(dir));
      if (*dir_fd_ && ::flock(dir_fd_->get(), LOCK_EX) != 0) detail::throw_errno("cannot lock", shown(id_));
      struct stat held {}, named {};
      if (*dir_fd_ && ::fstat(dir_fd_->get(), &held) == 0 &&
          ::fstatat(tmp_fd_.get(), id_.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
          held.st_ino == named.st_ino && held.st_dev == named.st_dev)
        break;
      // Only a gc run with no grace period, sweeping in a loop, gets here often.
      if (attempt == 99) throw IoError("cannot hold a staging directory in " + (root_ / kTmp).string());
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
      parent = detail::open_dir_at(dir_fd_->get(), sub, shown(id_ + "/" + sub), true);
    }
    int at = parent ? parent.get() : dir_fd_->get();
    std::string leaf = slash == std::string::npos ? rel : rel.substr(slash + 1);
    detail::Fd fd(::openat(at, leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd && errno == EEXIST) throw InvalidArgument("staged file '" + rel + "' is created twice");
    if (!fd) detail::throw_errno("cannot create", shown(id_ + "/" + rel));
    return std::make_unique<LocalStagedFile>(std::move(fd), dir_fd_, rel, shown(id_ + "/" + rel), durable_);
  }

  bool publish(std::string_view prefix, std::string_view marker, std::string_view marker_bytes) override {
    write_marker(marker, marker_bytes);
    auto [dir, leaf] = target(prefix);
    detail::Fd parent = open_dir_(dir, true);
    flush_before_publish();
    if (::renameat(tmp_fd_.get(), id_.c_str(), parent.get(), leaf.c_str()) == 0) {
      published_ = true;
      flush_after_publish(parent.get(), dir);
      return true;
    }
    // Something already holds the folder: identical content, or (not a
    // directory) damage that the caller's check will find and replace.
    if (errno == EEXIST || errno == ENOTEMPTY || errno == ENOTDIR || errno == EISDIR) return false;
    detail::throw_errno("cannot publish staged folder to", root_ / dir / leaf);
  }

  // The staged copy and the damaged one trade places in one atomic step, so
  // the folder never names nothing, whenever the process dies.
  void replace(std::string_view prefix, std::string_view marker, std::string_view marker_bytes) override {
    write_marker(marker, marker_bytes);
    auto [dir, leaf] = target(prefix);
    detail::Fd parent = open_dir_(dir, true);
    flush_before_publish();
    if (::renameat2(tmp_fd_.get(), id_.c_str(), parent.get(), leaf.c_str(), RENAME_EXCHANGE) == 0) {
      published_ = true;  // what is now at tmp/<id> is the damaged copy
      flush_after_publish(parent.get(), dir);
      try {
        detail::remove_tree_at(tmp_fd_.get(), id_, shown(id_));
      } catch (const Error&) {
        // unlocked once we return: gc sweeps it
      }
      return;
    }
    if (errno == ENOENT) {  // the damaged copy vanished meanwhile: plain publish
      // A copy another writer published first is judged by the caller's
      // next check like any other.
      if (::renameat(tmp_fd_.get(), id_.c_str(), parent.get(), leaf.c_str()) == 0) {
        published_ = true;
        flush_after_publish(parent.get(), dir);
      }
      return;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
      detail::throw_errno("cannot swap repaired folder into", root_ / dir / leaf);
    // File systems without RENAME_EXCHANGE: move the damaged copy aside and
    // the staged one in; a crash between the two leaves the folder missing
    // until the next save of the value (the damaged copy is in tmp/).
    std::string trash = "trash-" + random_id();
    bool moved = ::renameat(parent.get(), leaf.c_str(), tmp_fd_.get(), trash.c_str()) == 0;
    if (!moved && errno != ENOENT) detail::throw_errno("cannot move damaged folder aside", root_ / dir / leaf);
    if (::renameat(tmp_fd_.get(), id_.c_str(), parent.get(), leaf.c_str()) != 0) {
      int err = errno;
      if (moved) ::renameat(tmp_fd_.get(), trash.c_str(), parent.get(), leaf.c_str());
      detail::throw_errno("cannot publish staged folder to", root_ / dir / leaf, err);
    }
    published_ = true;
    flush_after_publish(parent.get(), dir);
    if (moved) {
      try {
        detail::remove_tree_at(tmp_fd_.get(), trash, shown(trash));
      } catch (const Error&) {
      }
    }
  }

 private:
  fs::path shown(const std::string& rel) const { return root_ / kTmp / rel; }

  static std::pair<std::string, std::string> target(std::string_view prefix) {
    check_key(prefix, true);
    if (!prefix.ends_with('/')) throw InvalidArgument("staged folder prefix '" + std::string(prefix) + "' must end with '/'");
    if (reserved(prefix)) throw InvalidArgument("'" + std::string(prefix) + "' is the local medium's own folder");
    return split_key(prefix.substr(0, prefix.size() - 1));
  }

  // Written last, so the staging directory's mtime is when it was complete;
  // again when a replace() follows a publish() that found the folder taken.
  void write_marker(std::string_view marker, std::string_view bytes) {
    std::string name(marker);
    detail::Fd fd(::openat(dir_fd_->get(), name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd) detail::throw_errno("cannot create", shown(id_ + "/" + name));
    detail::pwrite_all(fd.get(), bytes.data(), bytes.size(), 0, shown(id_ + "/" + name));
    if (durable_) sync_fd(fd.get(), shown(id_ + "/" + name));
  }

  // With durability on, everything staged reaches the device before the
  // rename that publishes it, and the rename itself right after.
  void flush_before_publish() {
    if (!durable_) return;
    std::lock_guard lock(mutex_);
    for (const auto& sub : subdirs_) {
      detail::Fd fd = detail::open_dir_at(dir_fd_->get(), sub, shown(id_ + "/" + sub));
      sync_fd(fd.get(), shown(id_ + "/" + sub));
    }
    sync_fd(dir_fd_->get(), shown(id_));
  }
  void flush_after_publish(int parent_fd, const std::string& dir) {
    if (!durable_) return;
    sync_fd(parent_fd, root_ / dir);
    auto up = split_key(dir).first;
    detail::Fd grand = detail::open_dir_at(root_fd_, up, root_ / up);
    sync_fd(grand.get(), root_ / up);
    sync_fd(tmp_fd_.get(), root_ / kTmp);
  }

  int root_fd_;
  fs::path root_;
  bool durable_;
  DirOpener open_dir_;
  detail::Fd tmp_fd_;
  std::shared_ptr<detail::Fd> dir_fd_;  // holds the staging lock; shared with the staged files, which reopen through it
  std::string id_;
  std::mutex mutex_;
  std::set<std::string> subdirs_;
  bool published_ = false;
};

class LocalMedium : public Medium {
 public:
  LocalMedium(fs::path root, detail::Fd root_fd, bool durable)
      : root_(std::move(root)), root_fd_(std::move(root_fd)), durable_(durable) {}

  std::string location() const override { return root_.string(); }
  bool maps_in_place() const override { return true; }

  std::optional<ObjectInfo> head(std::string_view key) override {
    check_key(key);
    auto [dir, leaf] = split_key(key);
    std::string problem;
    auto info = head_in(dir, {&leaf, 1}, &problem);
    if (!problem.empty()) throw CorruptData(problem);
    return info.front().info;
  }

  std::vector<HeadAnswer> head_each(std::string_view prefix, std::span<const std::string> names) override {
    for (const auto& name : names) {
      check_key(std::string(prefix) + name);
      if (name.find('/') != std::string::npos) return Medium::head_each(prefix, names);  // folders deeper down
    }
    return head_in(prefix.empty() ? std::string() : std::string(prefix.substr(0, prefix.size() - 1)), names);
  }

  // head() of `leaves` (names without '/') in the directory `dir`, opened
  // once (or, in a held area directory, not at all). With `thrown`, the
  // first object's problem goes there instead of into its answer.
  std::vector<HeadAnswer> head_in(const std::string& dir, std::span<const std::string> leaves,
                                  std::string* thrown = nullptr) {
    std::vector<HeadAnswer> out(leaves.size());
    auto [held, rest] = beneath(dir);
    detail::Fd parent;
    if (!rest.empty() || held == root_fd_.get()) {
      try {
        parent = open_dir(dir);
      } catch (const NotFound&) {
        return out;
      }
      held = parent.get();
    }
    for (std::size_t k = 0; k < leaves.size(); ++k) {
      const std::string key = dir.empty() ? leaves[k] : dir + "/" + leaves[k];
      struct stat st {};
      if (::fstatat(held, leaves[k].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        detail::throw_errno("cannot stat", shown(key));
      }
      if (S_ISREG(st.st_mode))
        out[k].info = info_of(st);
      else
        (thrown ? *thrown : out[k].problem) = not_regular(key, detail::describe_file_type(st.st_mode)).what();
    }
    return out;
  }

  std::string get(std::string_view key, std::size_t max_bytes) override {
    check_key(key);
    auto [fd, rest] = beneath(key);
    return detail::read_small_at(fd, rest, shown(key), max_bytes);
  }

  std::unique_ptr<RandomAccessFile> open(std::string_view key) override {
    struct stat st {};
    detail::Fd fd = open_object(key, st);
    return std::make_unique<LocalRandomAccessFile>(std::move(fd), static_cast<std::uint64_t>(st.st_size), shown(key));
  }

  std::shared_ptr<const Buffer> map(std::string_view key) override {
    struct stat st {};
    detail::Fd fd = open_object(key, st);
    return detail::map_fd(fd.get(), shown(key));
  }

  // Written to a temporary in tmp/, then renamed into place (always), linked
  // (if absent: link never replaces) or renamed under the lock of the file
  // it replaces (if matching), so readers never see part of an object.
  std::optional<ObjectInfo> put(std::string_view key, std::string_view bytes, const PutCondition& condition) override {
    check_writable(key);
    auto [dir, leaf] = split_key(key);
    detail::Fd parent = open_dir(dir, true);
    if (condition.kind == PutCondition::Kind::if_absent)
      if (auto done = put_unnamed(parent.get(), dir, leaf, key, bytes)) return *done;
    detail::Fd tmp = open_dir(kTmp, true);
    std::string temp = "put-" + random_id();
    fs::path temp_shown = root_ / kTmp / temp;
    detail::Fd fd(::openat(tmp.get(), temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd) detail::throw_errno("cannot create", temp_shown);
    auto drop_temp = [&] { ::unlinkat(tmp.get(), temp.c_str(), 0); };
    try {
      detail::pwrite_all(fd.get(), bytes.data(), bytes.size(), 0, temp_shown);
      if (durable_) sync_fd(fd.get(), temp_shown);
    } catch (...) {
      drop_temp();
      throw;
    }
    bool written = false;
    switch (condition.kind) {
      case PutCondition::Kind::always:
        if (::renameat(tmp.get(), temp.c_str(), parent.get(), leaf.c_str()) != 0) {
          int err = errno;
          drop_temp();
          detail::throw_errno("cannot write", shown(key), err);
        }
        written = true;
        break;
      case PutCondition::Kind::if_absent:
        if (::linkat(tmp.get(), temp.c_str(), parent.get(), leaf.c_str(), 0) == 0) {
          written = true;
        } else if (errno != EEXIST) {
          int err = errno;
          drop_temp();
          detail::throw_errno("cannot write", shown(key), err);
        }
        drop_temp();
        break;
      case PutCondition::Kind::if_match: {
        auto current = lock_current(parent.get(), leaf, key);
        if (current.fd && current.tag == condition.tag) {
          if (::renameat(tmp.get(), temp.c_str(), parent.get(), leaf.c_str()) != 0) {
            int err = errno;
            drop_temp();
            detail::throw_errno("cannot write", shown(key), err);
          }
          written = true;
        } else {
          drop_temp();
        }
        break;
      }
    }
    if (!written) return std::nullopt;
    if (durable_) sync_fd(parent.get(), root_ / dir);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) detail::throw_errno("cannot stat", shown(key));
    return info_of(st);
  }

  // A put if absent through an unnamed file in the target directory
  // (O_TMPFILE), linked under its name only if nothing is there: no name in
  // tmp/ to remove afterwards (on an ext4 without a journal each removed
  // inode slows the next creations nearby for a minute), nothing left behind
  // by a writer that dies. nullopt when the file system cannot, and the
  // caller goes through tmp/.
  std::optional<std::optional<ObjectInfo>> put_unnamed(int parent, const std::string& dir, const std::string& leaf,
                                                       std::string_view key, std::string_view bytes) {
    detail::Fd fd(::openat(parent, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
    if (!fd) {
      if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL || errno == ENOENT) return std::nullopt;
      detail::throw_errno("cannot create a file in", root_ / dir);
    }
    detail::pwrite_all(fd.get(), bytes.data(), bytes.size(), 0, shown(key));
    if (durable_) sync_fd(fd.get(), shown(key));
    int rc = ::linkat(fd.get(), "", parent, leaf.c_str(), AT_EMPTY_PATH);
    if (rc != 0 && (errno == ENOENT || errno == EPERM)) {
      // Without the capability AT_EMPTY_PATH asks for: through /proc.
      const std::string self = "/proc/self/fd/" + std::to_string(fd.get());
      rc = ::linkat(AT_FDCWD, self.c_str(), parent, leaf.c_str(), AT_SYMLINK_FOLLOW);
      if (rc != 0 && (errno == ENOENT || errno == EPERM)) return std::nullopt;
    }
    if (rc != 0) {
      if (errno == EEXIST) return std::optional<ObjectInfo>();
      detail::throw_errno("cannot write", shown(key));
    }
    if (durable_) sync_fd(parent, root_ / dir);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) detail::throw_errno("cannot stat", shown(key));
    return std::optional<ObjectInfo>(info_of(st));
  }

  bool remove(std::string_view key) override {
    check_writable(key);
    auto [dir, leaf] = split_key(key);
    detail::Fd parent;
    try {
      parent = open_dir(dir);
    } catch (const NotFound&) {
      return false;
    }
    struct stat st {};
    if (::fstatat(parent.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return false;
      detail::throw_errno("cannot stat", shown(key));
    }
    if (S_ISREG(st.st_mode)) {
      // Under the file's own lock, as a matching put replaces it.
      auto current = lock_current(parent.get(), leaf, key);
      if (!current.fd) return false;
      if (::unlinkat(parent.get(), leaf.c_str(), 0) != 0) {
        if (errno == ENOENT) return false;
        detail::throw_errno("cannot remove", shown(key));
      }
    } else {
      detail::remove_tree_at(parent.get(), leaf, shown(key));  // a link is removed, never followed
    }
    if (durable_) sync_fd(parent.get(), root_ / dir);
    return true;
  }

  ListPage list(std::string_view prefix, std::string_view start_after, bool shallow, std::size_t limit) override {
    limit = std::clamp<std::size_t>(limit, 1, kMaxListPage);
    auto slash = prefix.rfind('/');
    std::string dir = slash == std::string_view::npos ? "" : std::string(prefix.substr(0, slash));
    std::string fragment(slash == std::string_view::npos ? prefix : prefix.substr(slash + 1));
    if (!dir.empty()) check_key(dir);
    std::vector<ListedEntry> found;
    detail::Fd fd;
    try {
      fd = open_dir(dir);
    } catch (const NotFound&) {
      return {};
    }
    const std::string base = dir.empty() ? "" : dir + "/";
    collect(fd.get(), base, fragment, shallow, start_after, found, 0);
    std::sort(found.begin(), found.end(), [](const ListedEntry& a, const ListedEntry& b) { return a.key < b.key; });
    ListPage page;
    for (auto& e : found) {
      if (!start_after.empty() && e.key <= start_after) continue;
      if (page.entries.size() == limit) {
        page.truncated = true;
        break;
      }
      page.entries.push_back(std::move(e));
    }
    return page;
  }

  void make_folder(std::string_view prefix) override {
    check_writable(prefix, true);
    std::string_view dir = prefix.ends_with('/') ? prefix.substr(0, prefix.size() - 1) : prefix;
    open_dir(std::string(dir), true);
  }

  std::unique_ptr<Staging> begin_staging() override {
    return std::make_unique<LocalStaging>(root_fd_.get(), root_, durable_,
                                          [this](const std::string& rel, bool create) { return open_dir(rel, create); });
  }

  // Renamed into tmp/ first, so readers see the whole folder or none.
  std::uint64_t remove_folder(std::string_view prefix, std::string_view) override {
    check_writable(prefix, true);
    auto [dir, leaf] = split_key(prefix.substr(0, prefix.size() - 1));
    detail::Fd parent;
    try {
      parent = open_dir(dir);
    } catch (const NotFound&) {
      return 0;
    }
    detail::Fd tmp = open_dir(kTmp, true);
    std::uint64_t bytes = detail::tree_bytes_at(parent.get(), leaf);
    std::string trash = "trash-" + random_id();
    if (::renameat(parent.get(), leaf.c_str(), tmp.get(), trash.c_str()) != 0) {
      if (errno == ENOENT) return 0;
      detail::throw_errno("cannot remove", root_ / dir / leaf);
    }
    detail::remove_tree_at(tmp.get(), trash, root_ / kTmp / trash);
    return bytes;
  }

  std::unique_ptr<Lease> lease(std::string_view name, LeaseMode mode, bool wait) override {
    check_lease_name(name);
    const bool per_key = name.size() > 65 && name[name.size() - 65] == '-' && is_hex(name.substr(name.size() - 64));
    std::string file = std::string(name) + ".lock";
    int operation = (mode == LeaseMode::shared ? LOCK_SH : LOCK_EX) | (wait ? 0 : LOCK_NB);
    if (mode == LeaseMode::shared) return shared_lease(file, operation);
    return FileLease::acquire(open_dir(kLocks, true), file, root_ / kLocks / file, operation,
                              per_key && mode == LeaseMode::exclusive);
  }

  std::unique_ptr<Lease> shared_lease(const std::string& file, int operation) {
    std::shared_ptr<SharedLock> lock;
    {
      std::lock_guard guard(shared_locks_mutex_);
      auto& slot = shared_locks_[file];
      if (!slot) slot = std::make_shared<SharedLock>();
      lock = slot;
    }
    const fs::path shown_file = root_ / kLocks / file;
    std::lock_guard guard(lock->mutex);
    if (lock->pid != ::getpid()) {
      // Inherited over fork: the parent's description and count are the
      // parent's (closing this copy leaves the parent's lock held; an
      // unlock through it would not).
      lock->fd = detail::Fd();
      lock->dir = detail::Fd();
      lock->holders = 0;
      lock->pid = ::getpid();
    }
    if (lock->holders > 0) {
      ++lock->holders;
      return std::make_unique<SharedFileLease>(lock);
    }
    for (;;) {
      if (!lock->dir) lock->dir = open_dir(kLocks, true);
      if (!lock->fd) {
        lock->fd = open_lock_file(lock->dir.get(), file);
        if (!lock->fd) detail::throw_open_error(shown_file);
        detail::require_regular(lock->fd.get(), shown_file);
      }
      int rc;
      while ((rc = ::flock(lock->fd.get(), operation)) != 0 && errno == EINTR) {
      }
      if (rc != 0) {
        if (errno == EWOULDBLOCK) return nullptr;
        detail::throw_errno("cannot lock", shown_file);
      }
      // Still the file that locks/ names (not one removed or replaced since
      // it was opened), or it locks nobody out.
      struct stat held {}, named {};
      if (::fstat(lock->fd.get(), &held) != 0) detail::throw_errno("cannot read", shown_file);
      if (::fstatat(lock->dir.get(), file.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 && named.st_ino == held.st_ino &&
          named.st_dev == held.st_dev) {
        lock->holders = 1;
        return std::make_unique<SharedFileLease>(lock);
      }
      ::flock(lock->fd.get(), LOCK_UN);
      lock->fd = detail::Fd();
      lock->dir = detail::Fd();
    }
  }

  StagingSweep sweep_staging(bool dry_run, std::chrono::seconds grace) override {
    StagingSweep sweep;
    detail::Fd tmp = open_dir(kTmp, true);
    fs::path shown_tmp = root_ / kTmp;
    struct timespec now {};
    ::clock_gettime(CLOCK_REALTIME, &now);
    auto old_enough = [&](const detail::DirEntry& e) {
      auto age_ns = (static_cast<std::int64_t>(now.tv_sec) - e.mtime.tv_sec) * 1'000'000'000 + (now.tv_nsec - e.mtime.tv_nsec);
      return age_ns > std::chrono::duration_cast<std::chrono::nanoseconds>(grace).count();
    };
    auto entries = detail::list_dir_at(tmp.get(), shown_tmp);
    std::set<std::string> present;
    for (const auto& e : entries) present.insert(e.name);
    auto drop = [&](const detail::DirEntry& e) {
      sweep.bytes += detail::tree_bytes_at(tmp.get(), e.name);
      ++sweep.removed;
      if (!dry_run) detail::remove_tree_at(tmp.get(), e.name, shown_tmp / e.name);
    };
    for (const auto& e : entries) {
      if (e.name.ends_with(".lock") && e.is_regular()) {
        // An older writer's lock file beside its staging directory.
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

 private:
  fs::path shown(std::string_view key) const { return root_ / std::string(key); }

  detail::Fd open_dir(const std::string& rel, bool create = false) const {
    auto [fd, rest] = beneath(rel);
    return detail::open_dir_at(fd, rest, root_ / rel, create);
  }

  // The directory to resolve `rel` from, and what is left of it: the store's
  // area directories are held open, so that a path beneath one is resolved
  // from there instead of from the root. They are never removed or
  // replaced by Amphora; one replaced by someone else leaves the held
  // descriptor on the real directory, inside the store.
  std::pair<int, std::string> beneath(std::string_view rel) const {
    for (std::size_t k = 0; k < kHeld.size(); ++k) {
      std::string_view area = kHeld[k];
      if (!rel.starts_with(area) || (rel.size() > area.size() && rel[area.size()] != '/')) continue;
      int fd = held_[k].load(std::memory_order_acquire);
      if (fd < 0) fd = hold(k);
      if (fd < 0) break;  // not there yet: from the root
      return {fd, std::string(rel.size() > area.size() ? rel.substr(area.size() + 1) : std::string_view())};
    }
    return {root_fd_.get(), std::string(rel)};
  }

  int hold(std::size_t k) const {
    std::lock_guard lock(hold_mutex_);
    int fd = held_[k].load(std::memory_order_relaxed);
    if (fd >= 0) return fd;
    try {
      fd = detail::open_dir_at(root_fd_.get(), kHeld[k], root_ / kHeld[k]).release();
    } catch (const NotFound&) {
      return -1;
    }
    held_[k].store(fd, std::memory_order_release);
    return fd;
  }

  void check_writable(std::string_view key, bool folder = false) const {
    check_key(key, folder);
    if (reserved(key)) throw InvalidArgument("'" + std::string(key) + "' is in the local medium's own folders");
  }

  detail::Fd open_object(std::string_view key, struct stat& st) const {
    check_key(key);
    auto [dir, rest] = beneath(key);
    detail::Fd fd = detail::open_at(dir, rest, O_RDONLY);
    if (!fd) {
      if (errno == ELOOP) throw not_regular(key, "a symbolic link");
      detail::throw_open_error(shown(key));
    }
    if (::fstat(fd.get(), &st) != 0) detail::throw_errno("cannot stat", shown(key));
    if (!S_ISREG(st.st_mode)) throw not_regular(key, detail::describe_file_type(st.st_mode));
    return fd;
  }

  // Names the entry as its folder's listing would, then where it is.
  CorruptData not_regular(std::string_view key, const std::string& what) const {
    return CorruptData("'" + split_key(key).second + "' is " + what + ", not a regular file (" + shown(key).string() + ")");
  }

  // The file named `leaf` locked exclusively, with its tag, once the name
  // is seen to still refer to it; no fd when there is no regular file.
  struct Locked {
    detail::Fd fd;
    std::string tag;
  };
  Locked lock_current(int parent, const std::string& leaf, std::string_view key) const {
    for (int attempt = 0; attempt < 100; ++attempt) {
      detail::Fd fd(::openat(parent, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (!fd) {
        if (errno == ENOENT || errno == ELOOP) return {};
        detail::throw_errno("cannot open", shown(key));
      }
      struct stat held {};
      if (::fstat(fd.get(), &held) != 0) detail::throw_errno("cannot stat", shown(key));
      if (!S_ISREG(held.st_mode)) return {};
      while (::flock(fd.get(), LOCK_EX) != 0)
        if (errno != EINTR) detail::throw_errno("cannot lock", shown(key));
      struct stat named {};
      if (::fstatat(parent, leaf.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return {};
        detail::throw_errno("cannot stat", shown(key));
      }
      if (named.st_ino == held.st_ino && named.st_dev == held.st_dev) {
        if (::fstat(fd.get(), &held) != 0) detail::throw_errno("cannot stat", shown(key));
        return {std::move(fd), tag_of(held)};
      }
    }
    throw IoError("cannot hold " + shown(key).string() + ": it is replaced too often");
  }

  // Entries of `dirfd` (key prefix `base`) whose names start with `fragment`.
  void collect(int dirfd, const std::string& base, std::string_view fragment, bool shallow,
               std::string_view start_after, std::vector<ListedEntry>& out, int depth) const {
    if (depth > 64) throw CorruptData(shown(base).string() + " nests folders more than 64 deep");
    for (const auto& [name, mode] : detail::list_types_at(dirfd, shown(base))) {
      if (!name.starts_with(fragment)) continue;
      if (depth == 0 && base.empty() && (name == kTmp || name == kLocks)) continue;
      std::string key = base + name;
      if (S_ISDIR(mode)) {
        // A folder whose every key sorts before the cursor is skipped whole.
        if (!start_after.empty() && key + "/\xff" < start_after) continue;
        if (shallow) {
          out.push_back({key + "/", ListedEntry::Kind::folder, {}});
        } else {
          detail::Fd sub = detail::open_dir_at(dirfd, name, shown(key));
          collect(sub.get(), key + "/", "", false, start_after, out, depth + 1);
        }
      } else if (S_ISREG(mode)) {
        out.push_back({key, ListedEntry::Kind::object, {}});
      } else {
        out.push_back({key, ListedEntry::Kind::irregular, detail::describe_file_type(mode)});
      }
    }
  }

  static constexpr std::array<const char*, 5> kHeld = {"objects/sha256", "names", "cache", "runs", "claims"};
  fs::path root_;
  detail::Fd root_fd_;
  bool durable_;
  std::mutex shared_locks_mutex_;
  std::map<std::string, std::shared_ptr<SharedLock>> shared_locks_;
  mutable std::mutex hold_mutex_;
  mutable std::array<std::atomic<int>, kHeld.size()> held_{-1, -1, -1, -1, -1};

 public:
  ~LocalMedium() override {
    for (auto& fd : held_)
      if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::shared_ptr<Medium> open_local_medium(const fs::path& dir, bool create, bool durable) {
  detail::Fd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root && errno == ENOENT && create) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw IoError("cannot create store directory " + dir.string() + ": " + ec.message());
    root = detail::Fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  if (!root) {
    if (errno == ENOENT) throw NotFound("store directory " + dir.string() + " does not exist");
    if (errno == ENOTDIR) {
      // Neither missing (so no "create one") nor creatable: the path names a
      // file, or leads through one.
      struct stat st {};
      if (::stat(dir.c_str(), &st) == 0)
        throw InvalidArgument(dir.string() + " is " + detail::describe_file_type(st.st_mode) +
                              ", not a directory: a store is a directory");
      throw InvalidArgument(dir.string() + " cannot be a store directory: a component of the path is not a directory");
    }
    detail::throw_errno("cannot open store directory", dir);
  }
  // The medium's own folders must be real: a link there could aim gc's
  // sweeps, or a writer's files, anywhere on the machine. Made when first
  // needed, so opening a directory that turns out not to be a store leaves
  // it as it was.
  for (const char* own : {kTmp, kLocks}) {
    struct stat st {};
    if (::fstatat(root.get(), own, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) detail::throw_errno("cannot stat", dir / own);
      if (create) detail::open_dir_at(root.get(), own, dir / own, true);
    } else if (!S_ISDIR(st.st_mode)) {
      throw CorruptData(dir.string() + ": '" + own + "' is " + detail::describe_file_type(st.st_mode) + ", not a directory");
    }
  }
  return std::make_shared<LocalMedium>(fs::absolute(dir), std::move(root), durable);
}

}  // namespace amphora
