#include <amphora/artifact.hpp>
#include <amphora/error.hpp>
#include <amphora/materializer.hpp>
#include <amphora/parallel.hpp>

#include "artifact_context.hpp"
#include "piece_hash.hpp"
#include "posix.hpp"
#include "store_areas.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

namespace amphora {

// ---------------------------------------------------------------------------

struct ArtifactWriter::Impl {
  std::unique_ptr<Staging> staging;
  SaveOptions options;
  std::uint64_t min_piece_size;
  std::shared_ptr<detail::ArtifactContext> context;
  int depth = 0;
  std::function<void(std::uint64_t)> forward_progress;  // a child's bytes count towards its parent's
  nlohmann::json meta = nlohmann::json::object();
  std::mutex mutex;
  nlohmann::json encodings = nlohmann::json::object();  // path -> recipe, under `mutex`
  std::vector<FileEntry> files;
  std::set<std::string, std::less<>> paths;
  std::vector<ChildEntry> children;
  std::set<std::string, std::less<>> roles;
  int open_streams = 0;
  std::vector<std::string> abandoned_streams;  // destroyed without close()
  bool finished = false;
  bool writer_gone = false;  // streams may outlive the writer; they then refuse to write
  std::atomic<bool> materializer_reports{false};
  std::mutex progress_mutex;
  std::uint64_t written = 0;
  std::string manifest;  // canonical bytes, once finished

  void report(std::uint64_t bytes) {
    if (materializer_reports) return;
    if (forward_progress) return forward_progress(bytes);
    if (!options.progress) return;
    std::lock_guard lock(progress_mutex);
    written += bytes;
    options.progress(written);
  }

  void reserve_path(std::string_view path) {
    if (auto problem = artifact_path_problem(path); !problem.empty())
      throw InvalidArgument("unsafe payload path '" + std::string(path) + "': " + problem);
    std::lock_guard lock(mutex);
    if (finished) throw InvalidArgument("artifact is already finished; cannot add '" + std::string(path) + "'");
    if (!paths.insert(std::string(path)).second)
      throw InvalidArgument("payload file '" + std::string(path) + "' is written twice");
  }

  void reserve_role(std::string_view role) {
    if (auto problem = artifact_path_problem(role); !problem.empty())
      throw InvalidArgument("invalid child role '" + std::string(role) + "': " + problem);
    std::lock_guard lock(mutex);
    if (finished) throw InvalidArgument("artifact is already finished; cannot add child '" + std::string(role) + "'");
    if (!roles.insert(std::string(role)).second)
      throw InvalidArgument("child role '" + std::string(role) + "' is used twice");
  }

  void release_role(std::string_view role) {
    std::lock_guard lock(mutex);
    roles.erase(roles.find(role));
  }

  void record(FileEntry entry) {
    std::lock_guard lock(mutex);
    files.push_back(std::move(entry));
  }

