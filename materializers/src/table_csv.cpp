// Tables to and from CSV (RFC 4180): a header row, fields separated by
// commas, quoted with double quotes when they hold commas, quotes or line
// breaks (a quote inside doubled), records ended by LF or CRLF, UTF-8.

#include <amphora/manifest.hpp>
#include <amphora/table.hpp>

#include <charconv>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>

namespace amphora {

namespace {

// Splits CSV text into records, counting physical lines for messages.
class CsvParser {
 public:
  CsvParser(std::string_view text, std::string where) : p_(text.data()), end_(text.data() + text.size()), where_(std::move(where)) {
    if (text.starts_with("\xEF\xBB\xBF")) p_ += 3;  // a UTF-8 byte order mark
  }

  /// The next record's fields (false at the end). Blank lines are skipped,
  /// as pandas does. `line` is the line the record starts on.
  bool next(std::vector<std::string>& fields, std::size_t& line) {
    while (p_ < end_ && (*p_ == '\n' || (*p_ == '\r' && p_ + 1 < end_ && p_[1] == '\n'))) {
      p_ += *p_ == '\r' ? 2 : 1;
      ++line_;
    }
    if (p_ >= end_) return false;
    line = line_;
    fields.clear();
    while (true) {
      fields.emplace_back();
      std::string& field = fields.back();
      if (p_ < end_ && *p_ == '"') {
        ++p_;
        while (true) {
          if (p_ >= end_)
            throw InvalidArgument(where_ + ": line " + std::to_string(line) + ": a quoted field is not closed before the end of the file");
          if (*p_ == '"') {
            if (p_ + 1 < end_ && p_[1] == '"') {
              field += '"';
              p_ += 2;
              continue;
            }
            ++p_;
            break;
          }
          if (*p_ == '\n') ++line_;
          field += *p_++;
        }
        if (p_ < end_ && *p_ != ',' && *p_ != '\n' && !(*p_ == '\r' && p_ + 1 < end_ && p_[1] == '\n'))
          throw InvalidArgument(where_ + ": line " + std::to_string(line_) + ": unexpected character after a closing quote");
      } else {
        const char* start = p_;
        while (p_ < end_ && *p_ != ',' && *p_ != '\n' && !(*p_ == '\r' && p_ + 1 < end_ && p_[1] == '\n')) {
          if (*p_ == '"')
            throw InvalidArgument(where_ + ": line " + std::to_string(line_) + ": a quote inside an unquoted field");
          ++p_;
        }
        field.assign(start, p_);
      }
      if (p_ < end_ && *p_ == ',') {
        ++p_;
        continue;
      }
      if (p_ < end_) {
        p_ += *p_ == '\r' ? 2 : 1;
        ++line_;
      }
      return true;
    }
  }

 private:
  const char* p_;
  const char* end_;
  std::string where_;
  std::size_t line_ = 1;
};

bool parse_int(std::string_view s, std::int64_t& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool parse_float(std::string_view s, double& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

int parse_bool(std::string_view s) {  // 1 true, 0 false, -1 neither
  if (s == "true" || s == "True" || s == "TRUE") return 1;
  if (s == "false" || s == "False" || s == "FALSE") return 0;
  return -1;
}

// Days from 1970-01-01 to the proleptic Gregorian date y-m-d (Howard Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

// An ISO 8601 UTC timestamp: YYYY-MM-DD, optionally followed by T or a space
// and HH:MM:SS, an optional fraction of up to 9 digits, and an optional Z or
// +00:00. Other offsets are not taken (the column stays text).
bool parse_timestamp(std::string_view s, std::int64_t& ns) {
  auto digits = [&](std::size_t at, std::size_t n, unsigned& out) {
    if (at + n > s.size()) return false;
    out = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      out = out * 10 + static_cast<unsigned>(s[i] - '0');
    }
    return true;
  };
  unsigned y, mo, d, h = 0, mi = 0, sec = 0;
  if (!digits(0, 4, y) || s.size() < 10 || s[4] != '-' || !digits(5, 2, mo) || s[7] != '-' || !digits(8, 2, d))
    return false;
  static constexpr unsigned kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1]) return false;
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo == 2 && d == 29 && !leap) return false;
  std::size_t at = 10;
  std::int64_t frac = 0;
  if (at < s.size() && (s[at] == 'T' || s[at] == ' ')) {
    if (!digits(at + 1, 2, h) || at + 3 >= s.size() || s[at + 3] != ':' || !digits(at + 4, 2, mi) ||
        at + 6 >= s.size() || s[at + 6] != ':' || !digits(at + 7, 2, sec) || h > 23 || mi > 59 || sec > 59)
      return false;
    at += 9;
    if (at < s.size() && s[at] == '.') {
      std::size_t n = 0;
      ++at;
      while (at < s.size() && s[at] >= '0' && s[at] <= '9' && n < 9) frac = frac * 10 + (s[at++] - '0'), ++n;
      if (n == 0 || (at < s.size() && s[at] >= '0' && s[at] <= '9')) return false;
      while (n++ < 9) frac *= 10;
    }
  }
  const std::string_view zone = s.substr(at);
  if (!zone.empty() && zone != "Z" && zone != "+00:00") return false;
  ns = (days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) * 1'000'000'000 + frac;
  return true;
}

