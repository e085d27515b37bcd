#pragma once
// Reading CSV (RFC 4180, docs/FORMAT.md §9.3) a block at a time, and the type
// inference both ways of importing a CSV share: read_csv, which builds a
// Table in memory, and import_csv, which streams the file into an artifact.
// Internal to the materializers.

#include <amphora/buffer.hpp>
#include <amphora/table.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace amphora::detail {

/// Splits a CSV file into records, reading it in blocks so that memory
/// holds one block plus the longest record, never the file. One thread.
class CsvReader {
 public:
  /// Opens as InputFile::open does (regular files only, a FIFO refused at once).
  explicit CsvReader(const std::filesystem::path& file);

  /// The next record's fields (false at the end). Blank lines are skipped, as
  /// pandas does; `line` is the line the record starts on. Throws
  /// InvalidArgument naming the file and line for an unclosed quote, text
  /// after a closing quote, a quote inside an unquoted field, or a record
  /// longer than 256 MiB.
  bool next(std::vector<std::string>& fields, std::size_t& line);

  /// Bytes read from the file so far.
  std::uint64_t bytes_read() const { return read_; }
  const std::string& where() const { return where_; }

 private:
  enum class Parse { record, end, more };
  Parse parse(const char*& p, const char* end, std::vector<std::string>& fields, std::size_t& line);
  void fill();

  InputFile in_;
  std::string where_;
  std::vector<char> buf_;
  std::size_t at_ = 0, have_ = 0;  // unparsed bytes are buf_[at_, have_)
  std::uint64_t read_ = 0;
  bool eof_ = false, started_ = false;
  std::size_t line_ = 1;
};

/// A field's value as each of the typed column types would hold it (0 where
/// it is not one, or empty).
struct FieldValue {
  std::int64_t integer = 0, time = 0;
  std::uint64_t uinteger = 0;
  double real = 0;
  bool boolean = false;
};

/// The narrowest type every non-empty field of a column fits exactly,
/// narrowed one field at a time: int64 while every field is an integer in
/// its range, else uint64 while every one is a non-negative integer below
/// 2^64, else float64 while every one is a number and no integer among them
/// is beyond 2^53 in magnitude, else bool, else timestamp (within int64
/// nanoseconds; UTC when any field names the zone, naive when none does),
/// else string (docs/FORMAT.md §9.3).
struct TypeGuess {
  bool can_int = true, can_uint = true, can_float = true, can_bool = true, can_time = true;
  /// A timestamp field so far said it is in UTC ("Z" or "+00:00"): the
  /// column is then a UTC timestamp one, else naive (no zone, as written).
  bool zoned = false;
  std::size_t rows = 0, present = 0;

  /// Counts the field, rules out the types it is not, and returns its value
  /// as each type still possible.
  FieldValue add(std::string_view field);
  /// Some type other than string is still possible.
  bool typed() const { return can_int || can_uint || can_float || can_bool || can_time; }
  /// The column's type: string when no field was present.
  ColumnType type() const;
};

/// Parses a non-empty field as `type` (int64, uint64, float64, boolean or
/// timestamp), as TypeGuess does; false when it is not one.
bool parse_field(ColumnType type, std::string_view field, FieldValue& value);

/// Columns a CSV file may have: each costs its files, their entries in the
/// manifest and buffers while importing (README: memory), so a few bytes of
/// commas must not multiply them.
inline constexpr std::size_t kMaxCsvColumns = 16384;

/// The column names from the file's first record, the header: an empty one
/// becomes "column K" (K from 1). Throws InvalidArgument naming the file (and
/// line) for an empty file, more than kMaxCsvColumns columns, a name that is
/// not UTF-8, or names Table::make refuses.
std::vector<std::string> read_header(CsvReader& reader);

/// Throws InvalidArgument naming the file and line for a record with another
/// number of fields than the header, or a field that is not UTF-8.
void check_record(const std::vector<std::string>& fields, const std::vector<std::string>& names,
                  const std::string& where, std::size_t line);

}  // namespace amphora::detail
