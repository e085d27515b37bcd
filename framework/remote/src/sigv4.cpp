#include "sigv4.hpp"

#include <amphora/digest.hpp>
#include <amphora/error.hpp>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <map>

namespace amphora::detail::sigv4 {

namespace {

constexpr char kHexUpper[] = "0123456789ABCDEF";
constexpr char kHexLower[] = "0123456789abcdef";

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Leading and trailing spaces dropped, runs of spaces inside made one.
std::string trimmed(std::string_view value) {
  std::string out;
  bool space = false;
  for (char c : value) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string sha256_hex(std::string_view text) {
  Sha256 hash;
  hash.update(text.data(), text.size());
  return hash.finish().hex();
}

std::array<unsigned char, 32> hmac(std::string_view key, std::string_view text) {
  std::array<unsigned char, 32> out{};
  unsigned int size = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(text.data()),
            text.size(), out.data(), &size) ||
      size != out.size())
    throw OutOfResources("HMAC-SHA256 failed in libcrypto");
  return out;
}

std::string_view as_text(const std::array<unsigned char, 32>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Lower-cased, trimmed names (sorted by the map) to trimmed values.
std::map<std::string, std::string> canonical_headers(const Request& request) {
  std::map<std::string, std::string> headers;
  for (const auto& [name, value] : request.headers) {
    if (name.find_first_of("\r\n") != std::string::npos || value.find_first_of("\r\n") != std::string::npos)
      throw InvalidArgument("an HTTP header to sign holds a line break: '" + lower(name) + "'");
    auto& joined = headers[lower(trimmed(name))];
    joined += (joined.empty() ? "" : ",") + trimmed(value);
  }
  return headers;
}

// "name1;name2": the signed headers, lower case, sorted.
std::string signed_header_names(const std::map<std::string, std::string>& headers) {
  std::string names;
  for (const auto& [name, value] : headers) names += (names.empty() ? "" : ";") + name;
  return names;
}

}  // namespace

std::string uri_encode(std::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHexUpper[c >> 4];
      out += kHexUpper[c & 15];
    }
  }
  return out;
}

std::string canonical_request(const Request& request) {
  std::vector<std::pair<std::string, std::string>> query;
  for (const auto& [name, value] : request.query) query.emplace_back(uri_encode(name, false), uri_encode(value, false));
  std::sort(query.begin(), query.end());
  std::string query_text;
  for (const auto& [name, value] : query) query_text += (query_text.empty() ? "" : "&") + name + "=" + value;

  const auto headers = canonical_headers(request);
  std::string header_text;
  for (const auto& [name, value] : headers) header_text += name + ":" + value + "\n";

  return request.method + "\n" + uri_encode(request.path.empty() ? "/" : request.path, true) + "\n" + query_text + "\n" +
         header_text + "\n" + signed_header_names(headers) + "\n" + request.payload_sha256;
}

std::string scope(std::string_view amz_date, std::string_view region, std::string_view service) {
  return std::string(amz_date.substr(0, 8)) + "/" + std::string(region) + "/" + std::string(service) + "/aws4_request";
}

std::string string_to_sign(std::string_view amz_date, std::string_view scope, std::string_view canonical_request) {
  return "AWS4-HMAC-SHA256\n" + std::string(amz_date) + "\n" + std::string(scope) + "\n" + sha256_hex(canonical_request);
}

std::array<unsigned char, 32> signing_key(std::string_view secret_key, std::string_view date, std::string_view region,
                                          std::string_view service) {
  const auto day = hmac("AWS4" + std::string(secret_key), date.substr(0, 8));
  const auto in_region = hmac(as_text(day), region);
  const auto in_service = hmac(as_text(in_region), service);
  return hmac(as_text(in_service), "aws4_request");
}

std::string hex_hmac(const std::array<unsigned char, 32>& key, std::string_view text) {
  const auto mac = hmac(as_text(key), text);
  std::string out;
  for (unsigned char c : mac) {
    out += kHexLower[c >> 4];
    out += kHexLower[c & 15];
  }
  return out;
}

std::string authorization(const Request& request, const Credentials& credentials, std::string_view amz_date,
                          std::string_view region, std::string_view service) {
  if (amz_date.size() != 16 || amz_date[8] != 'T' || amz_date[15] != 'Z')
    throw InvalidArgument("a request time must read YYYYMMDDTHHMMSSZ, not '" + std::string(amz_date) + "'");
  const std::string credential_scope = scope(amz_date, region, service);
  const std::string to_sign = string_to_sign(amz_date, credential_scope, canonical_request(request));
  const std::string signature = hex_hmac(signing_key(credentials.secret_key, amz_date, region, service), to_sign);
  return "AWS4-HMAC-SHA256 Credential=" + credentials.access_key + "/" + credential_scope +
         ", SignedHeaders=" + signed_header_names(canonical_headers(request)) + ", Signature=" + signature;
}

}  // namespace amphora::detail::sigv4
