#pragma once
// What the `amphora` command prints: text from a store made safe for a
// terminal, sizes for people, JSON for programs.

#include <amphora/manifest.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace amphora::cli {

// Text that came from a store (records, metadata, file names, messages that
// quote them) goes through amphora::printable before it is printed.
using amphora::printable;
/// printable(), on one line: line breaks become spaces.
std::string one_line(std::string text);
/// --json output: indented, ASCII only (everything else escaped as \uXXXX,
/// which every JSON reader turns back into the same text).
std::string json_text(const nlohmann::json& value);
/// "12 B", "1.5 KiB", "3.0 GiB".
std::string human_bytes(std::uint64_t n);
/// "1 artifact", "2 artifacts".
std::string count_of(std::uint64_t n, std::string_view singular, std::string_view plural);
/// The string `key` of a record read from a store (a name record, a run
/// record), or "" when it is missing or not a string: such records come from
/// any version of any writer, so their informational fields are read leniently.
std::string text_field(const nlohmann::json& record, const char* key);
/// "90", "90s", "15m", "12h", "7d": a whole number of seconds, minutes,
/// hours or days. Throws InvalidArgument saying what a duration looks like.
std::chrono::seconds parse_duration(const std::string& text);
/// "7 d", "12 h", "90 s".
std::string duration_text(std::chrono::seconds duration);
/// "amphora: warning: <text>" on standard error.
void warn(const std::string& text);

}  // namespace amphora::cli
