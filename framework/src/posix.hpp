#pragma once
// Small POSIX helpers shared by the framework's sources (not installed).

#include <amphora/buffer.hpp>
#include <amphora/error.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unistd.h>

namespace amphora::detail {

/// IoError with "<what> <path>: <strerror(errno)>".
[[noreturn]] inline void throw_errno(std::string_view what, const std::filesystem::path& path, int err = errno) {
  throw IoError(std::string(what) + " " + path.string() + ": " + std::strerror(err));
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

/// Maps an open regular file read-only (the mapping outlives `fd`).
std::shared_ptr<const Buffer> map_fd(int fd, const std::filesystem::path& path);
/// Opens `relpath` beneath directory `root` without following any symbolic
/// link on the way; returns an invalid Fd with errno set on failure.
Fd open_beneath(const std::filesystem::path& root, std::string_view relpath, int flags);

/// Writes all of `data` at `offset`, retrying short writes and EINTR.
void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::filesystem::path& path);
/// Reads a whole (small) file; throws NotFound if missing, IoError otherwise.
std::string read_small_file(const std::filesystem::path& path, std::size_t max_size);
/// The same for an open descriptor; `path` is for messages.
std::string read_small_fd(int fd, const std::filesystem::path& path, std::size_t max_size);

}  // namespace amphora::detail
