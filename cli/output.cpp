#include "output.hpp"

#include <amphora/manifest.hpp>

#include <cstdio>
#include <iostream>

namespace amphora::cli {

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char buf[12];
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t i = 0, n = text.size();
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) {
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence is kept unless it encodes a C1 control;
    // any other byte (a stray 8-bit C1 byte included) is shown as \xNN.
    std::size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || i + len > n || !amphora::is_valid_utf8(text.substr(i, len))) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
      continue;
    }
    if (len == 2 && c == 0xc2 && p[i + 1] <= 0x9f) {  // U+0080..U+009F
      std::snprintf(buf, sizeof buf, "\\u%04x", p[i + 1]);
      out += buf;
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return printable(text);
}

std::string json_text(const nlohmann::json& value) { return value.dump(2, ' ', true); }

std::string text_field(const nlohmann::json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string human_bytes(std::uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string count_of(std::uint64_t n, std::string_view singular, std::string_view plural) {
  return std::to_string(n) + " " + std::string(n == 1 ? singular : plural);
}

void warn(const std::string& text) { std::cerr << "amphora: warning: " << one_line(text) << "\n"; }

}  // namespace amphora::cli
