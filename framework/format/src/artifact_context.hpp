#pragma once
// What writers and readers need of the store they belong to, and the
// constructors and steps Store uses that materializers never see.

#include <amphora/artifact.hpp>
#include <amphora/storage/medium.hpp>

#include "store_areas.hpp"

#include <functional>
#include <memory>

namespace amphora::detail {

/// The metadata key under which a writer records the recipes of the arrays
/// written with an ArrayEncoding, by path (docs/FORMAT.md §6.4).
inline constexpr std::string_view kEncodingsKey = "encodings";

/// How a writer saves its children and a reader opens them. Store implements it.
class ArtifactContext {
 public:
  virtual ~ArtifactContext() = default;
  /// Saves `value` as an unnamed child artifact `depth` levels below a
  /// top-level save; its payload bytes are reported to `progress`.
  virtual Digest save_child(const MaterializerEntry& entry, const void* value, const SaveOptions& options, int depth,
                            std::function<void(std::uint64_t bytes)> progress) = 0;
  /// save_child for a part of the value being saved (ArtifactWriter::
  /// save_part): a context that follows one whole save answers a part met
  /// before with the digest it saved then. By default, save_child.
  virtual Digest save_part(const MaterializerEntry& entry, const void* value, const SaveOptions& options, int depth,
                           std::function<void(std::uint64_t bytes)> progress) {
    return save_child(entry, value, options, depth, std::move(progress));
  }
  /// Throws NotFound unless `digest` is published, and protects it from gc's
  /// grace-period collection for another grace period.
  virtual void claim(const Digest& digest) = 0;
  /// Opens published artifact `digest`, its manifest checked against it.
  virtual ArtifactReader open(const Digest& digest, std::string label, int depth) = 0;
};

struct ArtifactAccess {
  /// A writer for one new artifact, `depth` levels below a top-level save.
  /// `context` may be null (no children can be saved then); `progress`, when
  /// given, receives payload byte counts instead of options.progress.
  static std::unique_ptr<ArtifactWriter> writer(std::unique_ptr<Staging> staging, const SaveOptions& options,
                                                std::uint64_t min_piece_size = Manifest::kMinPieceSize,
                                                std::shared_ptr<ArtifactContext> context = nullptr, int depth = 0,
                                                std::function<void(std::uint64_t bytes)> progress = {});
  /// Completes the manifest for `materializer`/`version` and returns it. Throws InvalidArgument if a stream was left open or
  /// destroyed unclosed, the metadata cannot be stored exactly, or the
  /// manifest would exceed Manifest::kMaxBytes.
  static Manifest finish(ArtifactWriter& writer, std::string_view materializer, int version);
  /// The finished manifest's canonical bytes (empty before finish), whose
  /// SHA-256 is the artifact's digest: kept so a save serializes it once.
  static const std::string& canonical_manifest(const ArtifactWriter& writer);
  /// The artifact's digest: the SHA-256 of canonical_manifest(writer).
  static Digest digest(const ArtifactWriter& writer);
  /// Records the recipe of encoded array `path` for the manifest (thread-safe).
  static void record_encoding(ArtifactWriter& writer, std::string_view path, nlohmann::json recipe);
  /// Publishes the finished artifact into `area`; false when it already existed.
  static bool publish(ArtifactWriter& writer, const ArtifactArea& area, const Digest& digest);
  /// Publishes the finished artifact in place of a damaged copy.
  static void replace(ArtifactWriter& writer, const ArtifactArea& area, const Digest& digest);

  static ArtifactReader reader(std::shared_ptr<ArtifactContext> context, std::shared_ptr<const ArtifactArea> artifacts,
                               Digest digest, std::shared_ptr<const Manifest> manifest, std::string label,
                               int depth = 0) {
    return ArtifactReader(std::move(context), std::move(artifacts), digest, std::move(manifest), std::move(label), depth);
  }
};

}  // namespace amphora::detail
