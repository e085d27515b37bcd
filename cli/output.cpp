#include "output.hpp"

#include <amphora/error.hpp>
#include <amphora/manifest.hpp>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>

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

std::chrono::seconds parse_duration(const std::string& text) {
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string unit(end, text.data() + text.size());
  static const std::map<std::string, std::int64_t> units = {{"", 1}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}};
  auto it = units.find(unit);
  if (error != std::errc() || end == text.data() || value < 0 || it == units.end() ||
      value > std::numeric_limits<std::int64_t>::max() / it->second)
    throw InvalidArgument("'" + printable(text) + "' is not a duration: give seconds, or a whole number with s, m, h or d (7d)");
  return std::chrono::seconds(value * it->second);
}

std::string duration_text(std::chrono::seconds grace) {
  const auto s = grace.count();
  if (s >= 86400 && s % 86400 == 0) return std::to_string(s / 86400) + " d";
  if (s >= 3600 && s % 3600 == 0) return std::to_string(s / 3600) + " h";
  return std::to_string(s) + " s";
}

}  // namespace amphora::cli
