// A pipeline program's run configuration from untrusted text: the YAML file
// of --config (amphora::read_run_config) and --set STEP.PARAM=VALUE
// overrides (amphora::apply_override), docs/FORMAT.md §1.9. The input is the
// YAML file's text, then optionally a NUL byte and --set assignments, one a
// line, applied in order after the file. Each must either give parameters or
// be refused with InvalidArgument (the type both document for anything but a
// missing file), never crash or throw anything else, and:
//   - bounded memory: reading the file and applying the overrides holds at
//     its peak at most kConstant + kPerByte x the input's size. An alias
//     bomb must be refused cheaply, whatever its aliases repeat;
//   - exact round trip: the parameters written back as YAML (flow style,
//     every string double-quoted, numbers in their shortest exact form) read
//     back as the same values, types included; and each parameter given
//     again as a --set override gives the same value. Skipped only where the
//     documented limits refuse the written form (over 1 MiB of text, more
//     than 100,000 values in one file).
//
// The memory bound. Per input byte: yaml-cpp's node for each value (a flow
// list of 4,000 ones, 8 KB, peaked at 1.7 MB: 210 bytes per input byte; 4,000
// nested lists at 1.2 MB). Whatever the input: the 100,000 values the
// reader allows once aliases are expanded, each a JSON value (a one-key
// mapping repeated 40,000 times by 240 bytes of aliases peaked at 9.1 MB,
// about 230 bytes a mapping), plus at most the text a file may hold (1 MiB)
// if expanded text is capped as the file is. Bound: 32 MiB + 2 KiB per input
// byte. What it catches: aliases repeat whole scalars, so 1.2 KB of YAML
// naming one 1,000-byte string 81,111 times through five levels of aliases
// (under the 100,000 values) holds 86 MB, and a 1 MiB file could ask for
// tens of gigabytes: the value count alone does not bound memory.

#include <amphora/error.hpp>
#include <amphora/run_main.hpp>

#include "alloc_bound.hpp"
#include "same_json.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

namespace {

constexpr std::uint64_t kConstant = 32u << 20;
constexpr std::uint64_t kPerByte = 2u << 10;
// The documented limits (run_main.cpp): file size and values per file.
constexpr std::size_t kMaxFileBytes = 1u << 20;
constexpr std::size_t kMaxValues = 100'000;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_run_config: %s\n", what);
  __builtin_trap();
}

std::filesystem::path scratch(const char* name) {
  static const std::filesystem::path dir = [] {
    // Under $TMPDIR when set (fuzz/run.sh points it into the build directory).
    std::string tmpl = (std::filesystem::temp_directory_path() / "amphora-fuzz-run-config-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    return std::filesystem::path(tmpl);
  }();
  return dir / name;
}

void write_file(const std::filesystem::path& file, std::string_view text) {
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(text.data(), static_cast<std::streamsize>(text.size()));
}

// Every failure must be InvalidArgument; any other amphora::Error is a finding
// (anything else escapes, and libFuzzer reports the uncaught exception).
template <class F>
bool refused(const char* what, F&& f) {
  try {
    f();
    return false;
  } catch (const amphora::InvalidArgument&) {
    return true;
  } catch (const amphora::Error& e) {
    std::fprintf(stderr, "%s: %s\n", what, e.what());
    finding("refused with an exception other than InvalidArgument");
  }
}

// Decodes one UTF-8 sequence at s[i]; false for invalid bytes.
bool next_code_point(std::string_view s, std::size_t& i, char32_t& cp) {
  const auto b = static_cast<unsigned char>(s[i]);
  int n = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
  if (n < 0 || i + static_cast<std::size_t>(n) >= s.size() + (n == 0 ? 1 : 0)) return false;
  cp = n == 0 ? b : n == 1 ? (b & 0x1f) : n == 2 ? (b & 0x0f) : (b & 0x07);
  for (int k = 1; k <= n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
    if ((c >> 6) != 2) return false;
    cp = (cp << 6) | (c & 0x3f);
  }
  static constexpr char32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
  if (cp < kLeast[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
  i += static_cast<std::size_t>(n) + 1;
  return true;
}

// A YAML double-quoted scalar holding exactly `s` (which must be UTF-8):
// printable ASCII as itself, everything else escaped by code point.
bool quoted(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    if (!next_code_point(s, i, cp)) return false;
    char buf[16];
    if (cp == '"' || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp >= 0x20 && cp < 0x7f) {
      out += static_cast<char>(cp);
    } else {
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02X" : cp < 0x10000 ? "\\u%04X" : "\\U%08X",
                    static_cast<unsigned>(cp));
      out += buf;
    }
  }
  out += '"';
  return true;
}

// `v` as YAML (flow style) that the run configuration reader reads back as
// `v`; false when it holds a string that is not UTF-8.
bool yaml(std::string& out, const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: out += "null"; return true;
    case nlohmann::json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return true;
    case nlohmann::json::value_t::number_integer: out += std::to_string(v.get<std::int64_t>()); return true;
    case nlohmann::json::value_t::number_unsigned: out += std::to_string(v.get<std::uint64_t>()); return true;
    case nlohmann::json::value_t::number_float: {
      const double d = v.get<double>();
      if (!std::isfinite(d)) finding("a parameter holds a NaN or an infinity");
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
      std::string text(buf, end);
      if (text.find_first_of(".e") == std::string::npos) text += ".0";  // else it reads back as an integer
      out += text;
      return true;
    }
    case nlohmann::json::value_t::string: return quoted(out, v.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ", ";
        first = false;
        if (!yaml(out, item)) return false;
      }
      out += ']';
      return true;
    }
    case nlohmann::json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += "? ";  // explicit key: an implicit one may be at most 1024 characters
        if (!quoted(out, it.key())) return false;
        out += ": ";
        if (!yaml(out, it.value())) return false;
      }
      out += '}';
      return true;
    }
    default: finding("a parameter holds a value JSON text cannot");
  }
}

