#pragma once
// What a materializer sees of the store: a writer to fill a new artifact and
// a reader to open an existing one. Materializers touch payload files only
// through these, so hashing, staging, path checks and storage stay in one
// place.

#include <amphora/export.hpp>
#include <amphora/array_encoding.hpp>
#include <amphora/array_view.hpp>
#include <amphora/buffer.hpp>
#include <amphora/dtype.hpp>
#include <amphora/error.hpp>
#include <amphora/manifest.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <typeindex>
#include <type_traits>
#include <utility>
#include <vector>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

AMPHORA_API_BEGIN

namespace amphora {

class Staging;
struct MaterializerEntry;
struct NpyHeader;
namespace detail {
class AMPHORA_INTERNAL ArtifactArea;
class AMPHORA_INTERNAL ArtifactContext;
struct AMPHORA_INTERNAL ArtifactAccess;
}  // namespace detail

/// Deepest nesting of child artifacts a store writes or reads (a top-level
/// artifact is at depth 0).
inline constexpr int kMaxChildDepth = 64;

/// Options for the materializers of one save, at most one object per
/// options type (amphora::TensorOptions, say). The framework carries them to
/// every materializer the save reaches, children included, without reading
/// them, so a materializer adds options without touching the framework.
/// Cheap to copy.
class MaterializerOptions {
 public:
  MaterializerOptions() = default;
  /// Holds `options`, so `SaveOptions{.options = TensorOptions{...}}` works.
  template <class O>
    requires(!std::is_same_v<std::decay_t<O>, MaterializerOptions>)
  MaterializerOptions(O options) {  // NOLINT(google-explicit-constructor): reads as the options it holds
    set(std::move(options));
  }
  /// Holds `options`, replacing any earlier options of type O.
  template <class O>
  MaterializerOptions& set(O options) {
    by_type_[typeid(O)] = std::make_shared<const O>(std::move(options));
    return *this;
  }
  /// The options of type O given to this save, or O's defaults.
  template <class O>
  O get() const {
    auto it = by_type_.find(typeid(O));
    return it == by_type_.end() ? O{} : *static_cast<const O*>(it->second.get());
  }
  template <class O>
  bool has() const {
    return by_type_.count(typeid(O)) != 0;
  }
  /// True when both hold the very same option objects, as copies of one
  /// MaterializerOptions do (equal contents in separate objects are not).
  bool same_objects(const MaterializerOptions& other) const { return by_type_ == other.by_type_; }

 private:
  std::map<std::type_index, std::shared_ptr<const void>> by_type_;
};

/// Options for one save. Aggregate, so `{.name = "emb"}` works; every member
/// has a default initializer, so leaving members out does not trip
/// -Wmissing-field-initializers.
struct SaveOptions {
  /// Name to record the artifact under as its next version; empty = unnamed
  /// (an unnamed artifact is collected by the next gc).
  std::string name{};
  /// Options for the materializers, e.g. amphora::TensorOptions{.compression = ...}.
  MaterializerOptions options{};
  /// Extra provenance stored with the name record, outside the hashed content.
  nlohmann::json provenance = nlohmann::json::object();
  /// Called now and then with the payload bytes hashed and written so far,
  /// by one thread at a time; may be empty.
  std::function<void(std::uint64_t bytes_written)> progress{};
};

/// Options for one load, passed to every materializer (and child) it reaches.
struct LoadOptions {
  /// Read payloads into private memory now, on all cores (into huge pages
  /// where the system offers them), instead of mapping them. A mapped load
  /// opens in constant time and shares the page cache, faulting pages in as
  /// they are first touched; an eager one pays the whole read up front but
  /// then runs at memory speed, which wins for a value about to be read in
  /// full, above all one written moments ago (its cached pages are small and
  /// fault in 4 KiB at a time when mapped). Materializers that decode
  /// (compressed tensors) always read eagerly.
  bool eager = false;
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

/// A 1-d `.npy` array (docs/FORMAT.md §6.2) written in pieces, for arrays
/// built as they are read and too large to hold at once: the header for the
/// declared number of elements goes first, then each piece is hashed and
/// written as it is appended. Opened by ArtifactWriter::open_array; the
/// rules of FileStream apply (close it before the materializer returns; one
/// thread at a time).
class ArrayStream {
 public:
  /// Appends whole elements of the stored dtype. Throws InvalidArgument for
  /// a partial element, for more elements than declared, or for a bool byte
  /// other than 0 or 1.
  void append(ConstBytes elements);
  template <class T>
  void append(std::span<const T> values) {
    if (dtype_of<T>::value != dtype_)
      throw InvalidArgument("array stream '" + path_ + "' holds " + std::string(dtype_name(dtype_)) + ", not " +
                            std::string(dtype_name(dtype_of<T>::value)));
    append(std::as_bytes(values));
  }
  /// Elements appended so far.
  std::uint64_t written() const { return written_; }
  /// Finishes the file and, for an encoded array, records its recipe. Throws
  /// InvalidArgument when fewer elements than declared were appended, and
  /// as FileStream::close.
  void close();

