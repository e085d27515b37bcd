#include "posix.hpp"

#include <fcntl.h>
#include <random>
#include <sys/stat.h>

namespace amphora::detail {

Fd open_beneath(const std::filesystem::path& root, std::string_view relpath, int flags) {
  Fd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return dir;
  std::size_t start = 0;
  for (;;) {
    std::size_t slash = relpath.find('/', start);
    std::string part(relpath.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) return Fd(::openat(dir.get(), part.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    Fd next(::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return next;
    dir = std::move(next);
    start = slash + 1;
  }
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

std::string read_small_file(const std::filesystem::path& path, std::size_t max_size) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT || errno == ENOTDIR) throw NotFound("no such file " + path.string());
    throw_errno("cannot open", path);
  }
  return read_small_fd(fd.get(), path, max_size);
}

std::string read_small_fd(int fd, const std::filesystem::path& path, std::size_t max_size) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("cannot stat", path);
  if (!S_ISREG(st.st_mode)) throw CorruptData(path.string() + " is not a regular file");
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
    detail::Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd) detail::throw_errno("cannot create", tmp);
    std::uint64_t offset = 0;
    for (const auto& part : parts) {
      detail::pwrite_all(fd.get(), part.data(), part.size(), offset, tmp);
      offset += part.size();
    }
    if (::close(fd.release()) != 0) detail::throw_errno("cannot close", tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) detail::throw_errno("cannot rename into place", path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace amphora
