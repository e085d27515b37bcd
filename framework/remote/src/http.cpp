#include "http.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>

namespace amphora::detail::http {

namespace {

constexpr std::size_t kMaxErrorBody = std::size_t{1} << 20;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw TransferFailed("libcurl failed to initialise", false, false);
  });
}

std::string trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return std::string(text);
}

// What one transfer needs in libcurl's callbacks.
struct Transfer {
  std::string_view body;
  std::size_t sent = 0;
  Response response;
  std::size_t max_body = 0;
  const Sink* sink = nullptr;
  bool too_large = false;
  bool sink_stopped = false;
  bool status_known = false;

  bool success() const { return response.status >= 200 && response.status < 300; }
};

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {  // a new response (after 100 Continue or a redirect): start over
    t.response.headers.clear();
    auto space = line.find(' ');
    t.response.status = space == std::string_view::npos ? 0 : std::strtol(std::string(line.substr(space + 1, 3)).c_str(), nullptr, 10);
    t.status_known = true;
    return size * count;
  }
  auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    t.response.headers.emplace_back(std::move(name), trim(line.substr(colon + 1)));
  }
  return size * count;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const std::size_t n = size * count;
  if (t.sink && *t.sink && t.success()) {
    if (!(*t.sink)(data, n)) {
      t.sink_stopped = true;
      return 0;
    }
    return n;
  }
  // Without a sink, or an error document: bounded, so a hostile server
  // cannot make us hold more than the caller allowed (an error document, at
  // most 1 MiB whatever the caller's bound).
  if (!t.success()) {
    // An error document: its start says what went wrong; the rest is dropped.
    if (t.response.body.size() < kMaxErrorBody)
      t.response.body.append(data, std::min(n, kMaxErrorBody - t.response.body.size()));
    return n;
  }
  if (t.response.body.size() + n > t.max_body) {
    t.too_large = true;
    return 0;
  }
  t.response.body.append(data, n);
  return n;
}

std::size_t on_read(char* dst, std::size_t size, std::size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const std::size_t n = std::min(size * count, t.body.size() - t.sent);
  std::memcpy(dst, t.body.data() + t.sent, n);
  t.sent += n;
  return n;
}

int on_seek(void* user, curl_off_t offset, int origin) {
  auto& t = *static_cast<Transfer*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<std::size_t>(offset) > t.body.size()) return CURL_SEEKFUNC_FAIL;
  t.sent = static_cast<std::size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

bool retryable(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::optional<std::string> Response::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (n == name) return v;
  return std::nullopt;
}

struct Client::Pool {
  std::mutex mutex;
  std::vector<CURL*> idle;
  ~Pool() {
    for (CURL* handle : idle) curl_easy_cleanup(handle);
  }
};

Client::Client(ClientOptions options) : options_(options), pool_(std::make_unique<Pool>()) { global_init(); }

Client::~Client() = default;

Response Client::send(const Request& request, std::size_t max_body, const Sink& sink) {
  CURL* handle = nullptr;
  {
    std::lock_guard lock(pool_->mutex);
    if (!pool_->idle.empty()) {
      handle = pool_->idle.back();
      pool_->idle.pop_back();
    }
  }
  if (!handle && !(handle = curl_easy_init())) throw TransferFailed("libcurl could not make a connection handle", true, false);
  // The handle goes back to the pool only after a complete exchange; one
  // whose transfer failed midway is closed, connection and all.
  bool reusable = false;
  struct Return {
    Pool& pool;
    CURL*& handle;
    bool& reusable;
    std::size_t max_idle;
    ~Return() {
      // The handle's options point at this call's stack (error buffer,
      // callbacks' data, header list): cleared before anything else runs.
      curl_easy_reset(handle);
      if (reusable) {
        std::lock_guard lock(pool.mutex);
        if (pool.idle.size() < max_idle) {
          pool.idle.push_back(handle);
          return;
        }
      }
      curl_easy_cleanup(handle);
    }
  } give_back{*pool_, handle, reusable, options_.max_idle};

  curl_easy_reset(handle);
  Transfer t;
  t.body = request.body;
  t.max_body = max_body;
  t.sink = &sink;
  char error[CURL_ERROR_SIZE] = {0};

  curl_slist* headers = nullptr;
  struct FreeHeaders {
    curl_slist*& list;
    ~FreeHeaders() { curl_slist_free_all(list); }
  } free_headers{headers};
  for (const auto& [name, value] : request.headers) {
    std::string line = name + ": " + value;
    if (value.empty()) line = name + ";";  // how libcurl sends a header with an empty value
    if (auto* grown = curl_slist_append(headers, line.c_str())) headers = grown;
    else throw TransferFailed("out of memory building request headers", false, false);
  }
  // No "Expect: 100-continue" round trip before a body: object stores
  // answer at once, and the wait would cost a second per request on some.
  headers = curl_slist_append(headers, "Expect:");

  curl_easy_setopt(handle, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, options_.stall_bytes);
  curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME,
                   std::max(1L, static_cast<long>((options_.stall_timeout.count() + 999) / 1000)));
  curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(handle, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);

  if (request.method == "HEAD") {
    curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT" || request.method == "POST") {
    curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(handle, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(handle, CURLOPT_READDATA, &t);
    curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(handle, CURLOPT_SEEKDATA, &t);
    curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    if (request.method == "POST") curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, "POST");
  } else if (request.method != "GET") {
    curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  const CURLcode code = curl_easy_perform(handle);
  if (code != CURLE_OK) {
    if (t.sink_stopped) throw TransferFailed(request.method + " " + request.url + ": stopped by the receiver", false, true);
    if (t.too_large)
      throw TransferFailed(request.method + " " + request.url + ": the response body exceeds " +
                               std::to_string(max_body) + " bytes",
                           false, false, true);
    std::string why = error[0] ? error : curl_easy_strerror(code);
    throw TransferFailed(request.method + " " + request.url + ": " + why, retryable(code), false);
  }
  long status = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  t.response.status = status;
  reusable = true;
  return std::move(t.response);
}

}  // namespace amphora::detail::http
