// Tables to and from CSV (RFC 4180): a header row, fields separated by
// commas, quoted with double quotes when they hold commas, quotes or line
// breaks (a quote inside doubled), records ended by LF or CRLF, UTF-8.

#include <amphora/manifest.hpp>
#include <amphora/table.hpp>

#include "csv_reader.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>

namespace amphora {

namespace {

// One column's text as read, and its values as each type still possible.
struct RawColumn {
  detail::TypeGuess guess;
  std::vector<std::string> values;
  std::vector<bool> present;
  std::vector<std::int64_t> ints, times;
  std::vector<std::uint64_t> uints;
  std::vector<double> floats;
  std::vector<bool> bools;

  void add(std::string value) {
    const detail::TypeGuess before = guess;
    const detail::FieldValue v = guess.add(value);
    present.push_back(!value.empty());
    keep(before.can_int, guess.can_int, ints, v.integer);
    keep(before.can_uint, guess.can_uint, uints, v.uinteger);
    keep(before.can_float, guess.can_float, floats, v.real);
    keep(before.can_bool, guess.can_bool, bools, v.boolean);
    keep(before.can_time, guess.can_time, times, v.time);
    values.push_back(std::move(value));
  }

  Column build() {
    std::vector<bool> valid = guess.present != guess.rows ? present : std::vector<bool>{};
    const auto n = static_cast<std::int64_t>(values.size());
    switch (guess.type()) {
      case ColumnType::int64: return Column::of(ints, std::move(valid));
      case ColumnType::uint64: return Column::of(uints, std::move(valid));
      case ColumnType::float64: return Column::of(floats, std::move(valid));
      case ColumnType::boolean: return Column::numbers(Tensor::from_values<bool>({n}, bools), std::move(valid));
      case ColumnType::timestamp: return Column::timestamps(Tensor::from_values<std::int64_t>({n}, times), std::move(valid));
      case ColumnType::naive_timestamp:
        return Column::naive_timestamps(Tensor::from_values<std::int64_t>({n}, times), std::move(valid));
      default: return Column::of(values, std::move(valid));
    }
  }

 private:
  // Keeps the value while its type is possible; drops them all once it is not.
  template <class V, class T>
  static void keep(bool was, bool is, V& kept, T value) {
    if (is) kept.push_back(value);
    else if (was) V().swap(kept);
  }
};

bool needs_quotes(std::string_view s) {
  // A leading byte order mark is quoted too: unquoted at the start of the
  // file, a reader would take it for the file's own and drop it.
  return s.empty() || s.find_first_of(",\"\r\n") != std::string_view::npos || s.front() == ' ' || s.back() == ' ' ||
         s.starts_with("\xEF\xBB\xBF");
}

void put_field(std::string& out, std::string_view s) {
  if (!needs_quotes(s)) {
    out += s;
    return;
  }
  out += '"';
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

template <class T>
void put_number(std::string& out, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return void(out += "nan");
    if (std::isinf(v)) return void(out += v > 0 ? "inf" : "-inf");
  }
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that reads back exactly
  out.append(buf, ptr);
  // A float written as "2" would read back as an integer column.
  if constexpr (std::is_floating_point_v<T>)
    if (std::string_view(buf, static_cast<std::size_t>(ptr - buf)).find_first_of(".e") == std::string_view::npos) out += ".0";
}


void put_value(std::string& out, const Column& c, std::size_t i) {
  if (c.is_null(i)) return;
  if (c.type() == ColumnType::string) return put_field(out, c.string(i));
  const std::byte* p = c.values().data();
  auto at = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return v;
  };
  switch (c.type()) {
    case ColumnType::int8: return put_number(out, static_cast<int>(at(std::int8_t{})));
    case ColumnType::int16: return put_number(out, at(std::int16_t{}));
    case ColumnType::int32: return put_number(out, at(std::int32_t{}));
    case ColumnType::int64: return put_number(out, at(std::int64_t{}));
    case ColumnType::uint8: return put_number(out, static_cast<unsigned>(at(std::uint8_t{})));
    case ColumnType::uint16: return put_number(out, at(std::uint16_t{}));
    case ColumnType::uint32: return put_number(out, at(std::uint32_t{}));
    case ColumnType::uint64: return put_number(out, at(std::uint64_t{}));
    case ColumnType::float32: return put_number(out, at(float{}));
    case ColumnType::float64: return put_number(out, at(double{}));
    case ColumnType::boolean: return void(out += at(std::uint8_t{}) ? "True" : "False");
    case ColumnType::timestamp: return void(out += timestamp_text(at(std::int64_t{})));
    case ColumnType::naive_timestamp: return void(out += timestamp_text(at(std::int64_t{}), false));
    case ColumnType::string: return;
  }
}

}  // namespace

Table read_csv(const std::filesystem::path& file) {
  detail::CsvReader reader(file);
  const std::vector<std::string> names = detail::read_header(reader);
  std::vector<RawColumn> columns(names.size());
  std::vector<std::string> fields;
  std::size_t line = 0;
  while (reader.next(fields, line)) {
    detail::check_record(fields, names, reader.where(), line);
    for (std::size_t k = 0; k < fields.size(); ++k) columns[k].add(std::move(fields[k]));
  }
  std::vector<std::pair<std::string, Column>> named;
  for (std::size_t k = 0; k < names.size(); ++k) named.emplace_back(names[k], columns[k].build());
  return Table::make(std::move(named));
}

std::string timestamp_text(std::int64_t ns, bool utc) {
  std::int64_t secs = ns / 1'000'000'000, frac = ns % 1'000'000'000;
  if (frac < 0) frac += 1'000'000'000, --secs;
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lld%s", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(frac), utc ? "Z" : "");
  return buf;
}

void write_csv(const Table& table, const std::filesystem::path& file) {
  std::string out;
  for (std::size_t k = 0; k < table.num_columns(); ++k) {
    if (k) out += ',';
    put_field(out, table.names()[k]);
  }
  out += '\n';
  for (std::size_t i = 0; i < table.rows(); ++i) {
    for (std::size_t k = 0; k < table.num_columns(); ++k) {
      if (k) out += ',';
      put_value(out, table.column(k), i);
    }
    out += '\n';
  }
  ConstBytes data = std::as_bytes(std::span<const char>(out));
  write_file_atomically(file, std::span<const ConstBytes>(&data, 1));
}

}  // namespace amphora
