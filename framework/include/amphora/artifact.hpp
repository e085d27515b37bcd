#pragma once
// What a materializer sees of the store: a writer to fill a new artifact and
// a reader to open an existing one. Materializers touch payload files only
// through these, so hashing, staging, path checks and the storage backend
// stay in one place.

#include <amphora/backend.hpp>
#include <amphora/buffer.hpp>
#include <amphora/manifest.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace amphora {

/// How payloads are compressed. `automatic` compresses only what shrinks.
enum class Compression { none, lz4, automatic };

/// "none", "lz4" or "auto".
std::string_view to_string(Compression c);
/// Parses "none", "lz4" or "auto"; throws InvalidArgument naming the text otherwise.
Compression parse_compression(std::string_view text);

/// Options for one save. Aggregate, so `{.name = "emb"}` works; every member
/// has a default initializer, so leaving members out does not trip
/// -Wmissing-field-initializers.
struct SaveOptions {
  /// Name to record the artifact under as its next version; empty = unnamed
  /// (an unnamed artifact is collected by the next gc).
  std::string name{};
  Compression compression = Compression::automatic;
  /// Extra provenance stored with the name record, outside the hashed content.
  nlohmann::json provenance = nlohmann::json::object();
  /// Called now and then with the payload bytes hashed and written so far,
  /// by one thread at a time; may be empty.
  std::function<void(std::uint64_t bytes_written)> progress{};
};

class ArtifactWriter;

/// A payload file written sequentially and hashed as it is written. Close it
/// before the materializer returns: a stream destroyed unclosed fails the save.
/// A stream kept after its writer is gone is safe: using it throws
/// InvalidArgument, destroying it does nothing.
class FileStream {
 public:
  ~FileStream();
  FileStream(FileStream&&) noexcept;
  FileStream& operator=(FileStream&&) noexcept;

  /// Appends the concatenation of `parts`; whole pieces among them are hashed
  /// and written on several threads.
  void append(std::span<const ConstBytes> parts);
  void append(ConstBytes data) { append(std::span<const ConstBytes>(&data, 1)); }
  std::uint64_t size() const;
  /// Finishes the file and records it in the manifest. Throws IoError.
  void close();

 private:
  friend class ArtifactWriter;
  struct Impl;
  explicit FileStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Collects the payload files and metadata of one new artifact. Created by
/// Store for each save. write_file() and open_stream() may be called from
/// several threads at once for different paths (say, one column each); the
/// manifest lists files by path, so the digest does not depend on the order.
/// meta() and each FileStream belong to one thread at a time. Every method
/// throws IoError on write failure and InvalidArgument on a bad or duplicate path.
class ArtifactWriter {
 public:
  ArtifactWriter(std::unique_ptr<Staging> staging, const SaveOptions& options,
                 std::uint64_t min_piece_size = Manifest::kMinPieceSize);
  ~ArtifactWriter();
  ArtifactWriter(const ArtifactWriter&) = delete;
  ArtifactWriter& operator=(const ArtifactWriter&) = delete;

  /// Receives (file offset, bytes) for each range of a file just hashed, on
  /// the hashing threads, every byte exactly once, in no particular order.
  using Observer = std::function<void(std::uint64_t offset, ConstBytes bytes)>;

  /// Writes a whole file whose content is the concatenation of `parts`,
  /// hashing its pieces on all cores while writing. `observe`, if given,
  /// sees each range while it is still in cache (for summaries computed in
  /// the same pass).
  void write_file(std::string_view path, std::span<const ConstBytes> parts, const Observer& observe = {});
  void write_file(std::string_view path, std::initializer_list<ConstBytes> parts) {
    write_file(path, std::span<const ConstBytes>(parts.begin(), parts.size()));
  }
  void write_file(std::string_view path, ConstBytes data) { write_file(path, {data}); }

  /// Opens a file to be written sequentially. `size_hint`, an upper bound of
  /// its final size if known, keeps the number of pieces small for big files.
  FileStream open_stream(std::string_view path, std::uint64_t size_hint = 0);

  /// The materializer's metadata object, stored (and hashed) in the manifest.
  /// Must hold no NaN/infinite numbers and only UTF-8 text (checked when the
  /// save finishes: InvalidArgument).
  nlohmann::json& meta();
  /// Reports progress in the materializer's own units (for example input
  /// bytes consumed, when what is written is compressed). Once called, the
  /// writer stops reporting payload bytes written by itself.
  void report_progress(std::uint64_t done);
  const SaveOptions& options() const;

  /// Used by Store: completes the manifest for `materializer`/`version`,
  /// writes it, and returns it. Throws InvalidArgument if a stream was left
  /// open or destroyed unclosed, the metadata cannot be stored exactly, or the
  /// manifest would exceed Manifest::kMaxBytes.
  Manifest finish(std::string_view materializer, int version);
  /// Used by Store: publishes the finished artifact; false when it already existed.
  bool publish(const Digest& digest);
  /// Used by Store: publishes the finished artifact in place of a damaged copy.
  void replace(const Digest& digest);

 private:
  friend class FileStream;
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with its streams, which may outlive it
};

/// Read access to one published artifact. Cheap to copy; thread-safe.
class ArtifactReader {
 public:
  ArtifactReader(std::shared_ptr<StorageBackend> backend, Digest digest, Manifest manifest,
                 std::string label = {});

  const Digest& digest() const { return digest_; }
  const Manifest& manifest() const { return *manifest_; }
  const nlohmann::json& meta() const { return manifest_->meta; }
  /// How messages name this artifact, e.g. "artifact emb@3 (sha256:1a2b…)".
  const std::string& label() const { return label_; }

  bool has_file(std::string_view path) const { return manifest_->find(path) != nullptr; }
  /// Maps a payload file listed in the manifest, read-only and zero-copy.
  /// Throws NotFound if unlisted or missing, CorruptData if its size differs
  /// from the manifest. Contents are not re-hashed here (see Store::verify).
  std::shared_ptr<const Buffer> map(std::string_view path) const;
  /// Reads bytes [offset, offset + size) of a listed payload file into fresh
  /// memory with pread. Unlike a mapping, a file that shrinks meanwhile gives
  /// CorruptData, never SIGBUS: validation passes use this. Throws NotFound
  /// if unlisted, CorruptData if the range exceeds the listed size or the file
  /// is missing, short, a link or not a regular file.
  std::shared_ptr<const Buffer> read(std::string_view path, std::uint64_t offset, std::size_t size) const;
  /// The same into caller memory `dst` (at least `size` bytes).
  void read_into(std::string_view path, std::uint64_t offset, std::size_t size, std::byte* dst) const;
  /// The listed size of payload file `path`; throws NotFound if unlisted.
  std::uint64_t file_size(std::string_view path) const;

 private:
  template <class Open>
  auto open_checked(std::string_view path, Open&& open) const;

  std::shared_ptr<StorageBackend> backend_;
  Digest digest_;
  std::shared_ptr<const Manifest> manifest_;
  std::string label_;
};

}  // namespace amphora
