#include "credentials.hpp"

#include <amphora/error.hpp>

#include <cstdlib>
#include <fstream>
#include <map>

namespace amphora::detail::sigv4 {

namespace {

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last - first + 1));
}

// The shared credentials file: "[profile]" sections of "key = value" lines;
// '#' and ';' start comments. Values are not kept for sections not asked for.
std::optional<std::map<std::string, std::string>> read_profile(const std::filesystem::path& file,
                                                               const std::string& profile) {
  // A FIFO would block the read, and no credentials file is megabytes long.
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::exists(status)) return std::nullopt;
  if (!std::filesystem::is_regular_file(status)) throw InvalidArgument(file.string() + " is not a regular file");
  if (std::filesystem::file_size(file, ec) > (1u << 20)) throw InvalidArgument(file.string() + " is larger than 1 MiB");
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::optional<std::map<std::string, std::string>> found;
  std::string section, line;
  bool in_section = false;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    const std::string text = trimmed(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    const std::string where = file.string() + " line " + std::to_string(number);
    if (text.front() == '[') {
      // "[name]", then nothing but a comment.
      const auto close = text.find(']');
      const std::string rest = close == std::string::npos ? "" : trimmed(std::string_view(text).substr(close + 1));
      if (close == std::string::npos || (!rest.empty() && rest[0] != '#' && rest[0] != ';'))
        throw CorruptData(where + ": a section header is '[name]', optionally followed by a comment");
      section = trimmed(std::string_view(text).substr(1, close - 1));
      in_section = true;
      if (section == profile && !found) found.emplace();
      continue;
    }
    const auto equals = text.find('=');
    if (equals == std::string::npos) throw CorruptData(where + ": expected 'key = value'");
    if (!in_section) throw CorruptData(where + ": a key before any [profile] section");
    if (section == profile) (*found)[trimmed(std::string_view(text).substr(0, equals))] = trimmed(std::string_view(text).substr(equals + 1));
  }
  return found;
}

}  // namespace

Environment process_environment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (!value || !*value) return std::nullopt;
    return std::string(value);
  };
}

Credentials find_credentials(const Environment& environment, std::string_view profile) {
  const auto key = environment("AWS_ACCESS_KEY_ID");
  const auto secret = environment("AWS_SECRET_ACCESS_KEY");
  if (profile.empty() && key && secret) return {*key, *secret, environment("AWS_SESSION_TOKEN").value_or("")};
  if (profile.empty() && (key || secret))
    throw InvalidArgument(std::string(key ? "AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY"
                                          : "AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID"));

  const auto named = environment("AWS_PROFILE");
  const std::string wanted = !profile.empty() ? std::string(profile) : named.value_or("default");
  std::filesystem::path file;
  if (auto shared = environment("AWS_SHARED_CREDENTIALS_FILE"))
    file = *shared;
  else if (auto home = environment("HOME"))
    file = std::filesystem::path(*home) / ".aws" / "credentials";
  const auto section = file.empty() ? std::nullopt : read_profile(file, wanted);
  if (!section) {
    if (!profile.empty() || named)
      throw InvalidArgument("no profile '" + wanted + "' in " + (file.empty() ? std::string("~/.aws/credentials") : file.string()));
    throw NotFound("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile '" + wanted +
                   "' in " + (file.empty() ? std::string("~/.aws/credentials ($HOME is not set)") : file.string()));
  }
  const auto get = [&](const char* name) {
    auto it = section->find(name);
    if (it == section->end() || it->second.empty())
      throw InvalidArgument("profile '" + wanted + "' in " + file.string() + " has no " + name);
    return it->second;
  };
  Credentials credentials{get("aws_access_key_id"), get("aws_secret_access_key"), ""};
  if (auto token = section->find("aws_session_token"); token != section->end()) credentials.session_token = token->second;
  return credentials;
}

}  // namespace amphora::detail::sigv4
