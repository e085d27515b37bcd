#pragma once
// Tables and their materializer, "amphora.table": named, typed columns of
// equal length, each optionally nullable. Stored column by column
// (docs/FORMAT.md §9): each fixed-width column a .npy, each string column
// merged (offsets plus bytes) or dictionary-encoded when that is smaller, a
// validity bitmap per nullable column, and the schema with per-column
// statistics in the metadata. Columns are written and hashed in parallel;
// load_table() reads only the columns and rows asked for.

#include <amphora/export.hpp>
#include <amphora/tensor.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

class Table;
namespace detail {
struct ColumnAccess;
}

/// The type of a column's values.
enum class ColumnType : std::uint8_t {
  int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64,
  boolean,    ///< stored one byte per value, 0 or 1
  string,     ///< UTF-8 text
  timestamp,  ///< nanoseconds since 1970-01-01T00:00:00Z, int64
  /// Wall-clock date-times with no time zone (a CSV's "2024-05-01 12:00"):
  /// nanoseconds since 1970-01-01T00:00:00 of that clock, int64. Exported
  /// without a zone, as they came.
  naive_timestamp,
};

/// "int8" ... "float64", "bool", "string", "timestamp[ns]", "naive_timestamp[ns]".
std::string_view to_string(ColumnType type);
/// The inverse of to_string; throws InvalidArgument naming the text otherwise.
ColumnType parse_column_type(std::string_view text);

/// One column: values plus, when nullable, which rows hold one. A null row's
/// value slot holds 0 (or an empty string). Copies share their buffers;
/// loaded columns map the stored files. Immutable; thread-safe for reading.
class Column {
 public:
  /// An empty int64 column, not nullable (as in a container sized ahead).
  Column();
  /// Numbers or bools from a 1-d tensor of int8-64, uint8-64, float32,
  /// float64 or bool. `valid`, if not empty, says per row whether it holds a
  /// value (the column is then nullable). Throws InvalidArgument for another
  /// dtype, a tensor that is not 1-d, or `valid` of another length.
  static Column numbers(Tensor values, std::vector<bool> valid = {});
  /// Timestamps from a 1-d int64 tensor of nanoseconds since the epoch.
  static Column timestamps(Tensor nanoseconds, std::vector<bool> valid = {});
  /// Date-times with no time zone, from a 1-d int64 tensor of nanoseconds
  /// since 1970-01-01T00:00:00 of their wall clock.
  static Column naive_timestamps(Tensor nanoseconds, std::vector<bool> valid = {});
  /// UTF-8 strings; throws InvalidArgument naming the first row that is not UTF-8.
  static Column strings(std::span<const std::string> values, std::vector<bool> valid = {});
  static Column strings(std::span<const std::string_view> values, std::vector<bool> valid = {});
  /// A column of `values` (numbers, bool or std::string).
  template <class T>
  static Column of(const std::vector<T>& values, std::vector<bool> valid = {}) {
    if constexpr (std::is_same_v<T, std::string>)
      return strings(std::span<const std::string>(values), std::move(valid));
    else
      return numbers(Tensor::from_values<T>({static_cast<std::int64_t>(values.size())}, values), std::move(valid));
  }

  ColumnType type() const { return type_; }
  std::size_t size() const { return rows_; }
  bool nullable() const { return static_cast<bool>(valid_); }
  std::size_t null_count() const { return null_count_; }
  bool is_null(std::size_t row) const { return valid_ && valid_->data()[row] == std::byte{0}; }

  /// The values of a fixed-width or timestamp column (a 1-d tensor; bools
  /// as DType::bool_, timestamps as int64). InvalidArgument for strings.
  const Tensor& values() const;
  /// Value `row` of a string column (unchecked row); InvalidArgument for other types.
  std::string_view string(std::size_t row) const;

  /// Rows [begin, end), sharing this column's buffers where it can. Throws
  /// InvalidArgument for an interval outside [0, size()].
  Column slice(std::size_t begin, std::size_t end) const;
  /// Same type, same null rows, equal values in every non-null row (floats
  /// compared bit for bit).
  bool equals(const Column& other) const;

 private:
  friend struct detail::ColumnAccess;
  Column(ColumnType type, std::size_t rows, Tensor values, std::shared_ptr<const Buffer> bytes,
         std::shared_ptr<const Buffer> valid);
  ColumnType type_ = ColumnType::int64;
  std::size_t rows_ = 0;
  Tensor values_;                         // fixed width: the values; string: int64 offsets (rows + 1)
  std::shared_ptr<const Buffer> bytes_;   // string: the bytes the offsets point into
  std::shared_ptr<const Buffer> valid_;   // nullable: one byte per row, 0 or 1
  std::size_t null_count_ = 0;
};

