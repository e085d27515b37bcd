#pragma once
// HTTP/1.1 requests on libcurl, for the object-store media: a pool of
// connections reused across requests, bodies sent from memory, responses
// received whole (bounded) or handed to a sink as they arrive. No retries
// here: the caller knows which requests may be sent again and signs each
// attempt afresh. Internal to the framework.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace amphora::detail::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method = "GET";   ///< GET, HEAD, PUT, POST, DELETE
  std::string url;              ///< already encoded
  Headers headers;              ///< sent as given
  std::string_view body;        ///< sent as is (PUT, POST); must outlive send()
};

struct Response {
  long status = 0;
  Headers headers;    ///< names lower-cased, values trimmed, in arrival order
  std::string body;   ///< unless a sink took it
  /// The first value of header `name` (lower-case), if any.
  std::optional<std::string> header(std::string_view name) const;
};

/// Receives the body of a successful (2xx) response in arrival order; a
/// false return aborts the transfer (the send then throws TransferFailed
/// with `aborted` set).
using Sink = std::function<bool(const char* data, std::size_t size)>;

/// A request that got no complete HTTP response: connection refused or cut,
/// a timeout, a stalled transfer, a sink that stopped it.
struct TransferFailed : std::runtime_error {
  TransferFailed(std::string what, bool retryable, bool aborted, bool oversized = false)
      : std::runtime_error(std::move(what)), retryable(retryable), aborted(aborted), oversized(oversized) {}
  bool retryable;  ///< the same request may succeed if sent again (timeouts, resets)
  bool aborted;    ///< the sink stopped the transfer
  bool oversized;  ///< the body exceeded the size the caller allowed
};

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{10000};
  /// A transfer moving fewer than `stall_bytes` per second for this long is
  /// cut (a stalled server), and retryable.
  std::chrono::milliseconds stall_timeout{30000};
  long stall_bytes = 1;
  /// Connections kept open for reuse.
  std::size_t max_idle = 16;
};

/// Thread-safe: each send() takes a connection from the pool (or opens
/// one) and gives it back.
class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Sends `request` and waits for the whole response. A body larger than
  /// `max_body` (without a sink) fails the transfer. Throws TransferFailed
  /// when there is no complete response; any HTTP status is a response.
  /// With a sink, only 2xx bodies go to it; others land in Response::body.
  Response send(const Request& request, std::size_t max_body, const Sink& sink = {});

 private:
  struct Pool;
  ClientOptions options_;
  std::unique_ptr<Pool> pool_;
};

}  // namespace amphora::detail::http
