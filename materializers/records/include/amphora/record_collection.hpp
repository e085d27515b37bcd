#pragma once
// Record collections and their materializer, "amphora.records": sequences of
// JSON-like records (objects, lists, strings, integers, floats, booleans,
// nulls, nested), such as detection annotations. Stored column by column
// under a schema inferred from the records (docs/FORMAT.md §10): an object's
// fields each a column, a list as offsets plus a column of its items,
// strings merged or dictionary-encoded, integers squeezed, short decimals as
// scaled integers. A field whose values disagree in type is kept as JSON
// text, for that field only. Integers stay integers and floats stay floats,
// bit for bit; a missing field stays missing, a null stays null, and each
// record's key order is kept. Record i is read without decoding the others.

#include <amphora/export.hpp>
#include <amphora/artifact.hpp>
#include <amphora/builtins.hpp>
#include <amphora/materializer.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

AMPHORA_API_BEGIN

namespace amphora {

namespace detail {
struct RecordNode;
struct RecordAccess;
}

/// An immutable, columnar sequence of JSON values (normally objects).
/// Copies share their columns; loaded collections map the stored files.
/// Thread-safe for reading.
class RecordCollection {
 public:
  /// An empty collection.
  RecordCollection();
  /// The records, in order. Keys keep the order nlohmann::ordered_json holds
  /// them in (nlohmann::json sorts them). Throws InvalidArgument naming the
  /// record and key path for a string that is not UTF-8, a NaN or infinite
  /// float, binary data, or nesting deeper than 256 levels.
  static RecordCollection from_json(std::span<const nlohmann::ordered_json> records);
  static RecordCollection from_json(std::span<const nlohmann::json> records);

  /// Reads JSON lines: one JSON value per line, UTF-8 (a byte order mark
  /// before the first line is skipped); blank lines are skipped. Parsed with simdjson, twice (the first pass infers the schema,
  /// the second fills the columns), never as a document tree per line.
  /// `progress`, when set, is called with the bytes read so far (both passes
  /// count, so the total is twice the file's size). Throws InvalidArgument
  /// naming the file and line for a line that is not one JSON value, invalid
  /// UTF-8, a duplicated key, a number out of range, nesting deeper than 256
  /// levels or a line longer than 256 MiB, or when the file changes between
  /// the passes; NotFound for a missing file; InvalidArgument for anything
  /// but a regular file (a FIFO is refused at once, not waited on).
  static RecordCollection read_jsonl(const std::filesystem::path& file,
                                     const std::function<void(std::uint64_t)>& progress = {});

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  /// Record `i` as compact JSON text, keys in their original order, floats
  /// in their shortest exact form (with ".0" when integral). Throws
  /// InvalidArgument for `i` out of range, CorruptData for damage found on
  /// the way (a loaded collection checks what it reads).
  std::string record_json(std::size_t i) const;
  /// Record `i` as a JSON value with its key order. Throws as record_json.
  nlohmann::ordered_json record(std::size_t i) const;

  /// Writes every record as one line of JSON text (record_json), atomically:
  /// the file appears complete or not at all. Throws IoError naming the file.
  void write_jsonl(const std::filesystem::path& file) const;

  /// The inferred schema: {"kind": ..., and per kind "fields" (objects),
  /// "items" (lists), "dtype" (integers), "nullable", "optional"}; see
  /// docs/FORMAT.md §10.1.
  nlohmann::json schema() const;

  /// Same records in the same order (compared as record_json text).
  bool equals(const RecordCollection& other) const;

 private:
  friend struct detail::RecordAccess;
  RecordCollection(std::shared_ptr<const detail::RecordNode> root, std::size_t size);
  std::shared_ptr<const detail::RecordNode> root_;
  std::size_t size_ = 0;
};

/// What load_records reads: some records (all when absent).
struct RecordSelection {
  std::optional<std::pair<std::size_t, std::size_t>> rows{};  ///< [begin, end)
};

/// Opens a stored collection: maps every column, decodes the encoded ones and
/// checks the structure (every column's length against the schema, list
/// offsets monotone and ending at their items' count, codes within their
/// dictionaries, bitmaps' sizes). With `selection.rows`, the collection of
/// just those records, reading only their part of each column file (a list
/// column's offsets and a dictionary whole), so a remote store fetches that
/// part alone; the checks apply to what is read. Throws CorruptData naming
/// the artifact and column for damage, Unsupported for an unknown kind,
/// InvalidArgument for rows outside the collection.
RecordCollection load_records(const ArtifactReader& in, const RecordSelection& selection = {});

/// Saves the JSON lines file as a record collection into `out` without
/// holding it: after read_jsonl's schema pass the file is read twice more in
/// chunks of about 4 MiB (every node's counts, ranges, dictionaries and key
/// orders first, then the column files), so memory stays bounded by a chunk,
/// the schema and the dictionary limits, whatever the number of records. The
/// artifact equals the one saving read_jsonl(file) makes, digest included.
/// Throws as read_jsonl. Store::import_file uses it for ".jsonl".
void import_jsonl(const std::filesystem::path& file, ArtifactWriter& out);

template <>
struct materializer<RecordCollection> {
  static constexpr std::string_view name = "amphora.records";
  static constexpr int version = 1;
  static void save(const RecordCollection& records, ArtifactWriter& out);
  static RecordCollection load(const ArtifactReader& in) { return load_records(in); }
  /// Loads and reads every record, so JSON columns and key orders are checked too.
  static void validate(const ArtifactReader& in);
};

}  // namespace amphora

AMPHORA_API_END