// One column's text as read, and the narrowest type every present value
// fits. Each field is parsed once: the values of every type still possible
// are kept as they are parsed, and dropped when a field rules the type out.
struct RawColumn {
  std::vector<std::string> values;
  std::vector<bool> present;
  bool can_int = true, can_float = true, can_bool = true, can_time = true;
  std::vector<std::int64_t> ints, times;
  std::vector<double> floats;
  std::vector<bool> bools;
  std::size_t present_count = 0;

  void add(std::string value) {
    const bool here = !value.empty();
    present.push_back(here);
    std::int64_t i = 0, t = 0;
    double f = 0;
    int b = 0;
    if (here) {
      ++present_count;
      if (can_int && !parse_int(value, i)) can_int = false, drop(ints);
      if (can_float && !parse_float(value, f)) can_float = false, drop(floats);
      if (can_bool && (b = parse_bool(value)) < 0) can_bool = false, drop(bools);
      if (can_time && !parse_timestamp(value, t)) can_time = false, drop(times);
    }
    if (can_int) ints.push_back(i);
    if (can_float) floats.push_back(f);
    if (can_bool) bools.push_back(b == 1);
    if (can_time) times.push_back(t);
    values.push_back(std::move(value));
  }

  Column build() {
    const bool nulls = present_count != present.size();
    std::vector<bool> valid = nulls ? present : std::vector<bool>{};
    const auto n = static_cast<std::int64_t>(values.size());
    if (present_count > 0 && can_int) return Column::of(ints, std::move(valid));
    if (present_count > 0 && can_float) return Column::of(floats, std::move(valid));
    if (present_count > 0 && can_bool) return Column::numbers(Tensor::from_values<bool>({n}, bools), std::move(valid));
    if (present_count > 0 && can_time)
      return Column::timestamps(Tensor::from_values<std::int64_t>({n}, times), std::move(valid));
    return Column::of(values, std::move(valid));
  }

 private:
  template <class V>
  static void drop(V& v) {
    V().swap(v);
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

// 2023-11-14T22:13:20.000000123Z
void put_timestamp(std::string& out, std::int64_t ns) {
  std::int64_t secs = ns / 1'000'000'000, frac = ns % 1'000'000'000;
  if (frac < 0) frac += 1'000'000'000, --secs;
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(frac));
  out += buf;
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
    case ColumnType::timestamp: return put_timestamp(out, at(std::int64_t{}));
    case ColumnType::string: return;
  }
}

}  // namespace

Table read_csv(const std::filesystem::path& file) {
  const std::string name = file.string();
  auto bytes = Buffer::read_file(file);
  CsvParser parser(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), name);
  std::vector<std::string> fields;
  std::size_t line = 0;
  if (!parser.next(fields, line)) throw InvalidArgument(name + " is empty: a CSV file starts with a header row");
  const std::vector<std::string> header = fields;
  for (std::size_t k = 0; k < header.size(); ++k)
    if (!is_valid_utf8(header[k])) throw InvalidArgument(name + ": line " + std::to_string(line) + ": column name " + std::to_string(k + 1) + " is not valid UTF-8");
  std::vector<RawColumn> columns(header.size());
  while (parser.next(fields, line)) {
    if (fields.size() != header.size())
      throw InvalidArgument(name + ": line " + std::to_string(line) + " has " + std::to_string(fields.size()) +
                            " fields, the header has " + std::to_string(header.size()));
    for (std::size_t k = 0; k < fields.size(); ++k) {
      if (!is_valid_utf8(fields[k]))
        throw InvalidArgument(name + ": line " + std::to_string(line) + ", column '" + header[k] + "': not valid UTF-8");
      columns[k].add(std::move(fields[k]));
    }
  }
  std::vector<std::pair<std::string, Column>> named;
  for (std::size_t k = 0; k < header.size(); ++k) {
    std::string column_name = header[k].empty() ? "column " + std::to_string(k + 1) : header[k];
    named.emplace_back(std::move(column_name), columns[k].build());
  }
  try {
    return Table::make(std::move(named));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(name + ": " + e.what());
  }
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