 private:
  friend class ArtifactWriter;
  ArrayStream(FileStream file, std::string path, DType dtype, std::uint64_t count, nlohmann::json recipe,
              ArtifactWriter* writer);
  FileStream file_;
  std::string path_;
  DType dtype_;
  std::uint64_t count_ = 0, written_ = 0;
  nlohmann::json recipe_;  // null unless encoded
  ArtifactWriter* writer_;
};

/// Collects the payload files, child artifacts and metadata of one new
/// artifact. Created by Store for each save (and for each child it saves).
/// write_file(), open_stream() and save_child() may be called from several
/// threads at once for different paths or roles (say, one column each); the
/// manifest lists files by path and children by role, so the digest does not
/// depend on the order. meta() and each FileStream belong to one thread at a
/// time. Every method throws IoError on write failure and InvalidArgument on a
/// bad or duplicate path or role.
class ArtifactWriter {
 public:
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

  // Typed payload files. Each reads back with the ArtifactReader member of
  // the same kind, which validates what it reads.

  /// Writes `document` in canonical JSON form (docs/FORMAT.md §3.3). Throws
  /// InvalidArgument, naming the path and where in the document, for NaN,
  /// infinities or invalid UTF-8, which JSON cannot hold exactly.
  void write_json(std::string_view path, const nlohmann::json& document);
  /// Writes an array as a .npy file (C order, little-endian, data at a
  /// multiple of 64 bytes) that numpy.load opens, and ArtifactReader::
  /// read_array maps without copying. `data` must hold exactly the bytes of
  /// `shape`, and a bool array only 0 or 1: InvalidArgument otherwise.
  /// With `encoding` (docs/FORMAT.md §6.4) the file holds the encoded
  /// elements as a 1-d array of their stored dtype and the recipe goes into
  /// the metadata under "encodings"; read_array undoes it. Throws
  /// InvalidArgument as encode_array does.
  void write_array(std::string_view path, DType dtype, std::span<const std::int64_t> shape, ConstBytes data,
                   const ArrayEncoding& encoding = {});
  /// A one-dimensional array of `values`.
  template <class T>
  void write_array(std::string_view path, std::span<const T> values, const ArrayEncoding& encoding = {}) {
    const std::int64_t n = static_cast<std::int64_t>(values.size());
    write_array(path, dtype_of<T>::value, std::span<const std::int64_t>(&n, 1), std::as_bytes(values), encoding);
  }
  /// Opens a 1-d array of `count` elements of `dtype` to be written in
  /// pieces; it reads back with read_array like one write_array wrote.
  ArrayStream open_array(std::string_view path, DType dtype, std::uint64_t count);
  /// The same for elements encoded piece by piece by the caller: `recipe` is
  /// what encode_array would give for the whole array (docs/FORMAT.md §6.4),
  /// the pieces appended are elements of its stored_dtype, its count of them
  /// in all, and read_array decodes the file. Throws InvalidArgument for a
  /// recipe without a known stored_dtype or a count.
  ArrayStream open_encoded_array(std::string_view path, nlohmann::json recipe);
  /// Writes a list of strings merged into two files: `PATH.offsets.npy`
  /// (int64, one more than there are strings, from 0 to the total length)
  /// and `PATH.bytes` (the strings back to back). Strings are bytes: any
  /// content is kept exactly.
  void write_strings(std::string_view path, std::span<const std::string> values);
  void write_strings(std::string_view path, std::span<const std::string_view> values);
  /// The same for strings already laid out back to back: string i is bytes
  /// [offsets[i], offsets[i+1]) of `bytes`. The offsets may start past 0 (a
  /// slice of a longer list) and are written rebased. Throws InvalidArgument
  /// for offsets that decrease or lie outside `bytes`.
  void write_strings(std::string_view path, ConstBytes bytes, std::span<const std::int64_t> offsets);

