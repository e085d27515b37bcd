#pragma once
// Small POSIX helpers shared by the framework's sources (not installed).
//
// Everything that touches a store goes through the *_at functions below: they
// walk paths one component at a time from an open directory with O_NOFOLLOW,
// so a symbolic link planted anywhere in a store can never make Amphora read,
// write or delete outside it, and they open files O_NONBLOCK so a FIFO cannot
// make them wait forever.

#include <amphora/buffer.hpp>
#include <amphora/error.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace amphora::detail {

/// IoError with "<what> <path>: <strerror(errno)>"; OutOfResources when the
/// process or system ran out of descriptors or memory.
[[noreturn]] inline void throw_errno(std::string_view what, const std::filesystem::path& path, int err = errno) {
  std::string message = std::string(what) + " " + path.string() + ": " + std::strerror(err);
  if (err == EMFILE || err == ENFILE || err == ENOMEM) throw OutOfResources(message);
  throw IoError(message);
}

/// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

/// "a symbolic link", "a directory", "a FIFO", ... for messages.
std::string describe_file_type(mode_t mode);

/// Writable memory of `size` bytes whose contents are unspecified, for a
/// caller about to overwrite every byte (a read). Below the huge-page size it
/// comes from malloc, as numpy's arrays do, so a process that loads again
/// reuses what its last load freed instead of faulting in fresh zeroed pages.
/// Throws OutOfResources when it cannot be had.
std::shared_ptr<Buffer> allocate_for_overwrite(std::size_t size);

/// Maps an open regular file read-only (the mapping outlives `fd`).
std::shared_ptr<const Buffer> map_fd(int fd, const std::filesystem::path& path);

/// Opens `relpath` ('/'-separated) beneath the open directory `dirfd`
/// without following a symbolic link at any component, non-blocking.
/// Returns an invalid Fd with errno set on failure (ELOOP or ENOTDIR for a
/// link on the way).
Fd open_at(int dirfd, std::string_view relpath, int flags, mode_t mode = 0644);
/// The same from a directory path (opened following links: it is trusted).
Fd open_beneath(const std::filesystem::path& root, std::string_view relpath, int flags);

/// Opens directory `relpath` beneath `dirfd`, no-follow at every component;
/// with `create`, makes missing components. Throws CorruptData naming `shown`
/// (the path for messages) when a component is a symbolic link or not a
/// directory, NotFound when missing (and not created), IoError otherwise.
Fd open_dir_at(int dirfd, std::string_view relpath, const std::filesystem::path& shown, bool create = false);

/// Throws CorruptData for an open file that is not a regular file.
void require_regular(int fd, const std::filesystem::path& shown);
/// Turns a failed open_at of `shown` into the right exception: NotFound for a
/// missing file, CorruptData for a symbolic link or a non-directory on the
/// way, IoError otherwise.
[[noreturn]] void throw_open_error(const std::filesystem::path& shown, int err = errno);

/// One directory entry, classified without following links.
struct DirEntry {
  std::string name;
  mode_t mode = 0;  ///< S_IFMT bits from fstatat(AT_SYMLINK_NOFOLLOW)
  struct timespec mtime {};
  std::uint64_t size = 0;
  bool is_dir() const { return S_ISDIR(mode); }
  bool is_regular() const { return S_ISREG(mode); }
  bool is_symlink() const { return S_ISLNK(mode); }
};
/// The listing functions below read a directory descriptor fresh from its
/// open (its offset at the start, shared with no other descriptor) to its end.
/// Names in an open directory (not "." or ".."), sorted, without a stat
/// each: for directories of thousands of entries where only names matter.
/// Throws IoError.
std::vector<std::string> list_names_at(int dirfd, const std::filesystem::path& shown);
/// Names in an open directory with their file type (the S_IFMT bits of
/// st_mode), sorted by name: from the directory itself where the file
/// system records types, with an fstatat only where it does not. Throws IoError.
std::vector<std::pair<std::string, mode_t>> list_types_at(int dirfd, const std::filesystem::path& shown);
/// Entries of an open directory (not "." or ".."), sorted by name. Entries
/// that vanish while listed are skipped. Throws IoError.
std::vector<DirEntry> list_dir_at(int dirfd, const std::filesystem::path& shown);

/// Removes `name` beneath `dirfd` and, if it is a directory, everything in it,
/// never following a link (a link is removed, not its target), with a bounded
/// number of open descriptors however deep the tree (deep parts are moved up
/// beside `name` and removed from there). A missing entry is not an error.
/// Throws IoError.
void remove_tree_at(int dirfd, const std::string& name, const std::filesystem::path& shown);
/// Bytes in regular files at or beneath `name`, links not followed.
std::uint64_t tree_bytes_at(int dirfd, const std::string& name);

/// Writes all of `data` at `offset`, retrying short writes and EINTR.
void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::filesystem::path& path);
/// Writes `parts` back to back from `offset` with as few calls as pwritev
/// allows, retrying short writes and EINTR.
void pwritev_all(int fd, std::span<const ConstBytes> parts, std::uint64_t offset, const std::filesystem::path& path);
/// Reads exactly `size` bytes at `offset`; throws CorruptData naming `path`
/// when the file ends first (it shrank while being read), IoError on failure.
void pread_exact(int fd, void* dst, std::size_t size, std::uint64_t offset, const std::filesystem::path& path);
/// Reads a whole (small) regular file that must not be a link or FIFO.
/// Throws NotFound if missing, CorruptData if not a regular file or larger
/// than `max_size`, IoError otherwise.
std::string read_small_at(int dirfd, std::string_view relpath, const std::filesystem::path& shown,
                          std::size_t max_size);
/// The same for an open descriptor; `path` is for messages.
std::string read_small_fd(int fd, const std::filesystem::path& path, std::size_t max_size);

}  // namespace amphora::detail