// Values as the reader counts them: every scalar, list and mapping.
std::size_t count_values(const nlohmann::json& v) {
  std::size_t n = 1;
  if (v.is_structured())
    for (const auto& item : v) n += count_values(item);
  return n;
}

void round_trip(const nlohmann::json& params) {
  if (!params.is_object()) finding("the parameters are not a mapping of steps");
  std::string text;
  std::size_t values = 0;
  for (auto step = params.begin(); step != params.end(); ++step) {
    if (!step.value().is_object()) finding("a step's parameters are not a mapping");
    // An explicit key ("? KEY" then ": VALUE"): YAML limits an implicit key
    // to 1024 characters, and a step name of --set can be longer.
    text += "? ";
    if (!quoted(text, step.key())) return;  // not UTF-8: cannot be written as YAML text
    text += "\n: ";
    if (!yaml(text, step.value())) return;
    text += '\n';
    for (const auto& [key, value] : step.value().items()) values += count_values(value);
  }
  if (text.size() > kMaxFileBytes || values > kMaxValues) return;  // the documented limits
  const auto file = scratch("again.yaml");
  write_file(file, text);
  nlohmann::json again;
  if (refused("re-read", [&] { again = amphora::read_run_config(file); })) {
    std::fprintf(stderr, "written as:\n%s\n", text.c_str());
    finding("parameters written back as YAML are refused");
  }
  if (!fuzz::same_json(again, params)) {
    std::fprintf(stderr, "written as:\n%s\nread back: %s\nwas:       %s\n", text.c_str(), again.dump().c_str(),
                 params.dump().c_str());
    finding("parameters written back as YAML read back different");
  }

  // Each parameter again as an override, where STEP.PARAM=VALUE can name it.
  for (auto step = params.begin(); step != params.end(); ++step) {
    const std::string& name = step.key();
    if (name.empty() || name.find_first_of(".=") != std::string::npos) continue;
    for (auto it = step.value().begin(); it != step.value().end(); ++it) {
      if (it.key().empty() || it.key().find('=') != std::string::npos || count_values(it.value()) > kMaxValues) continue;
      std::string assignment = name + "." + it.key() + "=";
      if (!yaml(assignment, it.value())) continue;
      nlohmann::json set = nlohmann::json::object();
      if (refused("--set again", [&] { amphora::apply_override(set, assignment); })) {
        std::fprintf(stderr, "--set %s\n", assignment.c_str());
        finding("a parameter given again as --set is refused");
      }
      if (!set.contains(name) || !set[name].contains(it.key()) || !fuzz::same_json(set[name][it.key()], it.value())) {
        std::fprintf(stderr, "--set %s\ngives %s\n", assignment.c_str(), set.dump().c_str());
        finding("a parameter given again as --set gives another value");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view config = input.substr(0, nul);
  std::vector<std::string> sets;
  if (nul != std::string_view::npos) {
    std::string_view rest = input.substr(nul + 1);
    while (!rest.empty()) {
      const std::size_t nl = rest.find('\n');
      sets.emplace_back(rest.substr(0, nl));
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    }
  }
  const auto file = scratch("run.yaml");
  write_file(file, config);

  // As run_main does it: the file, then each override; a refused one here
  // is skipped, so that the others are tried too.
  nlohmann::json params = nlohmann::json::object();
  {
    fuzz::PeakAllocation memory;
    if (refused("read_run_config", [&] { params = amphora::read_run_config(file); })) params = nlohmann::json::object();
    for (const auto& s : sets) refused("apply_override", [&] { amphora::apply_override(params, s); });
    fuzz::require_peak_within("fuzz_run_config", "read_run_config and apply_override", memory, size, kConstant, kPerByte);
  }
  // Again, unmeasured: a refused override leaves the parameters as they were.
  if (!sets.empty()) {
    nlohmann::json again = nlohmann::json::object();
    if (refused("read_run_config", [&] { again = amphora::read_run_config(file); })) again = nlohmann::json::object();
    for (const auto& s : sets) {
      const nlohmann::json before = again;
      if (refused("apply_override", [&] { amphora::apply_override(again, s); }) && !fuzz::same_json(again, before))
        finding("a refused override changed the parameters");
    }
    if (!fuzz::same_json(again, params)) finding("the same configuration and overrides gave other parameters");
  }
  round_trip(params);
  return 0;
}