  /// Saves `value` as a child artifact playing `role` (a safe relative path
  /// such as "weights" or "items/3") with materializer<T>, and returns its
  /// digest. The child is a whole artifact of its own: equal values share
  /// one, whichever parents list them. Throws as Store::save.
  template <class T>
  Digest save_child(std::string_view role, const T& value);
  /// The same through a type-erased materializer; `value` points to its type.
  Digest save_child(std::string_view role, const MaterializerEntry& entry, const void* value);
  /// The same with `options` in place of this save's materializer options,
  /// for the child and everything it saves: a composite that knows one of
  /// its arrays is sorted asks for delta coding there alone.
  template <class T>
  Digest save_child(std::string_view role, const T& value, const MaterializerOptions& options);
  Digest save_child(std::string_view role, const MaterializerEntry& entry, const void* value,
                    const MaterializerOptions& options);
  /// save_child for `value`, a part of the value being saved that stays
  /// alive and unchanged until the whole save returns (a struct's field, a
  /// container's element; not a temporary built for the save): a part met
  /// again in the same save, such as one tensor referenced from two fields,
  /// is saved once and listed twice, without being written or hashed again.
  /// Only materializers whose entry gives an identity are recognised so.
  template <class T>
  Digest save_part(std::string_view role, const T& value);
  Digest save_part(std::string_view role, const MaterializerEntry& entry, const void* value);
  /// Lists the artifact `digest`, already in the store, as child `role`.
  /// Throws NotFound when the store has no such artifact.
  void add_child(std::string_view role, const Digest& digest);

  /// The materializer's metadata object, stored (and hashed) in the manifest.
  /// Must hold no NaN/infinite numbers and only UTF-8 text (checked when the
  /// save finishes: InvalidArgument). The key "encodings" is the writer's
  /// own (the recipes of encoded arrays): setting it is InvalidArgument.
  nlohmann::json& meta();
  /// Reports progress in the materializer's own units (for example input
  /// bytes consumed, when what is written is compressed). Once called, the
  /// writer stops reporting payload bytes written by itself.
  void report_progress(std::uint64_t done);
  const SaveOptions& options() const;

 private:
  friend class FileStream;
  friend struct detail::ArtifactAccess;
  struct Impl;
  explicit ArtifactWriter(std::shared_ptr<Impl> impl);
  Digest save_child_or_part(std::string_view role, const MaterializerEntry& entry, const void* value,
                            const MaterializerOptions& options, bool part);
  std::shared_ptr<Impl> impl_;  // shared with its streams, which may outlive it
};

/// Read access to one published artifact. Cheap to copy; thread-safe.
class ArtifactReader {
 public:
  const Digest& digest() const { return digest_; }
  // On a temporary reader these return copies, so that
  // `for (auto& c : store.open_artifact(ref).children())` does not dangle.
  const Manifest& manifest() const& { return *manifest_; }
  Manifest manifest() const&& { return *manifest_; }
  const nlohmann::json& meta() const& { return manifest_->meta; }
  nlohmann::json meta() const&& { return manifest_->meta; }
  /// Metadata value `key` as a T. Throws CorruptData naming this artifact and
  /// the key when it is missing or not a T (an integer out of T's range, a
  /// string where a number belongs, ...).
  template <class T>
  T meta(std::string_view key) const;
  /// The materializer format version this artifact was written with (at most
  /// the version of the materializer reading it), so a materializer can read
  /// its older formats.
  int format_version() const { return manifest_->materializer_version; }
  /// How messages name this artifact, e.g. "artifact emb@3 (sha256:1a2b…)".
  const std::string& label() const { return label_; }

