#pragma once
// Reference-counted byte buffers: heap or anonymous-mmap memory, or a
// read-only view of a mapped file whose mapping lives as long as any Buffer
// that refers to it.

#include <amphora/export.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

namespace detail {
struct BufferAccess;
}

using ConstBytes = std::span<const std::byte>;
using MutableBytes = std::span<std::byte>;

/// A contiguous block of bytes plus whatever keeps it alive. Immutable after
/// construction except through mutable_data() on writable buffers; safe to
/// share between threads for reading.
class Buffer {
  // Only Buffer's factories (and the framework's, through BufferAccess) make
  // a Buffer: a caller could otherwise call any memory writable.
  friend struct detail::BufferAccess;
  struct Key {
    explicit Key() = default;
  };

 public:
  /// Zero-filled writable memory. Large blocks come from anonymous mmap with
  /// transparent huge pages requested, so filling them is not bound by 4 KiB
  /// page faults. Throws OutOfResources when `size` cannot be allocated.
  static std::shared_ptr<Buffer> allocate(std::size_t size);

  /// Maps a whole file read-only. Throws NotFound, InvalidArgument when it is
  /// not a regular file, OutOfResources when no descriptor or address space
  /// is left (EMFILE, ENFILE, ENOMEM), IoError otherwise. A mapped file must not shrink
  /// while mapped (reading past its new end raises SIGBUS): use it for files
  /// nobody rewrites in place, such as stored payloads.
  static std::shared_ptr<const Buffer> map_file(const std::filesystem::path& path);

  /// Reads a whole file a user names (an import's input) into fresh memory
  /// on all cores. Never mapped, so another program truncating it cannot
  /// crash this one: a file that shrinks meanwhile is CorruptData. Throws
  /// NotFound if missing, InvalidArgument ("PATH is not a regular file (a
  /// FIFO)") for anything but a regular file, refused at once rather than
  /// waited on, OutOfResources when no descriptor or memory is left, IoError
  /// if it cannot be read.
  static std::shared_ptr<Buffer> read_file(const std::filesystem::path& path);

  /// A view of `length` bytes at `offset` of `parent`, keeping `parent` alive.
  /// Throws InvalidArgument if the range exceeds the parent.
  static std::shared_ptr<const Buffer> slice(std::shared_ptr<const Buffer> parent, std::size_t offset,
                                             std::size_t length);

  /// Takes `values` over as writable memory, without copying them.
  template <class T>
    requires std::is_trivially_copyable_v<T>
  static std::shared_ptr<Buffer> adopt(std::vector<T> values) {
    if (values.empty()) return allocate(0);
    auto owner = std::make_shared<std::vector<T>>(std::move(values));
    auto* data = reinterpret_cast<std::byte*>(owner->data());
    const std::size_t size = owner->size() * sizeof(T);
    return std::make_shared<Buffer>(Key{}, data, size, true, std::shared_ptr<const void>(std::move(owner), data));
  }

  /// Wraps caller-owned memory, read-only (mutable_data throws); `owner` is
  /// held for the buffer's lifetime.
  static std::shared_ptr<const Buffer> wrap(const void* data, std::size_t size, std::shared_ptr<const void> owner);

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  ConstBytes bytes() const { return {data_, size_}; }
  bool writable() const { return writable_; }
  /// Writable pointer; throws InvalidArgument on read-only buffers (mapped
  /// files, wrapped memory, and slices of either).
  std::byte* mutable_data();

  /// For the factories alone (Key is theirs): public only for make_shared.
  Buffer(Key, std::byte* data, std::size_t size, bool writable, std::shared_ptr<const void> owner)
      : data_(data), size_(size), writable_(writable), owner_(std::move(owner)) {}

 private:
  std::byte* data_;
  std::size_t size_;
  bool writable_;
  std::shared_ptr<const void> owner_;
};

/// A file a user names (an import's input), read front to back in blocks,
/// for inputs too large to hold at once. Opened as Buffer::read_file opens
/// its files: a FIFO or anything else but a regular file is refused at once
/// rather than waited on. Move-only; one thread at a time.
class InputFile {
 public:
  /// Throws NotFound if missing, InvalidArgument ("PATH is not a regular
  /// file (a FIFO)") for anything but a regular file, OutOfResources when no
  /// descriptor or memory is left, IoError otherwise.
  static InputFile open(const std::filesystem::path& path);
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  /// The size the file had when opened.
  std::uint64_t size() const { return size_; }
  /// Reads up to `dst.size()` bytes from the current position; returns how
  /// many were read, 0 at the end. Throws IoError naming the file.
  std::size_t read(MutableBytes dst);

 private:
  friend class Buffer;
  InputFile(int fd, std::uint64_t size, std::filesystem::path path) : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::filesystem::path path_;
};

/// Reads a whole small file a user names (a configuration), opened as
/// InputFile opens its files. Throws NotFound if missing, InvalidArgument
/// ("PATH is not a regular file (a FIFO)", "PATH is N bytes, more than the
/// MAX allowed") for anything but a regular file of at most `max_bytes`,
/// refused before reading, IoError if it cannot be read.
std::string read_text_file(const std::filesystem::path& path, std::size_t max_bytes);

/// Writes the concatenation of `parts` to `path` atomically: into a temporary
/// file beside it, renamed into place, so `path` ends up complete or untouched.
/// Throws IoError naming the file.
void write_file_atomically(const std::filesystem::path& path, std::span<const ConstBytes> parts);

}  // namespace amphora

AMPHORA_API_END
