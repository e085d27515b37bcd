#include "output.hpp"

#include <amphora/manifest.hpp>

#include <cstdio>
#include <iostream>

namespace amphora::cli {

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
