#pragma once
// AWS Signature Version 4 for S3 requests: the canonical request, the
// string to sign, the signing key and the Authorization header, as AWS's
// "Authenticating Requests (AWS Signature Version 4)" defines them. Pure
// functions, thread-safe; HMAC-SHA256 from OpenSSL's libcrypto. Debian
// packages no AWS SDK for C++, and libs3 signs only version 2.

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace amphora::detail::sigv4 {

/// Never written to a store, a log or a message.
struct Credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  ///< empty unless temporary credentials
};

/// One request, as it will be sent.
struct Request {
  std::string method;  ///< "GET", "PUT", ...
  /// The path, not yet encoded ("/bucket/key with spaces"); each segment is
  /// encoded once, '/' kept, as S3 wants.
  std::string path = "/";
  /// Query parameters, not yet encoded; a name alone has an empty value.
  std::vector<std::pair<std::string, std::string>> query;
  /// Headers to sign, `host` and `x-amz-date` among them (any case, any
  /// order; a name given twice has its values joined by commas).
  std::vector<std::pair<std::string, std::string>> headers;
  /// Hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"; S3 wants it in
  /// `x-amz-content-sha256` too.
  std::string payload_sha256;
};

/// Percent-encodes every byte but A-Z a-z 0-9 - _ . ~ (and '/' when
/// `keep_slash`), upper-case hex, as SigV4 requires.
std::string uri_encode(std::string_view text, bool keep_slash);

/// The canonical request: method, encoded path, sorted encoded query,
/// lower-cased sorted trimmed headers, their names, the payload hash.
/// Throws InvalidArgument for a header name or value holding a line break.
std::string canonical_request(const Request& request);

/// The credential scope "YYYYMMDD/REGION/SERVICE/aws4_request".
std::string scope(std::string_view amz_date, std::string_view region, std::string_view service);

/// "AWS4-HMAC-SHA256", the request time, the scope and the hex SHA-256 of
/// the canonical request, one per line.
std::string string_to_sign(std::string_view amz_date, std::string_view scope, std::string_view canonical_request);

/// HMAC chain from "AWS4" + secret over the date, region, service and
/// "aws4_request".
std::array<unsigned char, 32> signing_key(std::string_view secret_key, std::string_view date, std::string_view region,
                                          std::string_view service);

/// Hex HMAC-SHA256 of `text` under `key`.
std::string hex_hmac(const std::array<unsigned char, 32>& key, std::string_view text);

/// The value of the Authorization header for `request` sent at `amz_date`
/// ("YYYYMMDDTHHMMSSZ", the request's x-amz-date).
std::string authorization(const Request& request, const Credentials& credentials, std::string_view amz_date,
                          std::string_view region, std::string_view service = "s3");

}  // namespace amphora::detail::sigv4
