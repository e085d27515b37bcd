#include <amphora/buffer.hpp>
#include <amphora/error.hpp>
#include <amphora/parallel.hpp>

#include "posix.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

namespace amphora {

namespace {
constexpr std::size_t kMmapThreshold = 1u << 20;
constexpr std::size_t kHugePageThreshold = 64u << 20;
std::byte kEmpty[1];

struct Mapping {
  Mapping(void* a, std::size_t n) : address(a), length(n) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { ::munmap(address, length); }
  void* address;
  std::size_t length;
};
}  // namespace

std::shared_ptr<Buffer> Buffer::allocate(std::size_t size) {
  if (size == 0) return std::make_shared<Buffer>(Key{}, kEmpty, 0, true, nullptr);
  if (size < kMmapThreshold) {
    std::shared_ptr<std::byte[]> block(new (std::nothrow) std::byte[size]());
    if (!block) throw OutOfResources("out of memory: cannot allocate " + std::to_string(size) + " bytes");
    std::byte* data = block.get();
    return std::make_shared<Buffer>(Key{}, data, size, true, std::shared_ptr<const void>(block, data));
  }
  // Anonymous mappings come zeroed and, with huge pages, fault 2 MiB at a time.
  void* address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED)
    throw OutOfResources("out of memory: cannot allocate " + std::to_string(size) + " bytes: " + std::strerror(errno));
  // Only large buffers ask for huge pages. A virtual machine's guest hands
  // whole free 2 MiB blocks back to its host, so a huge page is often memory
  // the host must supply again on first touch, while small pages come from
  // blocks still in use: for a few MiB that costs more than the page faults
  // it saves (a Menpo-like eager load measured 55 ms with huge pages
  // everywhere after a run that freed gigabytes, 18 ms without).
  if (size >= kHugePageThreshold) ::madvise(address, size, MADV_HUGEPAGE);
  auto mapping = std::make_shared<Mapping>(address, size);
  return std::make_shared<Buffer>(Key{}, static_cast<std::byte*>(address), size, true, std::move(mapping));
}

struct detail::BufferAccess {
  static Buffer::Key key() { return Buffer::Key{}; }
};

std::shared_ptr<Buffer> detail::allocate_for_overwrite(std::size_t size) {
  if (size < kMmapThreshold || size >= kHugePageThreshold) return Buffer::allocate(size);
  constexpr std::size_t kAlign = 64;  // the alignment npy payloads are written at
  void* block = std::aligned_alloc(kAlign, (size + kAlign - 1) / kAlign * kAlign);
  if (!block) throw OutOfResources("out of memory: cannot allocate " + std::to_string(size) + " bytes");
  std::shared_ptr<std::byte> owner(static_cast<std::byte*>(block), [](std::byte* b) { std::free(b); });
  return std::make_shared<Buffer>(BufferAccess::key(), owner.get(), size, true,
                                  std::shared_ptr<const void>(owner, owner.get()));
}

std::shared_ptr<const Buffer> Buffer::map_file(const std::filesystem::path& path) {
  detail::Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) throw NotFound("no such file " + path.string());
    detail::throw_errno("cannot open", path);
  }
  return detail::map_fd(fd.get(), path);
}

InputFile InputFile::open(const std::filesystem::path& path) {
  // Without O_NONBLOCK, opening a FIFO waits until some program opens it for
  // writing, possibly forever; with it the open returns and fstat refuses it.
  detail::Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) throw NotFound("no such file " + path.string());
    detail::throw_errno("cannot open", path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) detail::throw_errno("cannot stat", path);
  if (!S_ISREG(st.st_mode))
    throw InvalidArgument(path.string() + " is not a regular file (" + detail::describe_file_type(st.st_mode) + ")");
  return InputFile(fd.release(), static_cast<std::uint64_t>(st.st_size), path);
}

std::string read_text_file(const std::filesystem::path& path, std::size_t max_bytes) {
  auto file = InputFile::open(path);
  if (file.size() > max_bytes)
    throw InvalidArgument(path.string() + " is " + std::to_string(file.size()) + " bytes, more than the " +
                          std::to_string(max_bytes) + " allowed");
  std::string text(static_cast<std::size_t>(file.size()), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    std::size_t n = file.read(MutableBytes(reinterpret_cast<std::byte*>(text.data()) + got, text.size() - got));
    if (n == 0) break;  // it shrank since opened: what is there is the file
    got += n;
  }
  text.resize(got);
  return text;
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t InputFile::read(MutableBytes dst) {
  while (true) {
    const ssize_t n = ::read(fd_, dst.data(), dst.size());
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) detail::throw_errno("cannot read", path_);
  }
}

std::shared_ptr<Buffer> Buffer::read_file(const std::filesystem::path& path) {
  const InputFile file = InputFile::open(path);
  const auto size = static_cast<std::size_t>(file.size());
  auto buffer = detail::allocate_for_overwrite(size);
  std::byte* dst = buffer->mutable_data();
  constexpr std::size_t kBlock = 4u << 20;
  parallel_for((size + kBlock - 1) / kBlock, [&](std::size_t b) {
    std::size_t at = b * kBlock;
    detail::pread_exact(file.fd_, dst + at, std::min(kBlock, size - at), at, path);
  });
  return buffer;
}

namespace detail {

std::shared_ptr<const Buffer> map_fd(int fd, const std::filesystem::path& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("cannot stat", path);
  if (!S_ISREG(st.st_mode))
    throw InvalidArgument(path.string() + " is " + describe_file_type(st.st_mode) + ", not a regular file");
  auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) return std::make_shared<const Buffer>(BufferAccess::key(), kEmpty, 0, false, nullptr);
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (address == MAP_FAILED) throw_errno("cannot map", path);
  auto mapping = std::make_shared<Mapping>(address, size);
  return std::make_shared<const Buffer>(BufferAccess::key(), static_cast<std::byte*>(address), size, false,
                                        std::move(mapping));
}

}  // namespace detail

std::shared_ptr<const Buffer> Buffer::slice(std::shared_ptr<const Buffer> parent, std::size_t offset,
                                            std::size_t length) {
  if (offset > parent->size() || length > parent->size() - offset)
    throw InvalidArgument("slice [" + std::to_string(offset) + ", +" + std::to_string(length) +
                          ") exceeds a buffer of " + std::to_string(parent->size()) + " bytes");
  auto* data = const_cast<std::byte*>(parent->data()) + offset;
  bool writable = parent->writable();
  return std::make_shared<const Buffer>(Key{}, data, length, writable, std::shared_ptr<const void>(parent, parent.get()));
}

std::shared_ptr<const Buffer> Buffer::wrap(const void* data, std::size_t size, std::shared_ptr<const void> owner) {
  return std::make_shared<const Buffer>(Key{}, static_cast<std::byte*>(const_cast<void*>(data)), size, false,
                                        std::move(owner));
}

std::byte* Buffer::mutable_data() {
  if (!writable_) throw InvalidArgument("buffer is read-only (a mapped file or wrapped memory)");
  return data_;
}

}  // namespace amphora
