#pragma once
// The manifest: the one hashed description of an artifact. See docs/FORMAT.md.

#include <amphora/export.hpp>
#include <amphora/digest.hpp>
#include <amphora/json.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

/// One payload file: its path inside the artifact, its size, and the SHA-256
/// of each consecutive `piece_size`-byte piece (a file no larger than one
/// piece, including an empty file, has exactly one).
struct FileEntry {
  std::string path;
  std::uint64_t size = 0;
  std::uint64_t piece_size = 0;
  std::vector<Sha256Value> pieces;
};

/// A child artifact of a composite: the role it plays in its parent (a safe
/// relative path such as "weights" or "items/3") and its digest.
struct ChildEntry {
  std::string role;
  Digest digest;
  bool operator==(const ChildEntry&) const = default;
};

/// Parsed, validated manifest. Value type.
struct Manifest {
  /// The version writers use. Version 1 (no children) is still read.
  static constexpr int kFormatVersion = 2;
  static constexpr int kOldestFormatVersion = 1;
  /// Writers use pieces of this size, doubled until a file has at most
  /// kMaxPieces of them: enough pieces for every core to hash, few enough
  /// that a manifest stays small (and quick to open) whatever the file size.
  static constexpr std::uint64_t kMinPieceSize = 2u << 20;
  static constexpr std::uint64_t kMaxPieces = 256;
  /// A file of more than kSplitAbove bytes and at most the smallest piece
  /// size is cut into the smallest power-of-two pieces that give it at most
  /// kSmallFilePieces (128 to 512 KiB): hashed whole it would keep one core
  /// busy for its whole save, in pieces two cores with two lanes each hash
  /// it at once. Smaller files stay one piece.
  static constexpr std::uint64_t kSplitAbove = 256u << 10;
  static constexpr std::uint64_t kSmallFilePieces = 4;
  /// Largest manifest.json a store writes or reads.
  static constexpr std::size_t kMaxBytes = 64u << 20;
  /// The piece size writers use for a file of `size` bytes.
  static std::uint64_t piece_size_for(std::uint64_t size, std::uint64_t min_piece_size = kMinPieceSize);

  std::string materializer;       ///< stable materializer name, e.g. "amphora.tensor"
  int materializer_version = 0;   ///< that materializer's payload format version
  int manifest_version = kFormatVersion;  ///< manifest_version as written or read
  std::vector<FileEntry> files;   ///< sorted by path
  std::vector<ChildEntry> children;  ///< sorted by role; always empty in version 1
  nlohmann::json meta = nlohmann::json::object();  ///< materializer's summary (shape, dtype, stats...)

  /// The canonical bytes whose SHA-256 is the artifact digest.
  std::string canonical() const;
  Digest digest() const;
  /// The entry for `path`, or nullptr.
  const FileEntry* find(std::string_view path) const;
  /// The child playing `role`, or nullptr.
  const ChildEntry* find_child(std::string_view role) const;
  /// Sum of all payload file sizes.
  std::uint64_t payload_bytes() const;

  /// Parses and validates manifest bytes (JSON, field types, paths, piece
  /// counts, sort order). `where` names the artifact in error messages.
  /// Throws CorruptData or Unsupported.
  static Manifest parse(std::string_view bytes, std::string_view where);
};

/// Number of pieces a file of `size` bytes has for `piece_size`.
std::uint64_t piece_count(std::uint64_t size, std::uint64_t piece_size);

/// Why `path` is not a safe relative path inside an artifact, or "" when it
/// is one: non-empty, at most 1024 characters, '/'-separated, no '.', '..',
/// empty or hidden components, no backslash or control characters, not
/// absolute, and not "manifest.json" (the artifact's own).
std::string artifact_path_problem(std::string_view path);
/// Throws CorruptData (naming `where`) unless `path` is a safe artifact path.
void validate_artifact_path(std::string_view path, std::string_view where);

}  // namespace amphora

AMPHORA_API_END
