#include "posix.hpp"

#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <random>

namespace amphora::detail {

std::string describe_file_type(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFLNK: return "a symbolic link";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
  }
  return "not a regular file";
}

namespace {

// Splits "a/b/c" into its components; empty components are kept so callers
// can refuse them.
std::vector<std::string> components(std::string_view relpath) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    auto slash = relpath.find('/', start);
    out.emplace_back(relpath.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

}  // namespace

namespace {

// openat2 resolving `relpath` beneath `dirfd` in one call, refusing a link
// at any component (ELOOP) and any way out (EXDEV): the same walk as the
// component-by-component one below, in one system call instead of one per
// component. Returns -1 with errno ENOSYS where the kernel has none (before
// Linux 5.6), and the caller walks instead.
int open_beneath_at(int dirfd, const std::string& relpath, int flags, mode_t mode) {
  static std::atomic<bool> missing{false};
  if (missing.load(std::memory_order_relaxed)) {
    errno = ENOSYS;
    return -1;
  }
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    long fd = ::syscall(SYS_openat2, dirfd, relpath.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno == EINTR || errno == EAGAIN) continue;
    if (errno == ENOSYS) missing = true;
    return -1;
  }
}

}  // namespace

Fd open_at(int dirfd, std::string_view relpath, int flags, mode_t mode) {
  auto parts = components(relpath);
  for (const auto& part : parts)
    if (part.empty() || part == "." || part == "..") {  // O_NOFOLLOW does not stop ".."
      errno = EINVAL;
      return Fd();
    }
  {
    const std::string path(relpath);
    // Opening a device runs its driver's open: look before touching one.
    // (A link on the way makes this look elsewhere, and the open refuses it.)
    struct stat st {};
    if (!(flags & O_DIRECTORY)) {
      if (::fstatat(dirfd, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)) {
          errno = ENODEV;
          return Fd();
        }
      } else if (errno == ENOENT && !(flags & O_CREAT)) {
        return Fd();  // nothing there (errno says so): no open to try
      }
    }
    int fd = open_beneath_at(dirfd, path, flags | O_NONBLOCK | O_NOCTTY, mode);
    if (fd >= 0) return Fd(fd);
    if (errno != ENOSYS) {
      // EXDEV would mean a way out, which the components above exclude.
      if (errno == EXDEV) errno = ELOOP;
      return Fd();
    }
  }
  Fd holder;
  int dir = dirfd;
  for (std::size_t k = 0; k + 1 < parts.size(); ++k) {
    Fd next(::openat(dir, parts[k].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return next;
    holder = std::move(next);
    dir = holder.get();
  }
  // Opening a device runs its driver's open: look before touching one.
  struct stat st {};
  if (::fstatat(dir, parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode))) {
    errno = ENODEV;
    return Fd();
  }
  return Fd(::openat(dir, parts.back().c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode));
}

Fd open_beneath(const std::filesystem::path& root, std::string_view relpath, int flags) {
  Fd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return dir;
  return open_at(dir.get(), relpath, flags);
}

void throw_open_error(const std::filesystem::path& shown, int err) {
  if (err == ENOENT) throw NotFound("no such file " + shown.string());
  if (err == ELOOP) throw CorruptData(shown.string() + " is a symbolic link");
  if (err == ENOTDIR) throw CorruptData(shown.string() + ": a directory on the way is a symbolic link or a file");
  if (err == ENODEV) throw CorruptData(shown.string() + " is a device or socket, not a regular file");
  if (err == EINVAL) throw CorruptData(shown.string() + ": unsafe path (empty, '.' or '..' component)");
  throw_errno("cannot open", shown, err);
}

