#include "csv_reader.hpp"
#include "table_columns.hpp"

#include <amphora/error.hpp>
#include <amphora/manifest.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>

namespace amphora::detail {

namespace {

constexpr std::size_t kBlock = std::size_t{4} << 20;
constexpr std::size_t kMaxRecordBytes = std::size_t{256} << 20;

bool parse_int(std::string_view s, std::int64_t& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool parse_uint(std::string_view s, std::uint64_t& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '-') return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// Digits with an optional sign: an integer whatever its size.
bool is_integer_text(std::string_view s) {
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Decimal or exponent notation, inf, infinity or nan in any case, with an
// optional sign; not the "nan(chars)" payload form, which pandas reads as text.
bool parse_float(std::string_view s, double& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.back() == ')') return false;
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
bool parse_timestamp(std::string_view s, std::int64_t& ns, bool* zoned = nullptr) {
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
  if (zoned) *zoned = !zone.empty();
  // Nanoseconds in int64 span 1677-09-21 to 2262-04-11: a date outside is
  // not a timestamp (the column stays text, as pandas keeps it as objects),
  // never a wrapped one.
  const __int128 total = (static_cast<__int128>(days_from_civil(y, mo, d)) * 86400 + h * 3600 + mi * 60 + sec) * 1'000'000'000 + frac;
  if (total < std::numeric_limits<std::int64_t>::min() || total > std::numeric_limits<std::int64_t>::max()) return false;
  ns = static_cast<std::int64_t>(total);
  return true;
}

}  // namespace

CsvReader::CsvReader(const std::filesystem::path& file) : in_(InputFile::open(file)), where_(file.string()) {}

// Moves the unparsed bytes to the front and reads another block after them
// (setting eof_ at the end of the file).
void CsvReader::fill() {
  if (have_ > at_) std::memmove(buf_.data(), buf_.data() + at_, have_ - at_);
  have_ -= at_;
  at_ = 0;
  if (have_ > kMaxRecordBytes)
    throw InvalidArgument(where_ + ": line " + std::to_string(line_) + ": a record is longer than " +
                          std::to_string(kMaxRecordBytes >> 20) + " MiB");
  // A record longer than a block is parsed again from its start after each
  // read: reading as much again as is held keeps that linear in its length.
  // The first block is no larger than the file (and one byte to see its
  // end), so that a small file costs little.
  const std::size_t block = started_ ? kBlock : static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, in_.size() + 1));
  const std::size_t want = std::max(block, std::min(have_, kMaxRecordBytes + 1 - have_));
  if (buf_.size() < have_ + want) buf_.resize(have_ + want);
  while (have_ < buf_.size()) {
    const std::size_t got = in_.read(MutableBytes(reinterpret_cast<std::byte*>(buf_.data() + have_), buf_.size() - have_));
    if (got == 0) {
      eof_ = true;
      break;
    }
    have_ += got;
    read_ += got;
  }
  if (!started_) {  // the first block: full, or the whole file
    started_ = true;
    if (std::string_view(buf_.data(), have_).starts_with("\xEF\xBB\xBF")) at_ = 3;  // a UTF-8 byte order mark
  }
}

bool CsvReader::next(std::vector<std::string>& fields, std::size_t& line) {
  while (true) {
    const char* p = buf_.data() + at_;
    const std::size_t line_before = line_;
    switch (parse(p, buf_.data() + have_, fields, line)) {
      case Parse::record: at_ = static_cast<std::size_t>(p - buf_.data()); return true;
      case Parse::end: return false;
      case Parse::more:
        // The record (or a blank line's CR LF) runs past what is read: read
        // on and parse it again from its start.
        line_ = line_before;
        fill();
        break;
    }
  }
}

// One record from [p, end), or Parse::more when the block ends before the
// record does and the file goes on. Only then is an unclosed quote an error.
CsvReader::Parse CsvReader::parse(const char*& p, const char* end, std::vector<std::string>& fields, std::size_t& line) {
  const bool last = eof_;
  // At p: 1 a line break (advancing past it), 0 none, -1 cannot tell yet.
  auto line_break = [&]() -> int {
    if (p >= end) return last ? 0 : -1;
    if (*p == '\n') return ++p, 1;
    if (*p != '\r') return 0;
    if (p + 1 >= end) return last ? 0 : -1;
    return p[1] == '\n' ? (p += 2, 1) : 0;
  };
  while (true) {
    const int b = line_break();
    if (b < 0) return Parse::more;
    if (b == 0) break;
    ++line_;
  }
  if (p >= end) return last ? Parse::end : Parse::more;
  line = line_;
  std::size_t n = 0;
  while (true) {
    if (n == fields.size()) fields.emplace_back();
    std::string& field = fields[n++];
    field.clear();
    if (p < end && *p == '"') {
      ++p;
      while (true) {
        if (p >= end) {
          if (!last) return Parse::more;
          throw InvalidArgument(where_ + ": line " + std::to_string(line) + ": a quoted field is not closed before the end of the file");
        }
        if (*p == '"') {
          if (p + 1 >= end && !last) return Parse::more;
          if (p + 1 < end && p[1] == '"') {
            field += '"';
            p += 2;
            continue;
          }
          ++p;
          break;
        }
        // Runs of ordinary characters at once.
        const char* stop = static_cast<const char*>(std::memchr(p, '"', static_cast<std::size_t>(end - p)));
        if (!stop) stop = end;
        for (const char* q = p; q < stop; ++q) line_ += *q == '\n';
        field.append(p, stop);
        p = stop;
      }
      if (p < end && *p != ',') {
        const char* at = p;
        const int b = line_break();
        if (b < 0) return Parse::more;
        p = at;
        if (b == 0)
          throw InvalidArgument(where_ + ": line " + std::to_string(line_) + ": unexpected character after a closing quote");
      } else if (p >= end && !last) {
        return Parse::more;
      }
    } else {
      const char* start = p;
      while (p < end && *p != ',' && *p != '\n') {
        if (*p == '"')
          throw InvalidArgument(where_ + ": line " + std::to_string(line_) + ": a quote inside an unquoted field");
        if (*p == '\r') {  // the end of the record before LF; alone, refused
          if (p + 1 >= end && !last) return Parse::more;
          if (p + 1 < end && p[1] == '\n') break;
          // pandas ends a record at a lone CR, RFC 4180 does not: rather than
          // guess, a file with old Mac line ends is refused.
          throw InvalidArgument(where_ + ": line " + std::to_string(line_) +
                                ": a carriage return without a line feed outside quotes (line ends must be LF or "
                                "CRLF; a field holding a CR must be quoted)");
        }
        ++p;
      }
      if (p >= end && !last) return Parse::more;
      field.assign(start, p);
    }
    if (p < end && *p == ',') {
      ++p;
      if (p >= end && !last) return Parse::more;
      continue;
    }
    if (line_break() > 0) ++line_;
    fields.resize(n);
    return Parse::record;
  }
}

FieldValue TypeGuess::add(std::string_view field) {
  ++rows;
  FieldValue v;
  if (field.empty()) return v;
  ++present;
  int b = 0;
  const bool in_int64 = parse_int(field, v.integer);
  if (can_int && !in_int64) can_int = false;
  if (can_uint) {
    if (in_int64 && v.integer >= 0)
      v.uinteger = static_cast<std::uint64_t>(v.integer);
    else if (in_int64 || !parse_uint(field, v.uinteger))
      can_uint = false;
  }
  // float64 holds integers exactly up to 2^53: a column holding a larger one
  // besides non-integers is text rather than rounded.
  constexpr std::int64_t kExactInFloat = std::int64_t{1} << 53;
  if (can_float && is_integer_text(field) && !(in_int64 && v.integer <= kExactInFloat && v.integer >= -kExactInFloat))
    can_float = false;
  if (can_float && !parse_float(field, v.real)) can_float = false;
  if (can_bool && (b = parse_bool(field)) < 0) can_bool = false;
  bool has_zone = false;
  if (can_time && !parse_timestamp(field, v.time, &has_zone)) can_time = false;
  zoned |= can_time && has_zone;
  v.boolean = b == 1;
  return v;
}

bool parse_field(ColumnType type, std::string_view field, FieldValue& value) {
  switch (type) {
    case ColumnType::int64: return parse_int(field, value.integer);
    case ColumnType::uint64: return parse_uint(field, value.uinteger);
    case ColumnType::float64: return parse_float(field, value.real);
    case ColumnType::boolean: {
      const int b = parse_bool(field);
      value.boolean = b == 1;
      return b >= 0;
    }
    case ColumnType::timestamp: case ColumnType::naive_timestamp: return parse_timestamp(field, value.time);
    default: return false;
  }
}

ColumnType TypeGuess::type() const {
  if (present == 0) return ColumnType::string;
  if (can_int) return ColumnType::int64;
  if (can_uint) return ColumnType::uint64;
  if (can_float) return ColumnType::float64;
  if (can_bool) return ColumnType::boolean;
  if (can_time) return zoned ? ColumnType::timestamp : ColumnType::naive_timestamp;
  return ColumnType::string;
}

std::vector<std::string> read_header(CsvReader& reader) {
  const std::string& where = reader.where();
  std::vector<std::string> header;
  std::size_t line = 0;
  if (!reader.next(header, line)) throw InvalidArgument(where + " is empty: a CSV file starts with a header row");
  if (header.size() > kMaxCsvColumns)
    throw InvalidArgument(where + ": line " + std::to_string(line) + ": the header has " + std::to_string(header.size()) +
                          " columns; a CSV file imports with at most " + std::to_string(kMaxCsvColumns));
  std::vector<std::string> names;
  for (std::size_t k = 0; k < header.size(); ++k) {
    if (!is_valid_utf8(header[k]))
      throw InvalidArgument(where + ": line " + std::to_string(line) + ": column name " + std::to_string(k + 1) +
                            " is not valid UTF-8");
    names.push_back(header[k].empty() ? "column " + std::to_string(k + 1) : header[k]);
  }
  // The same checks of names as any table's, without making one: a table
  // of empty columns costs a column's allocations per name.
  std::unordered_set<std::string_view> seen;
  seen.reserve(names.size());
  try {
    for (std::size_t k = 0; k < names.size(); ++k) check_column_name(seen, names[k], k);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(where + ": " + e.what());
  }
  return names;
}

void check_record(const std::vector<std::string>& fields, const std::vector<std::string>& names,
                  const std::string& where, std::size_t line) {
  if (fields.size() != names.size())
    throw InvalidArgument(where + ": line " + std::to_string(line) + " has " + std::to_string(fields.size()) +
                          " fields, the header has " + std::to_string(names.size()));
  for (std::size_t k = 0; k < fields.size(); ++k)
    if (!is_valid_utf8(fields[k]))
      throw InvalidArgument(where + ": line " + std::to_string(line) + ", column '" + names[k] + "': not valid UTF-8");
}

}  // namespace amphora::detail
