// The local-directory storage backend. Layout (docs/FORMAT.md):
//   amphora-store.json                store marker and layout version
//   objects/sha256/<hh>/<64 hex>/     one published artifact
//   names/<name>/<version>.json       name records
//   tmp/                              staging areas and their lock files
//   locks/gc.lock                     shared by publishers, exclusive for gc

#include <amphora/backend.hpp>
#include <amphora/error.hpp>
#include <amphora/manifest.hpp>

#include "posix.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <fcntl.h>
#include <random>
#include <sys/file.h>
#include <sys/stat.h>

namespace amphora {

namespace fs = std::filesystem;

namespace {

constexpr int kLayoutVersion = 1;
constexpr const char* kMarker = "amphora-store.json";

std::string random_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 32));
  char buf[17];
  auto v = rng();
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i, v >>= 4) buf[i] = kDigits[v & 15];
  buf[16] = 0;
  return std::to_string(::getpid()) + "-" + buf;
}

bool is_hex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::uint64_t tree_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<std::uint64_t>(st.st_size);
  }
  return total;
}

// Entries of a directory. Any error but a missing directory throws: callers
// such as gc must never mistake an unreadable directory for an empty one.
std::vector<fs::directory_entry> list_dir(const fs::path& dir) {
  std::vector<fs::directory_entry> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return out;
  for (fs::directory_iterator end; !ec && it != end; it.increment(ec)) out.push_back(*it);
  if (ec) throw IoError("cannot list " + dir.string() + ": " + ec.message());
  return out;
}

void remove_tree(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw IoError("cannot remove " + path.string() + ": " + ec.message());
}

void sync_fd(int fd, const fs::path& path) {
  if (::fsync(fd) != 0) detail::throw_errno("cannot flush", path);
}

void sync_dir(const fs::path& dir) {
  detail::Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) detail::throw_errno("cannot open directory", dir);
  sync_fd(fd.get(), dir);
}

class FileLease : public Lease {
 public:
  FileLease(const fs::path& path, int operation) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (!fd_) detail::throw_errno("cannot open lock file", path);
    while (::flock(fd_.get(), operation) != 0) {
      if (errno != EINTR) detail::throw_errno("cannot lock", path);
    }
  }

 private:
  detail::Fd fd_;
};