Fd open_dir_at(int dirfd, std::string_view relpath, const std::filesystem::path& shown, bool create) {
  // A new open file description, not a duplicate: listings read it from its
  // own offset, which a duplicate would share with the held descriptor.
  if (relpath.empty()) {
    Fd fd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) throw_errno("cannot open directory", shown);
    return fd;
  }
  // One call when the directory is there and sound; the walk below makes
  // missing parts and names the component at fault otherwise.
  if (relpath.find("/./") == std::string_view::npos && !relpath.starts_with("./") && relpath != "." &&
      relpath.find("..") == std::string_view::npos && relpath.find("//") == std::string_view::npos &&
      !relpath.starts_with('/') && !relpath.ends_with('/')) {
    int fd = open_beneath_at(dirfd, std::string(relpath), O_RDONLY | O_DIRECTORY, 0);
    if (fd >= 0) return Fd(fd);
    // Missing, and not to be made: the walk would only find that again.
    if (errno == ENOENT && !create) throw NotFound("no directory " + shown.string());
    if (errno == ENOENT && relpath.find('/') == std::string_view::npos) {
      const std::string leaf(relpath);
      if (::mkdirat(dirfd, leaf.c_str(), 0755) == 0 || errno == EEXIST) {
        Fd made(::openat(dirfd, leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (made) return made;
      }
      // the walk below says what stands in the way
    }
  }
  Fd holder;
  int dir = dirfd;
  for (const auto& part : components(relpath)) {
    if (part.empty() || part == "." || part == "..") throw InvalidArgument("bad directory path '" + std::string(relpath) + "'");
    Fd next(::openat(dir, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next && errno == ENOENT && create) {
      if (::mkdirat(dir, part.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("cannot create directory", shown);
      next = Fd(::openat(dir, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (!next) {
      int err = errno;
      struct stat st {};
      if ((err == ELOOP || err == ENOTDIR) && ::fstatat(dir, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
        throw CorruptData(shown.string() + ": '" + part + "' is " + describe_file_type(st.st_mode) +
                          ", not a directory");
      if (err == ENOENT) throw NotFound("no directory " + shown.string());
      throw_errno("cannot open directory", shown, err);
    }
    holder = std::move(next);
    dir = holder.get();
  }
  return holder;
}

void require_regular(int fd, const std::filesystem::path& shown) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("cannot stat", shown);
  if (!S_ISREG(st.st_mode)) throw CorruptData(shown.string() + " is " + describe_file_type(st.st_mode) + ", not a regular file");
}

namespace {

// Calls `each(name, d_type)` for every entry of an open directory but "."
// and "..". Reads with getdents64 on the descriptor itself, which is fresh
// from its open (at its start, shared with no other): no duplicate
// descriptor, no DIR stream and its checks, no rewind.
template <class F>
void read_directory(int dirfd, const std::filesystem::path& shown, F&& each) {
  struct linux_dirent64 {
    std::uint64_t d_ino;
    std::int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[1];
  };
  alignas(8) char buffer[32768];
  for (;;) {
    long n = ::syscall(SYS_getdents64, dirfd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      // The directory was removed while open (a repair swapped it out and
      // deleted it): gone, as if it had been missing when opened.
      if (errno == ENOENT) throw NotFound(shown.string() + " was removed while it was being listed");
      throw_errno("cannot list", shown);
    }
    if (n == 0) break;
    for (long at = 0; at < n;) {
      const auto* e = reinterpret_cast<const linux_dirent64*>(buffer + at);
      std::string_view name = e->d_name;
      if (name != "." && name != "..") each(name, e->d_type);
      at += e->d_reclen;
    }
  }
}

}  // namespace

std::vector<std::string> list_names_at(int dirfd, const std::filesystem::path& shown) {
  std::vector<std::string> out;
  read_directory(dirfd, shown, [&](std::string_view name, unsigned char) { out.emplace_back(name); });
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string, mode_t>> list_types_at(int dirfd, const std::filesystem::path& shown) {
  std::vector<std::pair<std::string, mode_t>> out;
  read_directory(dirfd, shown, [&](std::string_view name, unsigned char type) {
    mode_t mode = 0;
    switch (type) {
      case DT_REG: mode = S_IFREG; break;
      case DT_DIR: mode = S_IFDIR; break;
      case DT_LNK: mode = S_IFLNK; break;
      case DT_FIFO: mode = S_IFIFO; break;
      case DT_SOCK: mode = S_IFSOCK; break;
      case DT_CHR: mode = S_IFCHR; break;
      case DT_BLK: mode = S_IFBLK; break;
      default: {
        struct stat st {};
        if (::fstatat(dirfd, std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
          if (errno == ENOENT) return;  // removed meanwhile
          throw_errno("cannot stat", shown / std::string(name));
        }
        mode = st.st_mode & S_IFMT;
      }
    }
    out.emplace_back(name, mode);
  });
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<DirEntry> list_dir_at(int dirfd, const std::filesystem::path& shown) {
  std::vector<DirEntry> out;
  for (auto& name : list_names_at(dirfd, shown)) {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed meanwhile
      throw_errno("cannot stat", shown / name);
    }
    out.push_back({std::move(name), st.st_mode, st.st_mtim, static_cast<std::uint64_t>(st.st_size)});
  }
  return out;
}

namespace {

// Directories nested deeper than this are moved up beside the tree being
// removed and removed from there, so neither open descriptors nor memory grow
// with the depth a crafted store gives them.
constexpr int kMaxRemoveDepth = 16;

void remove_bounded(int top, int dirfd, const std::string& name, const std::filesystem::path& shown, int depth,
                    std::vector<std::string>& hoisted) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return;
    throw_errno("cannot stat", shown);
  }
  if (S_ISDIR(st.st_mode)) {
    Fd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) {
      if (errno == ENOENT) return;
      throw_errno("cannot open directory", shown);
    }
    for (const auto& e : list_dir_at(sub.get(), shown)) {
      if (e.is_dir() && depth + 1 >= kMaxRemoveDepth) {
        std::string up = ".deep-" + std::to_string(::getpid()) + "-" + std::to_string(hoisted.size()) + "-" +
                         std::to_string(std::random_device{}());
        if (::renameat(sub.get(), e.name.c_str(), top, up.c_str()) != 0) throw_errno("cannot move", shown / e.name);
        hoisted.push_back(up);
        continue;
      }
      remove_bounded(top, sub.get(), e.name, shown / e.name, depth + 1, hoisted);
    }
    if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) throw_errno("cannot remove", shown);
    return;
  }
  if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) throw_errno("cannot remove", shown);
}

}  // namespace

void remove_tree_at(int dirfd, const std::string& name, const std::filesystem::path& shown) {
  std::vector<std::string> hoisted;
  remove_bounded(dirfd, dirfd, name, shown, 0, hoisted);
  while (!hoisted.empty()) {
    std::string next = std::move(hoisted.back());
    hoisted.pop_back();
    remove_bounded(dirfd, dirfd, next, shown.parent_path() / next, 0, hoisted);
  }
}

std::uint64_t tree_bytes_at(int dirfd, const std::string& name) {
  // Informational (gc's "bytes freed"): a tree deeper than this is counted
  // only down to it.
  struct Walk {
    static std::uint64_t bytes(int dirfd, const std::string& name, int depth) {
      struct stat st {};
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return 0;
      if (S_ISREG(st.st_mode)) return static_cast<std::uint64_t>(st.st_size);
      if (!S_ISDIR(st.st_mode) || depth >= kMaxRemoveDepth) return 0;
      Fd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return 0;
      std::uint64_t total = 0;
      try {
        for (const auto& e : list_dir_at(sub.get(), name)) total += bytes(sub.get(), e.name, depth + 1);
      } catch (const Error&) {
      }
      return total;
    }
  };
  return Walk::bytes(dirfd, name, 0);
}

void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::filesystem::path& path) {
  auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot write", path);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

void pwritev_all(int fd, std::span<const ConstBytes> parts, std::uint64_t offset, const std::filesystem::path& path) {
  constexpr std::size_t kMaxIov = 1024;  // IOV_MAX on Linux
  std::vector<iovec> iov;
  iov.reserve(std::min(parts.size(), kMaxIov));
  std::size_t next = 0;  // first part not yet in `iov`
  std::size_t done = 0;  // bytes of iov[0] already written
  while (next < parts.size() || !iov.empty()) {
    while (iov.size() < kMaxIov && next < parts.size()) {
      if (!parts[next].empty())
        iov.push_back({const_cast<std::byte*>(parts[next].data()), parts[next].size()});
      ++next;
    }
    if (iov.empty()) break;
    iov[0].iov_base = static_cast<char*>(iov[0].iov_base) + done;
    iov[0].iov_len -= done;
    done = 0;
    ssize_t n = ::pwritev(fd, iov.data(), static_cast<int>(iov.size()), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot write", path);
    }
    offset += static_cast<std::uint64_t>(n);
    auto left = static_cast<std::size_t>(n);
    std::size_t k = 0;
    while (k < iov.size() && left >= iov[k].iov_len) left -= iov[k++].iov_len;
    iov.erase(iov.begin(), iov.begin() + static_cast<std::ptrdiff_t>(k));
    done = left;  // a short write ends inside iov[0]
  }
}

void pread_exact(int fd, void* dst, std::size_t size, std::uint64_t offset, const std::filesystem::path& path) {
  auto* p = static_cast<char*>(dst);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot read", path);
    }
    if (n == 0)
      throw CorruptData(path.string() + " ended at byte " + std::to_string(offset) +
                        ": the file shrank while it was being read");
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

std::string read_small_at(int dirfd, std::string_view relpath, const std::filesystem::path& shown,
                          std::size_t max_size) {
  Fd fd = open_at(dirfd, relpath, O_RDONLY);
  if (!fd) throw_open_error(shown);
  return read_small_fd(fd.get(), shown, max_size);
}

std::string read_small_fd(int fd, const std::filesystem::path& path, std::size_t max_size) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("cannot stat", path);
  if (!S_ISREG(st.st_mode)) throw CorruptData(path.string() + " is " + describe_file_type(st.st_mode) + ", not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_size)
    throw CorruptData(path.string() + " is " + std::to_string(st.st_size) + " bytes, more than the " +
                      std::to_string(max_size) + " allowed");
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot read", path);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

}  // namespace amphora::detail

namespace amphora {

void write_file_atomically(const std::filesystem::path& path, std::span<const ConstBytes> parts) {
  std::random_device rd;
  auto tmp = path;
  tmp += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  try {
    detail::Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    // Name the file asked for: the temporary name means nothing to the caller.
    if (!fd) detail::throw_errno("cannot write", path);
    std::uint64_t offset = 0;
    for (const auto& part : parts) {
      detail::pwrite_all(fd.get(), part.data(), part.size(), offset, path);
      offset += part.size();
    }
    if (::close(fd.release()) != 0) detail::throw_errno("cannot write", path);
    if (::rename(tmp.c_str(), path.c_str()) != 0) detail::throw_errno("cannot rename into place", path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace amphora
