#pragma once
// Where S3 credentials come from, in the order the AWS tools use: the
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN),
// else the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else
// ~/.aws/credentials), section $AWS_PROFILE (else "default"). Credentials
// are never written to a store, a log or a message: errors name where they
// looked and which key is missing, never a value.

#include "sigv4.hpp"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace amphora::detail::sigv4 {

/// The environment as a lookup, so that tests need not change the process's.
using Environment = std::function<std::optional<std::string>(std::string_view name)>;

/// The process environment.
Environment process_environment();

/// The credentials of `profile` (empty: $AWS_PROFILE, else "default").
/// Throws NotFound saying where it looked when there are none, CorruptData
/// naming the file and line when the credentials file cannot be read as
/// one (a key outside any section, a line that is no `key = value`), and
/// InvalidArgument for a profile named in the environment but absent.
Credentials find_credentials(const Environment& environment, std::string_view profile = {});

}  // namespace amphora::detail::sigv4