class LocalStagedFile : public StagedFile {
 public:
  LocalStagedFile(detail::Fd fd, fs::path path, bool durable)
      : fd_(std::move(fd)), path_(std::move(path)), durable_(durable) {}
  void write_at(std::uint64_t offset, ConstBytes data) override {
    detail::pwrite_all(fd_.get(), data.data(), data.size(), offset, path_);
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

class LocalBackend;

class LocalStaging : public Staging {
 public:
  LocalStaging(const fs::path& root, const fs::path& tmp, bool durable) : root_(root), durable_(durable) {
    for (int attempt = 0;; ++attempt) {
      std::string id = "stage-" + random_id();
      lock_path_ = tmp / (id + ".lock");
      dir_ = tmp / id;
      lock_ = detail::Fd(::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (!lock_) detail::throw_errno("cannot create staging lock", lock_path_);
      if (::flock(lock_.get(), LOCK_EX) != 0) detail::throw_errno("cannot lock", lock_path_);
      // A writer stalled between creating and locking its lock file may have
      // had it swept as abandoned; then the path names another file, or none.
      struct stat held {}, named {};
      if (::fstat(lock_.get(), &held) == 0 && ::stat(lock_path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
          held.st_dev == named.st_dev)
        break;
      if (attempt == 3) throw IoError("cannot hold a staging lock in " + tmp.string());
    }
    if (::mkdir(dir_.c_str(), 0755) != 0) {
      int err = errno;
      ::unlink(lock_path_.c_str());
      detail::throw_errno("cannot create staging directory", dir_, err);
    }
  }

  ~LocalStaging() override {
    if (!published_) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
    ::unlink(lock_path_.c_str());
  }

  std::unique_ptr<StagedFile> create_file(std::string_view relpath) override {
    fs::path path = dir_ / fs::path(std::string(relpath));
    for (fs::path sub = path.parent_path(); sub != dir_; sub = sub.parent_path()) subdirs_.push_back(sub);
    if (path.parent_path() != dir_) fs::create_directories(path.parent_path());
    detail::Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd) detail::throw_errno("cannot create", path);
    return std::make_unique<LocalStagedFile>(std::move(fd), path, durable_);
  }

  void write_manifest(std::string_view bytes) override {
    fs::path path = dir_ / "manifest.json";
    detail::Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd) detail::throw_errno("cannot create", path);
    detail::pwrite_all(fd.get(), bytes.data(), bytes.size(), 0, path);
    if (durable_) sync_fd(fd.get(), path);
  }

  // With durability on, everything staged reaches the device before the
  // rename that publishes it, and the rename itself right after.
  void flush_before_publish() {
    if (!durable_) return;
    for (const auto& sub : subdirs_) sync_dir(sub);
    sync_dir(dir_);
  }
  void flush_after_publish(const fs::path& target) {
    if (!durable_) return;
    sync_dir(target.parent_path());
    sync_dir(target.parent_path().parent_path());
  }

  bool publish(const Digest& digest) override {
    auto hex = digest.hex();
    fs::path target = root_ / "objects" / "sha256" / hex.substr(0, 2) / hex;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw IoError("cannot create " + target.parent_path().string() + ": " + ec.message());
    flush_before_publish();
    if (::rename(dir_.c_str(), target.c_str()) == 0) {
      published_ = true;
      flush_after_publish(target);
      return true;
    }
    if (errno == EEXIST || errno == ENOTEMPTY) return false;  // identical content is already there
    detail::throw_errno("cannot publish staged artifact to", target);
  }

  void replace(const Digest& digest) override {
    auto hex = digest.hex();
    fs::path target = root_ / "objects" / "sha256" / hex.substr(0, 2) / hex;
    fs::path trash = dir_.parent_path() / ("trash-" + random_id());
    flush_before_publish();
    bool moved = ::rename(target.c_str(), trash.c_str()) == 0;
    if (!moved && errno != ENOENT) detail::throw_errno("cannot move damaged artifact aside", target);
    if (::rename(dir_.c_str(), target.c_str()) != 0) {
      int err = errno;
      if (moved) ::rename(trash.c_str(), target.c_str());  // put back what was there
      detail::throw_errno("cannot publish staged artifact to", target, err);
    }
    published_ = true;
    flush_after_publish(target);
    if (moved) {
      std::error_code ec;
      fs::remove_all(trash, ec);  // best effort: gc sweeps what is left
    }
  }

 private:
  fs::path root_, dir_, lock_path_;
  bool durable_;
  std::vector<fs::path> subdirs_;
  detail::Fd lock_;
  bool published_ = false;
};

class LocalBackend : public StorageBackend {
 public:
  LocalBackend(fs::path root, bool durable) : root_(std::move(root)), durable_(durable) {}

  std::string location() const override { return root_.string(); }

  std::unique_ptr<Staging> begin_artifact() override {
    return std::make_unique<LocalStaging>(root_, root_ / "tmp", durable_);
  }

  fs::path object_dir(const Digest& d) const {
    auto hex = d.hex();
    return root_ / "objects" / "sha256" / hex.substr(0, 2) / hex;
  }

  bool has_artifact(const Digest& d) override {
    struct stat st {};
    return ::stat((object_dir(d) / "manifest.json").c_str(), &st) == 0;
  }

  std::string read_manifest(const Digest& d) override {
    auto dir = object_dir(d);
    detail::Fd fd = detail::open_beneath(dir, "manifest.json", O_RDONLY);
    if (!fd) {
      if (errno == ENOENT || errno == ENOTDIR) throw NotFound("no artifact " + d.str() + " in store " + location());
      detail::throw_errno("cannot open", dir / "manifest.json");
    }
    return detail::read_small_fd(fd.get(), dir / "manifest.json", 64u << 20);
  }

  std::shared_ptr<const Buffer> map_file(const Digest& d, std::string_view relpath) override {
    auto dir = object_dir(d);
    detail::Fd fd = detail::open_beneath(dir, relpath, O_RDONLY);
    if (!fd) {
      if (errno == ENOENT || errno == ENOTDIR) throw NotFound("no file " + (dir / std::string(relpath)).string());
      if (errno == ELOOP) throw CorruptData((dir / std::string(relpath)).string() + " is a symbolic link");
      detail::throw_errno("cannot open", dir / std::string(relpath));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0 && !S_ISREG(st.st_mode))
      throw CorruptData((dir / std::string(relpath)).string() + " is not a regular file");
    return detail::map_fd(fd.get(), dir / std::string(relpath));
  }

  std::vector<std::string> list_files(const Digest& d) override {
    std::vector<std::string> out;
    auto dir = object_dir(d);
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      auto status = it->symlink_status();
      if (fs::is_directory(status)) continue;
      auto rel = fs::relative(it->path(), dir).generic_string();
      if (rel != "manifest.json") out.push_back(rel);
    }
    if (ec) throw IoError("cannot list " + dir.string() + ": " + ec.message());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::vector<Digest> list_artifacts() override {
    std::vector<Digest> out;
    for (const auto& fan : list_dir(root_ / "objects" / "sha256")) {
      if (!fan.is_directory()) continue;
      for (const auto& entry : list_dir(fan.path())) {
        auto name = entry.path().filename().string();
        if (is_hex64(name) && name.substr(0, 2) == fan.path().filename().string())
          out.push_back(Digest(Sha256Value::from_hex(name)));
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::uint64_t artifact_bytes(const Digest& d) override { return tree_bytes(object_dir(d)); }

  std::uint64_t remove_artifact(const Digest& d) override {
    auto dir = object_dir(d);
    std::uint64_t bytes = tree_bytes(dir);
    // Renaming first makes the removal atomic for readers resolving the digest.
    fs::path trash = root_ / "tmp" / ("trash-" + random_id());
    if (::rename(dir.c_str(), trash.c_str()) != 0) {
      if (errno == ENOENT) return 0;
      detail::throw_errno("cannot remove artifact", dir);
    }
    remove_tree(trash);
    return bytes;
  }

  fs::path name_dir(std::string_view name) const { return root_ / "names" / std::string(name); }

  std::uint64_t add_version(std::string_view name, nlohmann::json record) override {
    auto dir = name_dir(name);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw IoError("cannot create " + dir.string() + ": " + ec.message());
    auto versions = list_versions(name);
    if (!versions.empty() && versions.back() == std::numeric_limits<std::uint64_t>::max())
      throw CorruptData("name '" + std::string(name) + "' has a version file at the largest possible number");
    std::uint64_t version = versions.empty() ? 1 : versions.back() + 1;
    fs::path tmp = root_ / "tmp" / ("name-" + random_id() + ".json");
    for (;; ++version) {
      record["version"] = version;
      {
        detail::Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        if (!fd) detail::throw_errno("cannot create", tmp);
        auto text = record.dump(2) + "\n";
        detail::pwrite_all(fd.get(), text.data(), text.size(), 0, tmp);
        if (::ftruncate(fd.get(), static_cast<off_t>(text.size())) != 0) detail::throw_errno("cannot truncate", tmp);
        if (durable_) sync_fd(fd.get(), tmp);
      }
      // link() never replaces an existing file: exactly one writer wins each version.
      fs::path target = dir / (std::to_string(version) + ".json");
      if (::link(tmp.c_str(), target.c_str()) == 0) {
        if (durable_) {
          sync_dir(dir);
          sync_dir(dir.parent_path());
        }
        break;
      }
      if (errno != EEXIST) {
        int err = errno;
        ::unlink(tmp.c_str());
        detail::throw_errno("cannot record version", target, err);
      }
    }
    ::unlink(tmp.c_str());
    return version;
  }

  std::vector<std::string> list_names() override {
    std::vector<std::string> out;
    for (const auto& entry : list_dir(root_ / "names"))
      if (entry.is_directory() && !list_versions(entry.path().filename().string()).empty())
        out.push_back(entry.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::vector<std::uint64_t> list_versions(std::string_view name) override {
    std::vector<std::uint64_t> out;
    for (const auto& entry : list_dir(name_dir(name))) {
      auto file = entry.path().filename().string();
      if (file.size() < 6 || file.compare(file.size() - 5, 5, ".json") != 0 || file[0] == '0') continue;
      std::uint64_t v = 0;
      auto [ptr, err] = std::from_chars(file.data(), file.data() + file.size() - 5, v);
      if (err == std::errc() && ptr == file.data() + file.size() - 5) out.push_back(v);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  nlohmann::json read_version(std::string_view name, std::uint64_t version) override {
    auto path = name_dir(name) / (std::to_string(version) + ".json");
    std::string text;
    try {
      text = detail::read_small_file(path, 1u << 20);
    } catch (const NotFound&) {
      throw NotFound("no version " + std::to_string(version) + " of name '" + std::string(name) + "'");
    }
    try {
      auto doc = parse_untrusted_json(text);
      if (!doc.is_object()) throw CorruptData("name record " + path.string() + " is not a JSON object");
      return doc;
    } catch (const nlohmann::json::exception& e) {
      throw CorruptData("name record " + path.string() + " is not valid JSON: " + e.what());
    }
  }

  std::unique_ptr<Lease> publish_lease() override {
    return std::make_unique<FileLease>(root_ / "locks" / "gc.lock", LOCK_SH);
  }
  std::unique_ptr<Lease> gc_lease() override {
    return std::make_unique<FileLease>(root_ / "locks" / "gc.lock", LOCK_EX);
  }
  std::unique_ptr<Lease> repair_lease(const Digest& digest) override {
    return std::make_unique<FileLease>(root_ / "locks" / ("repair-" + digest.hex() + ".lock"), LOCK_EX);
  }

  StagingSweep sweep_staging(bool dry_run, std::chrono::seconds grace) override {
    StagingSweep sweep;
    fs::path tmp = root_ / "tmp";
    auto now = fs::file_time_type::clock::now();
    auto old_enough = [&](const fs::path& p) {
      std::error_code ec;
      auto t = fs::last_write_time(p, ec);
      return !ec && now - t > grace;
    };
    auto drop = [&](const fs::path& p) {
      sweep.bytes += fs::is_directory(p) ? tree_bytes(p) : 0;
      ++sweep.removed;
      if (!dry_run) remove_tree(p);
    };
    std::vector<fs::path> entries;
    for (const auto& entry : list_dir(tmp)) entries.push_back(entry.path());
    std::sort(entries.begin(), entries.end());
    for (const auto& p : entries) {
      auto file = p.filename().string();
      if (file.ends_with(".lock")) {
        fs::path dir = p;
        dir.replace_extension();
        detail::Fd fd(::open(p.c_str(), O_RDWR | O_CLOEXEC));
        if (!fd) continue;
        if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 || !old_enough(p)) {
          ++sweep.in_use;  // a live writer holds it
          continue;
        }
        if (fs::exists(dir)) drop(dir);
        if (!dry_run) ::unlink(p.c_str());
      } else if (fs::is_directory(p)) {
        bool owned = fs::exists(fs::path(p.string() + ".lock"));
        if (!owned && old_enough(p)) drop(p);
      } else if (old_enough(p)) {
        if (!dry_run) ::unlink(p.c_str());
      }
    }
    return sweep;
  }

 private:
  fs::path root_;
  bool durable_;
};

}  // namespace

std::shared_ptr<StorageBackend> open_local_backend(const fs::path& dir, bool create, bool durable) {
  fs::path marker = dir / kMarker;
  std::error_code ec;
  bool exists = fs::exists(marker, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw IoError("cannot read " + marker.string() + ": " + ec.message());
  if (!exists) {
    if (!create)
      throw NotFound(dir.string() + " is not an Amphora store (no " + kMarker + "); create one with `amphora init`");
    fs::create_directories(dir, ec);
    if (ec) throw IoError("cannot create store directory " + dir.string() + ": " + ec.message());
    nlohmann::json doc = {{"format", "amphora-store"}, {"layout_version", kLayoutVersion}};
    for (const char* sub : {"objects/sha256", "names", "tmp", "locks"}) {
      fs::create_directories(dir / sub, ec);
      if (ec) throw IoError("cannot create " + (dir / sub).string() + ": " + ec.message());
    }
    std::string text = doc.dump(2) + "\n";
    ConstBytes bytes(reinterpret_cast<const std::byte*>(text.data()), text.size());
    write_file_atomically(marker, {&bytes, 1});
  } else {
    nlohmann::json doc;
    try {
      doc = parse_untrusted_json(detail::read_small_file(marker, 1u << 16));
    } catch (const nlohmann::json::exception& e) {
      throw CorruptData(marker.string() + " is not valid JSON: " + e.what());
    }
    if (!doc.is_object() || !doc.contains("format") || doc["format"] != "amphora-store" ||
        !doc.contains("layout_version") || !doc["layout_version"].is_number_integer())
      throw CorruptData(marker.string() + " is not an Amphora store marker");
    if (doc["layout_version"].get<std::int64_t>() < 1)
      throw CorruptData(marker.string() + " has an invalid layout_version");
    if (doc["layout_version"].get<std::int64_t>() > kLayoutVersion)
      throw Unsupported("store " + dir.string() + " has layout version " + doc["layout_version"].dump() +
                        "; this build understands up to " + std::to_string(kLayoutVersion));
    for (const char* sub : {"objects/sha256", "names", "tmp", "locks"}) fs::create_directories(dir / sub, ec);
  }
  return std::make_shared<LocalBackend>(fs::absolute(dir), durable);
}

}  // namespace amphora