  bool has_file(std::string_view path) const { return manifest_->find(path) != nullptr; }
  /// Maps a payload file listed in the manifest, read-only and zero-copy.
  /// Throws NotFound if unlisted or the artifact was collected, CorruptData if the file is missing
  /// or its size differs from the manifest. Contents are not re-hashed here (see Store::verify).
  std::shared_ptr<const Buffer> map(std::string_view path) const;
  /// Whether map() shares the stored bytes (a local store) rather than
  /// fetching the whole file into memory (a remote one): a reader after a
  /// small part of a large file uses read() where it is not.
  bool maps_in_place() const;
  /// Reads bytes [offset, offset + size) of a listed payload file into fresh
  /// memory with pread. Unlike a mapping, a file that shrinks meanwhile gives
  /// CorruptData, never SIGBUS: validation passes use this. Throws NotFound
  /// if unlisted, CorruptData if the range exceeds the listed size or the file
  /// is missing, short, a link or not a regular file.
  std::shared_ptr<const Buffer> read(std::string_view path, std::uint64_t offset, std::size_t size) const;
  /// The same into caller memory `dst` (at least `size` bytes).
  void read_into(std::string_view path, std::uint64_t offset, std::size_t size, std::byte* dst) const;
  /// One range of a payload file for read_ranges: `size` bytes at `offset`, into `dst`.
  struct Range {
    std::uint64_t offset;
    std::size_t size;
    std::byte* dst;
  };
  /// Reads every range of payload file `path` into caller memory, opening
  /// the file once: a header and a few rows of a large file cost one open
  /// and a pread each. Throws as read_into, before reading anything when a
  /// range lies outside the listed size.
  void read_ranges(std::string_view path, std::span<const Range> ranges) const;
  /// The listed size of payload file `path`; throws NotFound if unlisted.
  std::uint64_t file_size(std::string_view path) const;
  /// The whole of payload file `path` read into fresh memory on all cores
  /// (what LoadOptions::eager asks for). Throws as read().
  std::shared_ptr<const Buffer> read_file(std::string_view path) const;
  /// map() or read_file(), as load_options().eager says.
  std::shared_ptr<const Buffer> load_file(std::string_view path) const {
    return options_.eager ? read_file(path) : map(path);
  }
  /// The options of the load this reader serves.
  const LoadOptions& load_options() const { return options_; }
  /// A copy of this reader serving a load with `options`.
  ArtifactReader with_options(const LoadOptions& options) const {
    ArtifactReader copy = *this;
    copy.options_ = options;
    return copy;
  }

  // Typed payload files, as ArtifactWriter writes them. Every check failure
  // is CorruptData naming this artifact and the file.

  /// Parses JSON file `path` (nesting at most 64 levels).
  nlohmann::json read_json(std::string_view path) const;
  /// Maps .npy file `path` as an array without copying. Checks the header,
  /// C order and little-endian data, the shape against the file size (exact),
  /// the data offset against the dtype's alignment, and bool bytes. An array
  /// written with an ArrayEncoding is decoded into fresh memory instead,
  /// after the same checks of the stored file and of its recipe.
  ArrayView read_array(std::string_view path) const;
  /// The same, also requiring `dtype` and, when `ndim` >= 0, that many
  /// dimensions. A bfloat16 array is stored as uint16 words (.npy has no
  /// bfloat16), so only this overload gives it back as bfloat16.
  ArrayView read_array(std::string_view path, DType dtype, int ndim = -1) const;
  /// Maps the merged strings written by write_strings(path), checking that the
  /// offsets start at 0, never decrease and end at the size of the bytes file.
  StringsView read_strings(std::string_view path) const;
  /// Elements [begin, end) of the 1-d array `path` of `count` elements of
  /// `dtype`, reading only their bytes where the file allows: an array
  /// stored as it is, or encoded element by element (decimal, squeeze); one
  /// with delta or shuffle is read whole and sliced. A remote store fetches
  /// only what is read. Throws as read_array, CorruptData when the array
  /// does not hold `count` elements, InvalidArgument for a range outside it.
  ArrayView read_array_range(std::string_view path, DType dtype, std::uint64_t count, std::uint64_t begin,
                             std::uint64_t end) const;
  /// The element count of the 1-d array `path`, from its header or
  /// encoding recipe alone. Throws as read_array.
  std::uint64_t array_length(std::string_view path) const;
  /// Strings [begin, end) of the `count` merged strings under `path`, their
  /// offsets rebased to start at 0, reading only their offsets and bytes.
  /// The offsets read are checked as read_strings checks all of them.
  StringsView read_strings_range(std::string_view path, std::uint64_t count, std::uint64_t begin,
                                 std::uint64_t end) const;
  /// The strings at `indices` (ascending, distinct, each below `count`) of
  /// the `count` merged strings under `path`, in that order, reading only
  /// their offsets and bytes; nearby ones are read together, so a few words
  /// of a large dictionary on an object store cost a few requests. Checks
  /// the offsets it reads as read_strings_range does; InvalidArgument for
  /// indices out of order or range.
  StringsView read_strings_at(std::string_view path, std::uint64_t count, std::span<const std::uint64_t> indices) const;

