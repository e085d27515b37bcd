#include <amphora/error.hpp>
#include <amphora/npy_format.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace amphora {

namespace {

constexpr std::array<std::uint8_t, 6> kMagic = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kMaxHeaderBytes = 1u << 20;

[[noreturn]] void bad_header(std::string_view where, const std::string& why) {
  throw CorruptData(std::string(where) + ": invalid .npy header: " + why);
}

// A parser for the Python dict literal of a .npy header:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// NumPy reads it with ast.literal_eval and then checks the keys and types, so
// whatever either of those refuses is refused here too: a file Amphora takes
// for an array must be one numpy.load opens. The parser takes only the plain
// forms NumPy writes (decimal integers, quoted strings without escapes,
// spaces and line breaks between tokens), so some exotic spellings Python
// would also accept (hex or signed dimensions, comments) are refused as well.
class DictParser {
 public:
  DictParser(std::string_view text, std::string_view where, bool python2_longs)
      : s_(text), where_(where), python2_longs_(python2_longs) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    skip_space();
    while (peek() != '}') {
      std::size_t key_at = i_;
      std::string key = string_literal();
      expect(':');
      bool* seen = key == "descr" ? &seen_descr : key == "fortran_order" ? &seen_order : key == "shape" ? &seen_shape : nullptr;
      if (!seen) bad_header(where_, "unexpected key '" + key + "'");
      // Python keeps the last of repeated keys, but another reader may keep
      // the first, and a header two programs read differently is no header.
      if (*seen)
        bad_header(where_, "key '" + key + "' appears twice, at offset " + std::to_string(key_at) +
                               " (NumPy would use the last value; Amphora refuses an ambiguous header)");
      *seen = true;
      if (key == "descr") {
        skip_space();
        if (peek() == '[')
          throw Unsupported(std::string(where_) + ": structured (record) dtypes are not supported");
        h.descr = string_literal();
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
      } else {
        h.shape = tuple();
      }
      skip_space();
      if (peek() == '}') break;
      if (peek() != ',') bad_header(where_, "expected ',' or '}' at offset " + std::to_string(i_));
      ++i_;
      skip_space();
    }
    ++i_;
    skip_space();
    if (i_ != s_.size()) bad_header(where_, "trailing characters after the dictionary");
    std::string missing;
    const std::pair<bool, std::string_view> keys[] = {
        {seen_descr, "'descr'"}, {seen_order, "'fortran_order'"}, {seen_shape, "'shape'"}};
    for (auto [seen, key] : keys)
      if (!seen) missing += (missing.empty() ? "" : ", ") + std::string(key);
    if (!missing.empty()) bad_header(where_, "the dictionary lacks " + missing);
    return h;
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool continues_token(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.';
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad_header(where_, std::string("expected '") + c + "' at offset " + std::to_string(i_));
    ++i_;
  }
  std::string string_literal() {
    skip_space();
    char quote = peek();
    if (quote != '\'' && quote != '"') bad_header(where_, "expected a string at offset " + std::to_string(i_));
    std::size_t end = i_ + 1;
    for (; end < s_.size() && s_[end] != quote; ++end) {
      if (s_[end] == '\\') bad_header(where_, "escape sequences are not supported");
      // A quoted Python string cannot hold a raw line break.
      if (s_[end] == '\n' || s_[end] == '\r')
        bad_header(where_, "the string at offset " + std::to_string(i_) + " runs over a line break");
    }
    if (end == s_.size()) bad_header(where_, "unterminated string");
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    bool value;
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      value = true;
    } else if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      value = false;
    } else {
      bad_header(where_, "fortran_order is neither True nor False");
    }
    if (continues_token(peek())) bad_header(where_, "fortran_order is neither True nor False");
    return value;
  }
  std::int64_t dimension() {
    skip_space();
    std::size_t start = i_;
    while (is_digit(peek())) ++i_;
    if (i_ == start)
      bad_header(where_, "shape holds something other than a non-negative integer at offset " + std::to_string(start));
    std::string_view digits = s_.substr(start, i_ - start);
    if (digits.size() > 1 && digits[0] == '0' && digits.find_first_not_of('0') != std::string_view::npos)
      bad_header(where_, "shape dimension '" + std::string(digits) +
                             "' has a leading zero, which Python 3 integer literals do not allow");
    std::int64_t v = 0;
    auto [ptr, err] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (err != std::errc() || ptr != digits.data() + digits.size())
      bad_header(where_, "shape dimension " + std::string(digits) + " does not fit in 64 bits");
    if (peek() == 'L') {  // a Python 2 long, which numpy filters out of 1.0 and 2.0 headers only
      if (!python2_longs_)
        bad_header(where_, "shape dimension " + std::string(digits) +
                               "L uses Python 2 syntax, which only version 1.0 and 2.0 headers may hold");
      ++i_;
    }
    if (continues_token(peek()))
      bad_header(where_, "shape holds something other than a non-negative integer at offset " + std::to_string(start));
    return v;
  }
  std::vector<std::int64_t> tuple() {
    std::vector<std::int64_t> dims;
    skip_space();
    if (peek() != '(') bad_header(where_, "shape is not a tuple (offset " + std::to_string(i_) + ")");
    std::size_t open = i_++;
    skip_space();
    while (peek() != ')') {
      dims.push_back(dimension());
      if (dims.size() > kMaxTensorDims)
        bad_header(where_, "more than " + std::to_string(kMaxTensorDims) + " dimensions");
      skip_space();
      if (peek() == ')') {
        if (dims.size() == 1)
          bad_header(where_, "shape " + std::string(s_.substr(open, i_ + 1 - open)) +
                                 " is an integer in parentheses, not a tuple: a one-element tuple needs a "
                                 "trailing comma, as in (" + std::to_string(dims[0]) + ",)");
        break;
      }
      if (peek() != ',') bad_header(where_, "expected ',' or ')' in the shape at offset " + std::to_string(i_));
      ++i_;
      skip_space();
    }
    ++i_;
    return dims;
  }

  std::string_view s_;
  std::string_view where_;
  bool python2_longs_;
  std::size_t i_ = 0;
};

}  // namespace