/// Columns of equal length under unique names, in order. Immutable; copies
/// share their columns; thread-safe for reading.
class Table {
 public:
  Table() = default;
  /// Validating factory: names non-empty, valid UTF-8 and unique, every
  /// column the same length. Throws InvalidArgument naming the offender.
  static Table make(std::vector<std::pair<std::string, Column>> columns);

  std::size_t rows() const { return rows_; }
  std::size_t num_columns() const { return columns_.size(); }
  const std::vector<std::string>& names() const { return names_; }
  /// The column at `i`; throws InvalidArgument when `i` is out of range.
  const Column& column(std::size_t i) const;
  /// The column named `name`; throws NotFound naming it and the columns there are.
  const Column& column(std::string_view name) const;

  /// The columns named, in that order (NotFound for an unknown name).
  Table select(std::span<const std::string> names) const;
  /// Rows [begin, end) of every column.
  Table slice(std::size_t begin, std::size_t end) const;
  /// Same names in the same order and equal columns.
  bool equals(const Table& other) const;

 private:
  std::size_t rows_ = 0;
  std::vector<std::string> names_;
  std::vector<Column> columns_;
};

/// What load_table reads: some columns (all when empty), some rows (all when absent).
struct TableSelection {
  std::vector<std::string> columns{};
  std::optional<std::pair<std::size_t, std::size_t>> rows{};  ///< [begin, end)
};

/// Reads the columns and rows of `selection` from a stored table, touching
/// only those columns' files (mapped; strings and bitmaps decoded for the rows
/// asked for). Where mapping would fetch a file whole (a remote store), a
/// row range reads only its part of number and plain string columns; a
/// dictionary column's codes and dictionary, and validity bitmaps, are read
/// whole. Throws NotFound for an unknown column, InvalidArgument for rows
/// outside the table, CorruptData naming the artifact and column for damage.
Table load_table(const ArtifactReader& in, const TableSelection& selection = {});

/// Reads a CSV file (RFC 4180: header row, comma-separated, double-quoted
/// fields with "" for a quote, LF or CRLF, UTF-8, an optional byte order
/// mark) into a table. Each column's type is inferred from its non-empty
/// fields, the first that holds them all exactly: int64, uint64, float64 (nan and inf included), bool
/// (true/false in any of three spellings), timestamp (ISO 8601 within int64 nanoseconds: timestamp[ns]
/// when a field names UTC, else naive_timestamp[ns]), else string (docs/FORMAT.md §9.3: integers past
/// uint64, floats that would round an integer, nan(...), dates out of range). An empty field is null;
/// blank lines are skipped.
/// Throws InvalidArgument naming the file and line for a ragged row, invalid
/// UTF-8, an unclosed quote or text after a closing quote; NotFound for a
/// missing file.
Table read_csv(const std::filesystem::path& file);
/// Saves the CSV file as a table into `out` without holding the file: it is
/// read twice, a block at a time (types, statistics and string dictionaries
/// first, then the column files), so memory stays bounded by the number of
/// columns and the dictionary limits of array_encoding.hpp, whatever the
/// number of rows. The artifact equals the one saving read_csv(file) makes,
/// digest included. Reports input bytes consumed as progress. Throws as
/// read_csv, and InvalidArgument naming the file and line when the file
/// changes between the two passes. Store::import_file uses it for ".csv".
void import_csv(const std::filesystem::path& file, ArtifactWriter& out);
/// Writes `table` as CSV that pandas.read_csv reads back: header, nulls as
/// empty fields, floats in their shortest exact form (nan, inf), bools as
/// True/False, timestamps as ISO 8601 with nanoseconds (Z unless naive), strings quoted
/// where needed. Atomic: the file appears complete or not at all.
void write_csv(const Table& table, const std::filesystem::path& file);
/// A timestamp column's value (nanoseconds since 1970-01-01 UTC) as ISO 8601
/// UTC with nanoseconds, as write_csv writes it: "2023-11-14T22:13:20.000000123Z";
/// with `utc` false (a naive_timestamp column) the same without the "Z".
std::string timestamp_text(std::int64_t nanoseconds, bool utc = true);

template <>
struct materializer<Table> {
  static constexpr std::string_view name = "amphora.table";
  static constexpr int version = 1;
  static void save(const Table& table, ArtifactWriter& out);
  static Table load(const ArtifactReader& in) { return load_table(in); }
  static void validate(const ArtifactReader& in) { (void)load_table(in); }
};

}  // namespace amphora

AMPHORA_API_END