  /// The children listed in the manifest, sorted by role.
  const std::vector<ChildEntry>& children() const& { return manifest_->children; }
  std::vector<ChildEntry> children() const&& { return manifest_->children; }
  bool has_child(std::string_view role) const { return manifest_->find_child(role) != nullptr; }
  /// Opens child `role`, its manifest checked against the digest the parent
  /// lists. Throws CorruptData when the parent lists no such role, or the
  /// child is missing, damaged or nested deeper than kMaxChildDepth.
  ArtifactReader open_child(std::string_view role) const;
  /// Loads child `role` as a T with materializer<T>. Throws as open_child,
  /// and TypeMismatch when the child was written by another materializer,
  /// Unsupported when by a newer format version of materializer<T>.
  template <class T>
  T load_child(std::string_view role) const;

  /// Throws TypeMismatch unless this artifact was written by materializer
  /// `name` (`what` says who expected it), Unsupported when its format
  /// version is newer than `version`.
  void require_materializer(std::string_view name, int version, std::string_view what) const;
  /// Throws Unsupported, naming this artifact, its format version, `readable`
  /// and `origin` (where the reading materializer comes from, if given), when
  /// the artifact was written by a format version newer than `readable`.
  void require_version(int readable, std::string_view origin = {}) const;

 private:
  friend struct detail::ArtifactAccess;
  AMPHORA_INTERNAL ArtifactReader(std::shared_ptr<detail::ArtifactContext> context,
                                  std::shared_ptr<const detail::ArtifactArea> artifacts, Digest digest,
                                  std::shared_ptr<const Manifest> manifest, std::string label, int depth);
  template <class Access>
  auto checked(std::string_view path, Access&& access) const;
  std::optional<NpyHeader> read_npy_head(std::string_view path, std::shared_ptr<const Buffer>& head) const;
  std::vector<ArrayView> read_array_ranges(std::string_view path, DType dtype, std::uint64_t count,
                                           std::span<const std::pair<std::uint64_t, std::uint64_t>> ranges) const;
  template <class Open>
  auto open_checked(std::string_view path, Open&& open) const;
  ArrayView read_stored_array(std::string_view path, const std::string& where) const;
  ArrayView read_encoded(std::string_view path, const nlohmann::json& recipe, const std::string& where) const;
  [[noreturn]] void bad_meta(std::string_view key, std::string_view problem) const;

  std::shared_ptr<detail::ArtifactContext> context_;
  std::shared_ptr<const detail::ArtifactArea> artifacts_;
  Digest digest_;
  std::shared_ptr<const Manifest> manifest_;
  std::string label_;
  int depth_ = 0;
  LoadOptions options_;
};

namespace detail {

/// Whether `value` holds a T exactly: the JSON type matches, and integers fit.
template <class T>
bool json_holds(const nlohmann::json& value) {
  if constexpr (std::is_same_v<T, nlohmann::json>) {
    return true;
  } else if constexpr (std::is_same_v<T, bool>) {
    return value.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    if (value.is_number_unsigned()) return value.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
    if (!value.is_number_integer()) return false;
    auto v = value.get<std::int64_t>();
    if constexpr (std::is_signed_v<T>)
      return v >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
             v <= static_cast<std::int64_t>(std::numeric_limits<T>::max());
    else
      return v >= 0 && static_cast<std::uint64_t>(v) <= std::numeric_limits<T>::max();
  } else if constexpr (std::is_floating_point_v<T>) {
    return value.is_number();
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value.is_string();
  } else {
    try {
      (void)value.get<T>();
      return true;
    } catch (const nlohmann::json::exception&) {
      return false;
    }
  }
}

}  // namespace detail

template <class T>
T ArtifactReader::meta(std::string_view key) const {
  auto it = manifest_->meta.find(key);
  if (it == manifest_->meta.end()) bad_meta(key, "is missing");
  if (!detail::json_holds<T>(*it)) bad_meta(key, "does not hold the expected type (it is " + it->dump().substr(0, 80) + ")");
  return it->template get<T>();
}

}  // namespace amphora

AMPHORA_API_END