std::string_view descr_of(DType dtype) {
  switch (dtype) {
    case DType::bool_: return "|b1";
    case DType::int8: return "|i1";
    case DType::int16: return "<i2";
    case DType::int32: return "<i4";
    case DType::int64: return "<i8";
    case DType::uint8: return "|u1";
    case DType::uint16: return "<u2";
    case DType::uint32: return "<u4";
    case DType::uint64: return "<u8";
    case DType::float16: return "<f2";
    case DType::bfloat16: return "<u2";
    case DType::float32: return "<f4";
    case DType::float64: return "<f8";
    case DType::complex64: return "<c8";
    case DType::complex128: return "<c16";
  }
  return "?";
}

std::pair<DType, bool> dtype_from_descr(std::string_view descr, std::string_view where) {
  auto unsupported = [&] {
    throw Unsupported(std::string(where) + ": unsupported dtype '" + std::string(descr) +
                      "' (supported: bool, int8-64, uint8-64, float16/32/64, complex64/128)");
  };
  if (descr.size() < 3) unsupported();
  char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') unsupported();
  auto code = descr.substr(1);
  static constexpr std::pair<std::string_view, DType> kCodes[] = {
      {"b1", DType::bool_},  {"i1", DType::int8},    {"i2", DType::int16},    {"i4", DType::int32},
      {"i8", DType::int64},  {"u1", DType::uint8},   {"u2", DType::uint16},   {"u4", DType::uint32},
      {"u8", DType::uint64}, {"f2", DType::float16}, {"f4", DType::float32},  {"f8", DType::float64},
      {"c8", DType::complex64}, {"c16", DType::complex128}};
  for (auto [c, dtype] : kCodes) {
    if (c != code) continue;
    if (order == '|' && dtype_size(dtype) != 1) unsupported();
    return {dtype, order == '>' && dtype_size(dtype) > 1};
  }
  unsupported();
  return {};
}

NpyHeader parse_npy_header(ConstBytes file, std::string_view where) {
  if (file.size() < 10 || std::memcmp(file.data(), kMagic.data(), kMagic.size()) != 0)
    bad_header(where, "not a .npy file (magic string missing)");
  NpyHeader h;
  h.major_version = static_cast<int>(file[6]);
  h.minor_version = static_cast<int>(file[7]);
  std::size_t length_bytes = 0;
  if (h.major_version == 1 && h.minor_version == 0)
    length_bytes = 2;
  else if ((h.major_version == 2 || h.major_version == 3) && h.minor_version == 0)
    length_bytes = 4;
  else
    throw Unsupported(std::string(where) + ": .npy format version " + std::to_string(h.major_version) + "." +
                      std::to_string(h.minor_version) + " is not supported (1.0, 2.0, 3.0 are)");
  if (file.size() < 8 + length_bytes) bad_header(where, "file ends inside the header");
  std::uint64_t header_len = 0;
  for (std::size_t k = 0; k < length_bytes; ++k)
    header_len |= static_cast<std::uint64_t>(file[8 + k]) << (8 * k);
  if (header_len > kMaxHeaderBytes) bad_header(where, "header claims " + std::to_string(header_len) + " bytes");
  h.data_offset = 8 + length_bytes + static_cast<std::size_t>(header_len);
  if (h.data_offset > file.size())
    bad_header(where, "header claims " + std::to_string(header_len) + " bytes but the file holds only " +
                          std::to_string(file.size()));
  std::string_view text(reinterpret_cast<const char*>(file.data()) + 8 + length_bytes,
                        static_cast<std::size_t>(header_len));
  for (unsigned char c : text)
    if (c == 0 || (c >= 0x80 && h.major_version < 3)) bad_header(where, "non-ASCII byte in header");
  NpyHeader parsed = DictParser(text, where, h.major_version < 3).parse();
  h.descr = std::move(parsed.descr);
  h.fortran_order = parsed.fortran_order;
  h.shape = std::move(parsed.shape);
  return h;
}

std::string make_npy_header(DType dtype, std::span<const std::int64_t> shape, std::size_t alignment) {
  return make_npy_header(descr_of(dtype), shape, alignment);
}

std::string make_npy_header(std::string_view descr, std::span<const std::int64_t> shape, std::size_t alignment) {
  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (k) dict += ", ";
    dict += std::to_string(shape[k]);
  }
  if (shape.size() == 1) dict += ",";
  dict += "), }";
  std::size_t total = 10 + dict.size() + 1;
  std::size_t padded = (total + alignment - 1) / alignment * alignment;
  if (padded - 10 > 0xffff) throw InvalidArgument("npy header alignment too large");
  dict.append(padded - total, ' ');
  dict += '\n';
  std::string out(reinterpret_cast<const char*>(kMagic.data()), kMagic.size());
  out += '\x01';
  out += '\x00';
  auto len = static_cast<std::uint16_t>(dict.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += dict;
  return out;
}

}  // namespace amphora