  /// Hashes the pieces of the concatenation of `parts` (which starts at file
  /// offset `file_offset`, a piece boundary) on all cores and appends their
  /// digests to `out`. Each thread writes the range it has just hashed, while
  /// it is still in cache, as one gathered write.
  void write_pieces(StagedFile& file, std::span<const ConstBytes> parts, std::uint64_t piece_size,
                    std::uint64_t file_offset, std::vector<Sha256Value>& out,
                    const ArtifactWriter::Observer& observe = {}) {
    auto digests = detail::hash_pieces(detail::PartList(parts), piece_size, [&](std::uint64_t at, std::span<const ConstBytes> run) {
      std::uint64_t bytes = 0;
      for (ConstBytes part : run) {
        if (observe) observe(file_offset + at + bytes, part);
        bytes += part.size();
      }
      file.write_parts_at(file_offset + at, run);
      report(bytes);
    });
    out.insert(out.end(), digests.begin(), digests.end());
  }
};

ArtifactWriter::ArtifactWriter(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<ArtifactWriter> detail::ArtifactAccess::writer(std::unique_ptr<Staging> staging,
                                                               const SaveOptions& options, std::uint64_t min_piece_size,
                                                               std::shared_ptr<ArtifactContext> context, int depth,
                                                               std::function<void(std::uint64_t)> progress) {
  auto impl = std::make_shared<ArtifactWriter::Impl>();
  impl->staging = std::move(staging);
  impl->options = options;
  impl->min_piece_size = min_piece_size;
  impl->context = std::move(context);
  impl->depth = depth;
  impl->forward_progress = std::move(progress);
  return std::unique_ptr<ArtifactWriter>(new ArtifactWriter(std::move(impl)));
}

ArtifactWriter::~ArtifactWriter() {
  std::lock_guard lock(impl_->mutex);
  impl_->writer_gone = true;
}

void ArtifactWriter::write_file(std::string_view path, std::span<const ConstBytes> parts, const Observer& observe) {
  impl_->reserve_path(path);
  auto file = impl_->staging->create_file(path);
  FileEntry entry;
  entry.path = std::string(path);
  for (const auto& p : parts) entry.size += p.size();
  entry.piece_size = Manifest::piece_size_for(entry.size, impl_->min_piece_size);
  file->reserve(entry.size);
  impl_->write_pieces(*file, parts, entry.piece_size, 0, entry.pieces, observe);
  file->close();
  impl_->record(std::move(entry));
}

Digest ArtifactWriter::save_child(std::string_view role, const MaterializerEntry& entry, const void* value) {
  return save_child(role, entry, value, impl_->options.options);
}

Digest ArtifactWriter::save_child(std::string_view role, const MaterializerEntry& entry, const void* value,
                                  const MaterializerOptions& options) {
  return save_child_or_part(role, entry, value, options, false);
}

Digest ArtifactWriter::save_part(std::string_view role, const MaterializerEntry& entry, const void* value) {
  return save_child_or_part(role, entry, value, impl_->options.options, true);
}

Digest ArtifactWriter::save_child_or_part(std::string_view role, const MaterializerEntry& entry, const void* value,
                                          const MaterializerOptions& options, bool part) {
  if (!impl_->context) throw InvalidArgument("this artifact writer is not attached to a store; cannot save child '" + std::string(role) + "'");
  impl_->reserve_role(role);
  Digest digest;
  try {
    std::weak_ptr<Impl> parent = impl_;
    SaveOptions child_options;
    child_options.options = options;
    auto progress = [parent](std::uint64_t bytes) {
      if (auto p = parent.lock()) p->report(bytes);
    };
    auto& context = *impl_->context;
    digest = part ? context.save_part(entry, value, child_options, impl_->depth + 1, progress)
                  : context.save_child(entry, value, child_options, impl_->depth + 1, progress);
  } catch (...) {
    impl_->release_role(role);
    throw;
  }
  std::lock_guard lock(impl_->mutex);
  impl_->children.push_back({std::string(role), digest});
  return digest;
}

void ArtifactWriter::add_child(std::string_view role, const Digest& digest) {
  if (!impl_->context) throw InvalidArgument("this artifact writer is not attached to a store; cannot add child '" + std::string(role) + "'");
  impl_->reserve_role(role);
  try {
    impl_->context->claim(digest);
  } catch (...) {
    impl_->release_role(role);
    throw;
  }
  std::lock_guard lock(impl_->mutex);
  impl_->children.push_back({std::string(role), digest});
}

nlohmann::json& ArtifactWriter::meta() { return impl_->meta; }
const SaveOptions& ArtifactWriter::options() const { return impl_->options; }

void ArtifactWriter::report_progress(std::uint64_t done) {
  std::lock_guard lock(impl_->progress_mutex);
  impl_->materializer_reports = true;
  if (impl_->options.progress) impl_->options.progress(done);
}

Manifest detail::ArtifactAccess::finish(ArtifactWriter& writer, std::string_view materializer, int version) {
  auto& impl_ = writer.impl_;
  std::lock_guard lock(impl_->mutex);
  // An unclosed stream would leave its file out of the manifest, and so out
  // of the digest: two different values could then share one.
  if (!impl_->abandoned_streams.empty())
    throw InvalidArgument("materializer " + std::string(materializer) + " did not close payload stream '" +
                          impl_->abandoned_streams.front() + "'; call FileStream::close() before save returns");
  if (impl_->open_streams > 0)
    throw InvalidArgument("materializer " + std::string(materializer) + " left a payload stream open");
  impl_->finished = true;
  Manifest m;
  m.materializer = std::string(materializer);
  m.materializer_version = version;
  m.files = impl_->files;
  std::sort(m.files.begin(), m.files.end(), [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  m.children = impl_->children;
  std::sort(m.children.begin(), m.children.end(), [](const ChildEntry& a, const ChildEntry& b) { return a.role < b.role; });
  if (!impl_->meta.is_object()) throw InvalidArgument("materializer " + std::string(materializer) + " set non-object metadata");
  // Refused whether or not this artifact has encoded arrays: readers take
  // the key as recipes for every array file, whoever wrote it.
  if (impl_->meta.contains(detail::kEncodingsKey))
    throw InvalidArgument("materializer " + std::string(materializer) + " set metadata key '" +
                          std::string(detail::kEncodingsKey) + "', which holds the recipes of encoded arrays");
  if (!impl_->encodings.empty()) impl_->meta[detail::kEncodingsKey] = impl_->encodings;
  validate_storable_json(impl_->meta, "materializer " + std::string(materializer) + " metadata");
  m.meta = impl_->meta;
  std::string canonical = m.canonical();
  if (canonical.size() > Manifest::kMaxBytes)
    throw InvalidArgument("materializer " + std::string(materializer) + " produced a manifest of " +
                          std::to_string(canonical.size()) + " bytes, more than the limit of " +
                          std::to_string(Manifest::kMaxBytes) + " (Manifest::kMaxBytes); store bulk data in payload files");
  impl_->manifest = std::move(canonical);
  return m;
}

const std::string& detail::ArtifactAccess::canonical_manifest(const ArtifactWriter& writer) {
  return writer.impl_->manifest;
}
Digest detail::ArtifactAccess::digest(const ArtifactWriter& writer) {
  if (writer.impl_->manifest.empty()) throw InvalidArgument("an artifact's digest was asked before its manifest was finished");
  return Digest(Sha256::of(writer.impl_->manifest));
}

void detail::ArtifactAccess::record_encoding(ArtifactWriter& writer, std::string_view path, nlohmann::json recipe) {
  std::lock_guard lock(writer.impl_->mutex);
  writer.impl_->encodings[std::string(path)] = std::move(recipe);
}

bool detail::ArtifactAccess::publish(ArtifactWriter& writer, const ArtifactArea& area, const Digest& digest) {
  return area.publish(*writer.impl_->staging, digest, writer.impl_->manifest);
}
void detail::ArtifactAccess::replace(ArtifactWriter& writer, const ArtifactArea& area, const Digest& digest) {
  area.replace(*writer.impl_->staging, digest, writer.impl_->manifest);
}

// ---------------------------------------------------------------------------

struct FileStream::Impl {
  std::shared_ptr<ArtifactWriter::Impl> writer;

  void require_writer() const {
    std::lock_guard lock(writer->mutex);
    if (writer->writer_gone)
      throw InvalidArgument("payload stream '" + entry.path +
                            "' outlived its artifact writer: streams must be closed before save returns");
  }
  std::unique_ptr<StagedFile> file;
  FileEntry entry;
  Sha256 partial;
  std::uint64_t partial_fill = 0;
  bool closed = false;

  void append_partial(ConstBytes data) {
    partial.update(data);
    file->write_at(entry.size, data);
    writer->report(data.size());
    entry.size += data.size();
    partial_fill += data.size();
    if (partial_fill == entry.piece_size) {
      entry.pieces.push_back(partial.finish());
      partial_fill = 0;
    }
  }
};

FileStream::FileStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FileStream::FileStream(FileStream&&) noexcept = default;
FileStream& FileStream::operator=(FileStream&&) noexcept = default;

FileStream::~FileStream() {
  if (impl_ && !impl_->closed) {
    std::lock_guard lock(impl_->writer->mutex);
    if (impl_->writer->writer_gone) return;
    --impl_->writer->open_streams;
    impl_->writer->abandoned_streams.push_back(impl_->entry.path);
  }
}

void FileStream::append(std::span<const ConstBytes> parts) {
  auto& s = *impl_;
  if (s.closed) throw InvalidArgument("append to closed payload stream '" + s.entry.path + "'");
  s.require_writer();
  const std::uint64_t piece = s.entry.piece_size;
  std::vector<ConstBytes> rest(parts.begin(), parts.end());
  std::uint64_t remaining = 0;
  for (const auto& p : rest) remaining += p.size();
  std::size_t at = 0;  // first part of `rest` not yet consumed
  auto take_partial = [&](std::uint64_t n) {
    while (n > 0) {
      auto& p = rest[at];
      auto k = static_cast<std::size_t>(std::min<std::uint64_t>(n, p.size()));
      s.append_partial(p.first(k));
      p = p.subspan(k);
      n -= k;
      remaining -= k;
      if (p.empty()) ++at;
    }
    while (at < rest.size() && rest[at].empty()) ++at;
  };
  if (s.partial_fill > 0) take_partial(std::min(remaining, piece - s.partial_fill));
  std::uint64_t whole = s.partial_fill == 0 ? remaining / piece * piece : 0;
  if (whole > 0) {
    std::vector<ConstBytes> span_parts;
    std::uint64_t need = whole;
    for (std::size_t i = at; need > 0; ++i) {
      auto k = static_cast<std::size_t>(std::min<std::uint64_t>(need, rest[i].size()));
      span_parts.push_back(rest[i].first(k));
      need -= k;
    }
    s.writer->write_pieces(*s.file, span_parts, piece, s.entry.size, s.entry.pieces);
    s.entry.size += whole;
    // Advance past the bytes just written.
    std::uint64_t skip = whole;
    while (skip > 0) {
      auto k = static_cast<std::size_t>(std::min<std::uint64_t>(skip, rest[at].size()));
      rest[at] = rest[at].subspan(k);
      skip -= k;
      remaining -= k;
      if (rest[at].empty()) ++at;
    }
  }
  take_partial(remaining);
}

std::uint64_t FileStream::size() const { return impl_->entry.size; }

void FileStream::close() {
  auto& s = *impl_;
  if (s.closed) return;
  s.require_writer();
  if (s.partial_fill > 0 || s.entry.pieces.empty()) s.entry.pieces.push_back(s.partial.finish());
  s.file->close();
  s.closed = true;
  std::lock_guard lock(s.writer->mutex);
  --s.writer->open_streams;
  s.writer->files.push_back(std::move(s.entry));
}

FileStream ArtifactWriter::open_stream(std::string_view path, std::uint64_t size_hint) {
  impl_->reserve_path(path);
  auto stream = std::make_unique<FileStream::Impl>();
  stream->writer = impl_;
  stream->file = impl_->staging->create_file(path);
  stream->entry.path = std::string(path);
  stream->entry.piece_size = Manifest::piece_size_for(size_hint, impl_->min_piece_size);
  {
    std::lock_guard lock(impl_->mutex);
    ++impl_->open_streams;
  }
  return FileStream(std::move(stream));
}

// ---------------------------------------------------------------------------

ArtifactReader::ArtifactReader(std::shared_ptr<detail::ArtifactContext> context,
                               std::shared_ptr<const detail::ArtifactArea> artifacts, Digest digest,
                               std::shared_ptr<const Manifest> manifest, std::string label, int depth)
    : context_(std::move(context)),
      artifacts_(std::move(artifacts)),
      digest_(digest),
      manifest_(std::move(manifest)),
      label_(label.empty() ? "artifact " + digest.short_str() : std::move(label)),
      depth_(depth) {}

void ArtifactReader::bad_meta(std::string_view key, std::string_view problem) const {
  throw CorruptData(label_ + ": metadata key '" + std::string(key) + "' " + std::string(problem) + " (materializer " +
                    manifest_->materializer + ")");
}

void ArtifactReader::require_materializer(std::string_view name, int version, std::string_view what) const {
  if (manifest_->materializer != name)
    throw TypeMismatch(label_ + " holds a '" + manifest_->materializer + "' artifact, not a '" + std::string(name) +
                       "'" + (label_.starts_with(what) ? "" : " (as " + std::string(what) + ")"));
  require_version(version);
}

void ArtifactReader::require_version(int readable, std::string_view origin) const {
  if (manifest_->materializer_version > readable)
    throw Unsupported(label_ + " uses '" + manifest_->materializer + "' format version " +
                      std::to_string(manifest_->materializer_version) + ", newer than the version " +
                      std::to_string(readable) + " this build reads" +
                      (origin.empty() ? "" : " (" + std::string(origin) + ")"));
}

ArtifactReader ArtifactReader::open_child(std::string_view role) const {
  const ChildEntry* child = manifest_->find_child(role);
  if (!child) throw CorruptData(label_ + " lists no child '" + std::string(role) + "' (materializer " + manifest_->materializer + ")");
  if (depth_ + 1 > kMaxChildDepth)
    throw CorruptData(label_ + " nests children deeper than " + std::to_string(kMaxChildDepth) + " levels");
  if (!context_) throw InvalidArgument(label_ + " was opened without a store; cannot open child '" + std::string(role) + "'");
  std::string label = label_ + " child '" + std::string(role) + "' (" + child->digest.short_str() + ")";
  try {
    return context_->open(child->digest, label, depth_ + 1).with_options(options_);
  } catch (const NotFound&) {
    throw CorruptData(label + " is missing from the store");
  }
}

// Runs `access` (an open, a map, reads) on payload file `path`, turning
// storage errors into ones that name this artifact. An object store
// opened with the manifest's size finds a missing file only when reading.
template <class Access>
auto ArtifactReader::checked(std::string_view path, Access&& access) const {
  try {
    return access();
  } catch (const NotFound&) {
    // Collected (say by gc) since it was opened is not the same as damaged.
    if (!artifacts_->has(digest_))
      throw NotFound(label_ + " was removed from the store (by gc?) while it was being read");
    throw CorruptData(label_ + ": payload file '" + std::string(path) + "' is listed in the manifest but missing");
  } catch (const CorruptData& e) {
    throw CorruptData(label_ + ": " + e.what());
  }
}

// Opens payload file `path` through `open` (map or positional reads) and
// checks its size against the manifest.
template <class Open>
auto ArtifactReader::open_checked(std::string_view path, Open&& open) const {
  std::uint64_t listed = file_size(path);
  auto handle = checked(path, [&] { return open(listed); });
  if (handle->size() != listed)
    throw CorruptData(label_ + ": payload file '" + std::string(path) + "' is " + std::to_string(handle->size()) +
                      " bytes, but the manifest says " + std::to_string(listed));
  return handle;
}

std::shared_ptr<const Buffer> ArtifactReader::map(std::string_view path) const {
  return open_checked(path, [&](std::uint64_t listed) { return artifacts_->map_listed(digest_, path, listed); });
}

bool ArtifactReader::maps_in_place() const { return artifacts_->medium().maps_in_place(); }

std::uint64_t ArtifactReader::file_size(std::string_view path) const {
  const FileEntry* entry = manifest_->find(path);
  if (!entry) throw NotFound(label_ + ": no payload file '" + std::string(path) + "' in its manifest");
  return entry->size;
}

std::shared_ptr<const Buffer> ArtifactReader::read_file(std::string_view path) const {
  auto file = open_checked(path, [&](std::uint64_t listed) { return artifacts_->open_listed(digest_, path, listed); });
  const std::uint64_t size = file->size();
  auto buffer = detail::allocate_for_overwrite(static_cast<std::size_t>(size));
  // Blocks big enough to keep each pread streaming, small enough to spread
  // a file over every core.
  constexpr std::uint64_t kBlock = 8u << 20;
  std::byte* dst = buffer->mutable_data();
  checked(path, [&] {
    parallel_for(static_cast<std::size_t>((size + kBlock - 1) / kBlock), [&](std::size_t b) {
      std::uint64_t at = b * kBlock;
      file->read_at(at, static_cast<std::size_t>(std::min(kBlock, size - at)), dst + at);
    });
  });
  return buffer;
}

std::shared_ptr<const Buffer> ArtifactReader::read(std::string_view path, std::uint64_t offset, std::size_t size) const {
  auto buffer = detail::allocate_for_overwrite(size);
  read_into(path, offset, size, buffer->mutable_data());
  return buffer;
}

void ArtifactReader::read_into(std::string_view path, std::uint64_t offset, std::size_t size, std::byte* dst) const {
  const Range range{offset, size, dst};
  read_ranges(path, {&range, 1});
}

void ArtifactReader::read_ranges(std::string_view path, std::span<const Range> ranges) const {
  const std::uint64_t listed = file_size(path);
  for (const Range& r : ranges)
    if (r.offset > listed || r.size > listed - r.offset)
      throw CorruptData(label_ + ": bytes [" + std::to_string(r.offset) + ", +" + std::to_string(r.size) +
                        ") lie outside '" + std::string(path) + "' (" + std::to_string(listed) + " bytes)");
  auto file = open_checked(path, [&](std::uint64_t listed) { return artifacts_->open_listed(digest_, path, listed); });
  checked(path, [&] {
    for (const Range& r : ranges)
      if (r.size) file->read_at(r.offset, r.size, r.dst);
  });
}

}  // namespace amphora
