#pragma once
// S3-compatible object stores (AWS S3, Ceph RGW, MinIO, Garage...) as a
// medium: a store, or a store's remote, in a bucket under a key prefix.
// Requests are signed with AWS Signature Version 4; credentials come from
// the standard places (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
// AWS_SESSION_TOKEN, else the shared credentials file's $AWS_PROFILE
// section) and are never written to a store, a log or a message.
// docs/FORMAT.md §13 gives the layout in the bucket.

#include <amphora/export.hpp>
#include <amphora/storage/medium.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

AMPHORA_API_BEGIN

namespace amphora {

/// How to reach an S3-compatible service. Every member has a default.
struct S3Options {
  /// "http://HOST:PORT" or "https://HOST[:PORT]" of a service that is not
  /// AWS; empty: $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS's
  /// endpoint for the region.
  std::string endpoint{};
  /// Empty: $AWS_REGION, else $AWS_DEFAULT_REGION, else "us-east-1".
  std::string region{};
  /// Bucket in the path (ENDPOINT/BUCKET/KEY) rather than in the host name
  /// (BUCKET.ENDPOINT/KEY). Default: path style with an endpoint of your
  /// own, as most services other than AWS need; host style on AWS.
  std::optional<bool> path_style{};
  /// The credentials file's section; empty: $AWS_PROFILE, else "default".
  std::string profile{};
  /// Requests in flight at once, over all threads.
  std::size_t max_in_flight = 8;
  /// Tries of one request before its error is reported: again after 5xx,
  /// 429, timeouts and cut connections, never after another 4xx.
  /// $AMPHORA_S3_ATTEMPTS overrides it.
  int max_attempts = 5;
  /// First wait before trying again; doubled each time (with full jitter),
  /// at most 32 times this.
  std::chrono::milliseconds retry_base{100};
  std::chrono::milliseconds connect_timeout{10000};
  /// A transfer that moves no byte for this long is cut (and tried again).
  /// $AMPHORA_S3_STALL_SECONDS overrides it.
  std::chrono::milliseconds stall_timeout{30000};
};

/// Opens the objects under "s3://BUCKET/PREFIX" as a medium (PREFIX may be
/// empty; keys are PREFIX/KEY). The URL may carry its options as a query,
/// "?endpoint=URL&region=R&path_style=true&profile=P", which take
/// precedence over `options`. Makes no request: a missing bucket or wrong
/// credentials show at the first use. Throws InvalidArgument for a
/// malformed URL, bucket, prefix or option, NotFound when no credentials
/// are found (saying where it looked).
std::shared_ptr<Medium> open_s3_medium(std::string_view url, const S3Options& options = {});

/// Throws InvalidArgument unless `url` is "s3://BUCKET[/PREFIX]" (without a
/// query) with a valid bucket name and prefix; for checking a remote's URL
/// before it is recorded.
void check_s3_url(std::string_view url);
/// Throws InvalidArgument unless `endpoint` is "http(s)://HOST[:PORT]"
/// (no user information, path or query), without repeating it.
void check_s3_endpoint(std::string_view endpoint);

}  // namespace amphora

AMPHORA_API_END
