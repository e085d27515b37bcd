// An S3-compatible bucket as a medium: each key is the object PREFIX/KEY.
// Conditional puts are If-None-Match / If-Match; listings are ListObjectsV2;
// files staged for a known folder are uploaded in place as they are written
// (in parts, several at once, for large ones), so a copy of a large artifact
// never holds more than the parts in flight.

#include <amphora/storage/s3.hpp>

#include <amphora/digest.hpp>
#include <amphora/error.hpp>

#include "builtin_schemes.hpp"
#include "credentials.hpp"
#include "http.hpp"
#include "s3_listing.hpp"
#include "sigv4.hpp"
#include "xml.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

namespace amphora {

namespace {

using detail::s3::has_control;
using detail::s3::printable;
using detail::s3::url_decode;

using detail::http::Response;
using detail::http::TransferFailed;

constexpr std::uint64_t kMiB = 1u << 20;
// Parts of a multipart upload: at least 8 MiB, and few enough that a file
// never needs more than S3's 10,000.
constexpr std::uint64_t kMinPart = 8 * kMiB;
constexpr std::uint64_t kMaxParts = 10000;
// A read larger than this is split into ranged GETs sent at once.
constexpr std::uint64_t kRangeChunk = 8 * kMiB;
// Largest listing, error or multipart answer read.
constexpr std::size_t kMaxDocument = 16u << 20;

std::uint64_t part_size_for(std::uint64_t size) {
  const std::uint64_t needed = (size + kMaxParts - 1) / kMaxParts;
  return std::max(kMinPart, (needed + kMiB - 1) / kMiB * kMiB);
}

std::optional<std::string> environment(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

std::string amz_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[17];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

std::chrono::system_clock::time_point from_time_t(std::time_t t) { return std::chrono::system_clock::from_time_t(t); }

// 128 random bits in hex, naming one conditional write.
std::string random_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int half = 0; half < 2; ++half)
    for (std::uint64_t v = rng(), k = 0; k < 16; ++k, v >>= 4) out += kHex[v & 15];
  return out;
}

std::string unquote(std::string tag) {
  if (tag.size() >= 2 && tag.front() == '"' && tag.back() == '"') tag = tag.substr(1, tag.size() - 2);
  return tag;
}

bool valid_bucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  if (!std::isalnum(static_cast<unsigned char>(bucket.front())) || !std::isalnum(static_cast<unsigned char>(bucket.back())))
    return false;
  return std::all_of(bucket.begin(), bucket.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
         }) &&
         bucket.find("..") == std::string_view::npos;
}

struct ParsedUrl {
  std::string bucket;
  std::string prefix;  // without a trailing '/'; empty for the bucket's root
  std::map<std::string, std::string> query;
};

ParsedUrl parse_url(std::string_view url) {
  if (!url.starts_with("s3://"))
    throw InvalidArgument("'" + printable(url) + "' is not an S3 URL: write s3://BUCKET/PREFIX");
  std::string_view rest = url.substr(5);
  ParsedUrl out;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      auto amp = query.find('&');
      std::string_view item = query.substr(0, amp);
      auto eq = item.find('=');
      auto name = url_decode(item.substr(0, eq));
      auto value = url_decode(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
      if (!name || !value || name->empty())
        throw InvalidArgument("malformed query '" + printable(item) + "' in S3 URL '" + printable(url) + "'");
      out.query[*name] = *value;
      if (amp == std::string_view::npos) break;
      query = query.substr(amp + 1);
    }
  }
  auto slash = rest.find('/');
  out.bucket = std::string(rest.substr(0, slash));
  if (!valid_bucket(out.bucket))
    throw InvalidArgument("invalid bucket name '" + printable(out.bucket) + "' in '" + printable(url) +
                          "': 3-63 lower-case letters, digits, '.' and '-', starting and ending with a letter or digit");
  if (slash != std::string_view::npos) {
    std::string_view prefix = rest.substr(slash + 1);
    while (prefix.ends_with('/')) prefix.remove_suffix(1);
    if (!prefix.empty()) {
      try {
        check_storage_key(prefix);
      } catch (const InvalidArgument&) {
        throw InvalidArgument("invalid key prefix '" + printable(prefix) + "' in '" + printable(url) +
                              "': no empty, '.' or '..' component");
      }
      if (has_control(prefix)) throw InvalidArgument("the key prefix in '" + printable(url) + "' holds a control character");
    }
    out.prefix = std::string(prefix);
  }
  return out;
}

struct Endpoint {
  std::string scheme;     // http or https
  std::string authority;  // host[:port], as the Host header and the signature have it
};

Endpoint parse_endpoint(const std::string& url) {
  Endpoint e;
  auto sep = url.find("://");
  e.scheme = sep == std::string::npos ? "" : url.substr(0, sep);
  if (e.scheme != "http" && e.scheme != "https")
    throw InvalidArgument("an S3 endpoint must start with http:// or https://");
  std::string rest = url.substr(sep + 3);
  while (rest.ends_with('/')) rest.pop_back();
  // Not repeated in the message: an endpoint with user information could hold a secret.
  if (rest.empty() || rest.find_first_of("/?#@ ") != std::string::npos || has_control(rest))
    throw InvalidArgument("an S3 endpoint must be http(s)://HOST[:PORT], without user information, a path or a query");
  e.authority = rest;
  return e;
}

bool parse_bool(const std::string& text, const std::string& what) {
  if (text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no") return false;
  throw InvalidArgument(what + " must be true or false, not '" + printable(text) + "'");
}

// At most N requests in flight.
class Slots {
 public:
  explicit Slots(std::size_t n) : free_(std::max<std::size_t>(1, n)) {}
  void acquire() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      std::lock_guard lock(mutex_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t free_;
};

class S3Medium;

// One request to send, perhaps several times.
struct Call {
  std::string method = "GET";
  std::string key{};  // the medium's key (for messages), empty for the bucket
  std::vector<std::pair<std::string, std::string>> query{};
  std::vector<std::pair<std::string, std::string>> headers{};
  std::string_view body{};
  std::optional<Sha256Value> body_sha256{};  // given by a caller that hashed the body already
  std::size_t max_body = kMaxDocument;
  detail::http::Sink sink{};
  std::function<void()> before_attempt{};  // resets what a sink gathered
  int attempts = 0;                        // how many times send() sent it
};

class S3File;
class S3Staging;

class S3Medium : public Medium, public std::enable_shared_from_this<S3Medium> {
 public:
  S3Medium(ParsedUrl url, S3Options options, detail::sigv4::Credentials credentials)
      : url_(std::move(url)),
        options_(std::move(options)),
        credentials_(std::move(credentials)),
        client_(detail::http::ClientOptions{options_.connect_timeout, options_.stall_timeout, 1,
                                            std::max<std::size_t>(16, options_.max_in_flight)}),
        slots_(options_.max_in_flight) {
    base_ = url_.prefix.empty() ? "" : url_.prefix + "/";
    location_ = "s3://" + url_.bucket + (url_.prefix.empty() ? "" : "/" + url_.prefix);
    if (options_.endpoint.empty()) {
      endpoint_ = {"https", "s3." + options_.region + ".amazonaws.com"};
      path_style_ = options_.path_style.value_or(false);
    } else {
      endpoint_ = parse_endpoint(options_.endpoint);
      path_style_ = options_.path_style.value_or(true);
    }
    if (!path_style_) endpoint_.authority = url_.bucket + "." + endpoint_.authority;
  }

  std::string location() const override { return location_; }

  std::optional<ObjectInfo> head(std::string_view key) override {
    auto answer = head_answer(key);
    if (!answer) return std::nullopt;
    return info_of(answer->first, answer->second);
  }

  // The HEAD request and its answer, or nullopt when there is no object.
  std::optional<std::pair<Call, Response>> head_answer(std::string_view key) {
    check_storage_key(key);
    Call call{.method = "HEAD", .key = std::string(key)};
    auto r = send(call);
    if (r.status == 404) return std::nullopt;
    if (r.status != 200) fail(call, r);
    return std::make_pair(std::move(call), std::move(r));
  }

  std::string get(std::string_view key, std::size_t max_bytes) override {
    check_storage_key(key);
    Call call{.key = std::string(key), .max_body = max_bytes};
    Response r;
    try {
      r = send(call);
    } catch (const TransferFailed&) {
      throw CorruptData(location_ + ": object '" + std::string(key) + "' is larger than " + std::to_string(max_bytes) +
                        " bytes");
    }
    if (r.status == 404) throw NotFound(location_ + ": no object '" + std::string(key) + "'");
    if (r.status != 200) fail(call, r);
    return std::move(r.body);
  }

  std::unique_ptr<RandomAccessFile> open(std::string_view key) override;
  std::unique_ptr<RandomAccessFile> open_sized(std::string_view key, std::uint64_t size) override;
  std::shared_ptr<const Buffer> map_sized(std::string_view key, std::uint64_t size) override;

  std::optional<ObjectInfo> put(std::string_view key, std::string_view bytes, const PutCondition& condition) override {
    check_storage_key(key);
    Call call{.method = "PUT", .key = std::string(key), .body = bytes};
    // A conditional write carries an id of its own, so that a write whose
    // answer was lost can be told from another writer's, even one of the
    // same bytes (a compare-and-swap counter's).
    const std::string write_id = condition.kind == PutCondition::Kind::always ? std::string() : random_id();
    if (!write_id.empty()) call.headers.emplace_back("x-amz-meta-amphora-write", write_id);
    if (condition.kind == PutCondition::Kind::if_absent) call.headers.emplace_back("if-none-match", "*");
    if (condition.kind == PutCondition::Kind::if_match) call.headers.emplace_back("if-match", unquote(condition.tag));  // last: see below
    for (int conflicts = 0;; ++conflicts) {
      auto r = send(call);
      if (r.status == 200) {
        ObjectInfo info;
        info.size = bytes.size();
        info.tag = unquote(r.header("etag").value_or(""));
        info.modified = std::chrono::system_clock::now();
        return info;
      }
      // AWS answers 409 to a conditional write racing another: try again
      // after a moment, and the condition decides.
      if (r.status == 409 && condition.kind != PutCondition::Kind::always && conflicts < 5) {
        std::this_thread::sleep_for(options_.retry_base * (conflicts + 1));
        continue;
      }
      // A condition that failed only on a second try may have failed on our
      // own first try, whose answer was lost: the object then carries our id.
      if (r.status == 412 && call.attempts > 1 && !write_id.empty()) {
        auto now = head_answer(key);
        if (now && now->second.header("x-amz-meta-amphora-write") == write_id) return info_of(now->first, now->second);
      }
      if (r.status == 412 && condition.kind == PutCondition::Kind::if_match && !call.headers.back().second.starts_with('"')) {
        // RGW matches an unquoted ETag, AWS documents a quoted one: the
        // object still having the tag means this server wants the quotes.
        auto now = head(key);
        if (now && now->tag == unquote(condition.tag)) {
          call.headers.back().second = "\"" + unquote(condition.tag) + "\"";
          continue;
        }
        return std::nullopt;
      }
      if (r.status == 412 && condition.kind != PutCondition::Kind::always) return std::nullopt;
      fail(call, r);
    }
  }

  bool remove(std::string_view key) override {
    check_storage_key(key);
    if (!head(key)) return false;
    Call call{.method = "DELETE", .key = std::string(key)};
    auto r = send(call);
    if (r.status != 204 && r.status != 200 && r.status != 404) fail(call, r);
    return r.status != 404;
  }

  ListPage list(std::string_view prefix, std::string_view start_after, bool shallow, std::size_t limit) override {
    if (!prefix.empty()) check_storage_key(prefix, true);
    limit = std::clamp<std::size_t>(limit, 1, kMaxListPage);
    Call call;
    call.query = {{"list-type", "2"}, {"prefix", base_ + std::string(prefix)}, {"max-keys", std::to_string(limit)},
                  {"encoding-type", "url"}};
    if (shallow) call.query.emplace_back("delimiter", "/");
    if (!start_after.empty()) {
      std::string after = base_ + std::string(start_after);
      // After a folder, skip every key inside it: S3 would roll them into
      // that folder again. U+10FFFF sorts after any character a key holds.
      if (after.ends_with('/')) after += "\xF4\x8F\xBF\xBF";
      call.query.emplace_back("start-after", after);
    }
    auto r = send(call);
    if (r.status != 200) fail(call, r);
    return detail::s3::read_listing(r.body, base_, prefix, start_after, limit, location_);
  }

  std::unique_ptr<Staging> begin_staging_at(std::string_view prefix) override;

  // The bucket's scratch space is its unfinished multipart uploads under the
  // prefix: a writer that died midway leaves one, invisible and billed.
  StagingSweep sweep_staging(bool dry_run, std::chrono::seconds grace) override {
    StagingSweep sweep;
    const auto now = std::chrono::system_clock::now();
    std::string key_marker, id_marker;
    for (int pages = 0; pages < 100000; ++pages) {
      Call call;
      call.query = {{"uploads", ""}, {"prefix", base_}, {"encoding-type", "url"}};
      if (!key_marker.empty()) call.query.emplace_back("key-marker", key_marker);
      if (!id_marker.empty()) call.query.emplace_back("upload-id-marker", id_marker);
      auto r = send(call);
      if (r.status != 200) fail(call, r);
      const auto page = detail::s3::read_uploads(r.body, base_, key_marker, id_marker, location_);
      for (const auto& upload : page.uploads) {
        if (now - upload.initiated < grace) {
          ++sweep.in_use;
          continue;
        }
        ++sweep.removed;
        if (dry_run) continue;
        Call abort{.method = "DELETE", .key = upload.key, .query = {{"uploadId", upload.id}}};
        auto answer = send(abort);
        if (answer.status != 204 && answer.status != 200 && answer.status != 404) fail(abort, answer);
      }
      if (!page.truncated) break;
      key_marker = page.next_key_marker;
      id_marker = page.next_upload_id_marker;
    }
    return sweep;
  }

  // Below: the requests themselves, for the staging area and files.

  // Sends `call` (signed afresh for each try) until it gets an answer that
  // is not worth trying again; throws RemoteError when no answer came.
  Response send(Call& call) {
    static thread_local std::mt19937_64 rng(std::random_device{}());
    for (int attempt = 1;; ++attempt) {
      call.attempts = attempt;
      if (call.before_attempt) call.before_attempt();
      detail::http::Request request = build(call);
      std::optional<Response> response;
      slots_.acquire();
      try {
        response = client_.send(request, call.max_body, call.sink);
        slots_.release();
      } catch (const TransferFailed& e) {
        slots_.release();
        if (e.aborted || e.oversized) throw;  // the caller says what it means
        if (!e.retryable || attempt >= options_.max_attempts)
          throw RemoteError(location_ + ": " + call.method + " " + describe(call) + " failed after " +
                                std::to_string(attempt) + (attempt == 1 ? " try" : " tries") + ": " + e.what(),
                            location_, call.key, 0, "");
      } catch (...) {
        slots_.release();
        throw;
      }
      if (response && ((response->status < 500 && response->status != 429) || attempt >= options_.max_attempts))
        return std::move(*response);
      // Full jitter: a random wait up to base * 2^attempt, capped.
      const auto cap = options_.retry_base * (1 << std::min(attempt, 5));
      std::uniform_int_distribution<long long> wait(0, std::max<long long>(1, cap.count()));
      std::this_thread::sleep_for(std::chrono::milliseconds(wait(rng)));
    }
  }

  // Sends `call`, which must be answered 200 with an XML document (`what`,
  // for messages); the document.
  detail::xml::Element answer_document(Call& call, const std::string& what) {
    auto r = send(call);
    if (r.status != 200) fail(call, r);
    try {
      return detail::xml::parse(r.body);
    } catch (const std::exception& e) {
      throw CorruptData(location_ + ": " + what + " is not readable: " + e.what());
    }
  }

  [[noreturn]] void fail(const Call& call, const Response& r) const {
    std::string code, message;
    if (!r.body.empty() && r.body.find('<') != std::string::npos) {
      try {
        auto doc = detail::xml::parse(r.body);
        if (doc.name == "Error") {
          code = printable(doc.text_of("Code"), 64);
          message = printable(doc.text_of("Message"));
        }
      } catch (const std::exception&) {
      }
    }
    std::string what = location_ + ": " + call.method + " " + describe(call) + " answered HTTP " +
                       std::to_string(r.status) + (code.empty() ? "" : " " + code) +
                       (message.empty() ? "" : ": " + message);
    if (r.status == 403 && code.empty()) what += " (access denied: check the credentials and the bucket's policy)";
    if (code == "NoSuchBucket") what += " (create the bucket first)";
    throw RemoteError(what, location_, call.key, r.status, code);
  }

  ObjectInfo info_of(const Call& call, const Response& r) const {
    ObjectInfo info;
    const auto length = r.header("content-length");
    char* end = nullptr;
    info.size = length ? std::strtoull(length->c_str(), &end, 10) : 0;
    if (!length || end == length->c_str() || *end || info.size > (std::uint64_t{1} << 50))
      throw CorruptData(location_ + ": " + call.method + " " + describe(call) + " gave no sensible size ('" +
                        printable(length.value_or("")) + "')");
    info.tag = unquote(r.header("etag").value_or(""));
    // A hostile date past 2200 would overflow a time_point in nanoseconds.
    auto date = [&](const char* header, std::chrono::system_clock::time_point& out) {
      if (auto text = r.header(header)) {
        const std::time_t t = curl_getdate(text->c_str(), nullptr);
        if (t > 0 && t < 7258118400) out = from_time_t(t);
      }
    };
    date("last-modified", info.modified);
    date("date", info.observed);
    return info;
  }

  const std::string& location_text() const { return location_; }

 private:
  friend class S3File;

  std::string describe(const Call& call) const {
    std::string what = call.key.empty() ? "of the bucket" : "'" + printable(call.key) + "'";
    for (const auto& [name, value] : call.query)
      if (name == "prefix") what = "listing '" + printable(value.substr(std::min(value.size(), base_.size()))) + "'";
    return what;
  }

  detail::http::Request build(const Call& call) const {
    std::string path = path_style_ ? "/" + url_.bucket : "";
    path += "/";
    if (!call.key.empty()) path += base_ + call.key;
    detail::sigv4::Request to_sign;
    to_sign.method = call.method;
    to_sign.path = path;
    to_sign.query = call.query;
    to_sign.payload_sha256 = (call.body_sha256 ? *call.body_sha256 : Sha256::of(call.body)).hex();
    const std::string date = amz_now();
    to_sign.headers = {{"host", endpoint_.authority},
                       {"x-amz-date", date},
                       {"x-amz-content-sha256", to_sign.payload_sha256}};
    if (!credentials_.session_token.empty()) to_sign.headers.emplace_back("x-amz-security-token", credentials_.session_token);
    for (const auto& h : call.headers) to_sign.headers.push_back(h);

    detail::http::Request request;
    request.method = call.method;
    request.body = call.body;
    request.url = endpoint_.scheme + "://" + endpoint_.authority + detail::sigv4::uri_encode(path, true);
    std::string query;
    for (const auto& [name, value] : call.query) {
      query += (query.empty() ? "?" : "&") + detail::sigv4::uri_encode(name, false) + "=" +
               detail::sigv4::uri_encode(value, false);
    }
    request.url += query;
    for (const auto& h : to_sign.headers)
      if (h.first != "host") request.headers.push_back(h);
    request.headers.emplace_back("authorization",
                                 detail::sigv4::authorization(to_sign, credentials_, date, options_.region));
    return request;
  }

  ParsedUrl url_;
  S3Options options_;
  detail::sigv4::Credentials credentials_;
  detail::http::Client client_;
  Slots slots_;
  std::string base_;
  std::string location_;
  Endpoint endpoint_;
  bool path_style_ = true;
};

// Positional reads as ranged GETs; a large read is split into ranges sent
// at once. Every answer must come from the version of the object opened.
class S3File : public RandomAccessFile {
 public:
  // `info` as a HEAD answered it, or (`listed`) only the size a manifest
  // gives, which each read then checks against the server's Content-Range.
  S3File(std::shared_ptr<S3Medium> medium, std::string key, ObjectInfo info, bool listed = false)
      : medium_(std::move(medium)), key_(std::move(key)), info_(std::move(info)), listed_(listed) {}
  std::uint64_t size() const override { return info_.size; }

  void read_at(std::uint64_t offset, std::size_t size, std::byte* dst) const override {
    if (size == 0) return;
    if (offset > info_.size || size > info_.size - offset)
      throw CorruptData(medium_->location_text() + ": '" + key_ + "' holds " + std::to_string(info_.size) +
                        " bytes, fewer than the " + std::to_string(size) + " asked for at offset " + std::to_string(offset));
    const std::uint64_t ranges = (size + kRangeChunk - 1) / kRangeChunk;
    if (ranges == 1) return read_range(offset, size, dst);
    std::atomic<std::uint64_t> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto worker = [&] {
      for (std::uint64_t k; (k = next.fetch_add(1)) < ranges;) {
        const std::uint64_t begin = k * kRangeChunk;
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kRangeChunk, size - begin));
        try {
          read_range(offset + begin, n, dst + begin);
        } catch (...) {
          std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
          next = ranges;
        }
      }
    };
    {
      std::vector<std::jthread> threads;  // joined however this block is left
      const std::size_t width = std::min<std::uint64_t>(ranges, 8);
      try {
        for (std::size_t t = 1; t < width; ++t) threads.emplace_back(worker);
      } catch (const std::system_error&) {
        // No more threads to be had: the ones started, and this one, do it all.
      }
      worker();
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  void read_range(std::uint64_t offset, std::size_t size, std::byte* dst) const {
    std::size_t got = 0;
    Call call{.key = key_};
    call.headers = {{"range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + size - 1)}};
    call.before_attempt = [&] { got = 0; };
    call.sink = [&](const char* data, std::size_t n) {
      if (n > size - got) return false;
      std::memcpy(dst + got, data, n);
      got += n;
      return true;
    };
    Response r;
    try {
      r = medium_->send(call);
    } catch (const TransferFailed&) {
      throw CorruptData(medium_->location_text() + ": '" + key_ + "' sent more than the " + std::to_string(size) +
                        " bytes asked for at offset " + std::to_string(offset));
    }
    if (r.status == 404) throw NotFound(medium_->location_text() + ": object '" + key_ + "' is gone");
    if (listed_ && (r.status == 416 || (r.status == 206 && total_of(r) != info_.size)))
      throw CorruptData(medium_->location_text() + ": '" + key_ + "' is not the " + std::to_string(info_.size) +
                        " bytes listed (" + (r.status == 416 ? "it is shorter" : "it is " + std::to_string(*total_of(r))) + ")");
    if (r.status == 412 || r.status == 416 ||
        ((r.status == 206 || r.status == 200) && !info_.tag.empty() && unquote(r.header("etag").value_or(info_.tag)) != info_.tag))
      throw CorruptData(medium_->location_text() + ": object '" + key_ + "' was replaced while being read");
    if (r.status != 206 && !(r.status == 200 && offset == 0 && size == info_.size)) medium_->fail(call, r);
    if (got != size)
      throw CorruptData(medium_->location_text() + ": '" + key_ + "' ended after " + std::to_string(got) + " of the " +
                        std::to_string(size) + " bytes asked for at offset " + std::to_string(offset));
  }

  // The object's size as a 206's "Content-Range: bytes A-B/TOTAL" gives it.
  static std::optional<std::uint64_t> total_of(const Response& r) {
    const std::string range = r.header("content-range").value_or("");
    const auto slash = range.rfind('/');
    if (slash == std::string::npos) return std::nullopt;
    std::uint64_t total = 0;
    const char* end = range.data() + range.size();
    auto [at, error] = std::from_chars(range.data() + slash + 1, end, total);
    if (error != std::errc() || at != end) return std::nullopt;
    return total;
  }

  std::shared_ptr<S3Medium> medium_;
  std::string key_;
  ObjectInfo info_;
  bool listed_ = false;
};

std::unique_ptr<RandomAccessFile> S3Medium::open(std::string_view key) {
  auto info = head(key);
  if (!info) throw NotFound(location_ + ": no object '" + std::string(key) + "'");
  return std::make_unique<S3File>(shared_from_this(), std::string(key), *info);
}

std::unique_ptr<RandomAccessFile> S3Medium::open_sized(std::string_view key, std::uint64_t size) {
  check_storage_key(key);
  if (size == 0) return open(key);  // no read would ever find it missing
  return std::make_unique<S3File>(shared_from_this(), std::string(key), ObjectInfo{.size = size, .tag = {}, .modified = {}, .observed = {}}, true);
}

std::shared_ptr<const Buffer> S3Medium::map_sized(std::string_view key, std::uint64_t size) {
  auto file = open_sized(key, size);
  auto buffer = Buffer::allocate(static_cast<std::size_t>(size));
  file->read_at(0, static_cast<std::size_t>(size), buffer->mutable_data());
  return buffer;
}

// A file uploaded to its final key as it is written: in one PUT when it
// fits one part, else as a multipart upload whose parts go out as soon as
// they are filled (by whichever thread completes them). Writes may come in
// any order from several threads, for disjoint ranges.
class S3StagedFile : public StagedFile {
 public:
  S3StagedFile(std::shared_ptr<S3Medium> medium, std::string key) : medium_(std::move(medium)), key_(std::move(key)) {}
  ~S3StagedFile() override {
    if (!upload_id_.empty() && !completed_) {
      try {
        Call call{.method = "DELETE", .key = key_, .query = {{"uploadId", upload_id_}}};
        medium_->send(call);
      } catch (...) {  // an upload left behind is aborted by gc --remote
      }
    }
  }

  void reserve(std::uint64_t size) override {
    std::lock_guard lock(mutex_);
    if (part_size_ == 0) part_size_ = part_size_for(size);
  }

  std::uint64_t hashed_write_size() const override {
    std::lock_guard lock(mutex_);
    return part_size_;
  }

  void write_hashed_at(std::uint64_t offset, ConstBytes data, const Sha256Value& sha256) override {
    write(offset, data, &sha256);
  }

  void write_at(std::uint64_t offset, ConstBytes data) override { write(offset, data, nullptr); }

  void close() override {
    std::map<std::uint64_t, Part> rest;
    {
      std::lock_guard lock(mutex_);
      if (failed_) throw IoError(medium_->location_text() + ": '" + key_ + "' failed to upload; it cannot be closed");
      if (closed_) return;
      closed_ = true;
      failed_ = true;  // until the upload below completes
      rest = std::move(pending_);
    }
    const bool single = upload_id_.empty() && rest.size() <= 1 && (rest.empty() || rest.begin()->first == 0);
    if (single) {
      const std::string bytes = rest.empty() ? std::string() : std::move(rest.begin()->second.bytes);
      if (!medium_->put(key_, bytes, {})) throw IoError(medium_->location_text() + ": '" + key_ + "' was not written");
      completed_ = true;
      failed_ = false;
      return;
    }
    for (auto& [index, part] : rest) {
      // Only the last part may be short; a hole means the file was not written whole.
      const std::uint64_t expected = std::min(part_size_, end_ - index * part_size_);
      if (part.filled != expected)
        throw InvalidArgument(medium_->location_text() + ": '" + key_ + "' was closed with bytes of part " +
                              std::to_string(index + 1) + " never written");
      upload_part(index, part.bytes);
    }
    complete();
    failed_ = false;
  }

 private:
  struct Part {
    std::string bytes;
    std::uint64_t filled = 0;
  };

  // `sha256`, when given, is that of all of `data`: of use when `data` is
  // one whole part.
  void write(std::uint64_t offset, ConstBytes data, const Sha256Value* sha256) {
    const std::size_t hashed_size = data.size();  // the bytes `sha256` is the hash of
    while (!data.empty()) {
      std::string full;
      std::uint64_t index;
      std::size_t n;
      bool whole_part = false;  // sent from `data` as it is: no copy, no fresh 8 MiB to fault in
      {
        std::lock_guard lock(mutex_);
        if (closed_) throw InvalidArgument("write to a closed staged file '" + key_ + "'");
        if (part_size_ == 0) part_size_ = kMinPart;
        index = offset / part_size_;
        const std::uint64_t in_part = offset % part_size_;
        n = static_cast<std::size_t>(std::min<std::uint64_t>(data.size(), part_size_ - in_part));
        if (index + 1 > kMaxParts)
          throw InvalidArgument(medium_->location_text() + ": '" + key_ + "' would need more than " +
                                std::to_string(kMaxParts) + " parts; reserve() its size first");
        end_ = std::max(end_, offset + n);
        whole_part = in_part == 0 && n == part_size_ && !pending_.contains(index);
        if (!whole_part) {
          auto& part = pending_[index];
          if (part.bytes.size() < in_part + n) part.bytes.resize(static_cast<std::size_t>(in_part + n));
          std::memcpy(part.bytes.data() + in_part, data.data(), n);
          part.filled += n;
          if (part.filled == part_size_) {
            full = std::move(part.bytes);
            pending_.erase(index);
          }
        }
      }
      if (whole_part)
        upload_part(index, std::string_view(reinterpret_cast<const char*>(data.data()), n),
                    sha256 && n == hashed_size ? std::optional(*sha256) : std::nullopt);
      if (!full.empty()) upload_part(index, full);
      offset += n;
      data = data.subspan(n);
    }
  }

  void start() {
    std::call_once(started_, [&] {
      Call call{.method = "POST", .key = key_, .query = {{"uploads", ""}}};
      const std::string id = medium_->answer_document(call, "the answer to starting an upload of '" + key_ + "'").text_of("UploadId");
      if (id.empty()) throw CorruptData(medium_->location_text() + ": starting an upload of '" + key_ + "' gave no upload id");
      upload_id_ = id;
    });
  }

  void upload_part(std::uint64_t index, std::string_view bytes, std::optional<Sha256Value> sha256 = std::nullopt) {
    start();
    Call call{.method = "PUT", .key = key_,
              .query = {{"partNumber", std::to_string(index + 1)}, {"uploadId", upload_id_}}, .body = bytes,
              .body_sha256 = sha256};
    auto r = medium_->send(call);
    if (r.status != 200) medium_->fail(call, r);
    auto etag = r.header("etag");
    if (!etag) throw CorruptData(medium_->location_text() + ": part " + std::to_string(index + 1) + " of '" + key_ + "' got no ETag");
    std::lock_guard lock(mutex_);
    etags_[index + 1] = *etag;
  }

  void complete() {
    std::string body = "<CompleteMultipartUpload>";
    for (const auto& [number, etag] : etags_)
      body += "<Part><PartNumber>" + std::to_string(number) + "</PartNumber><ETag>" + etag + "</ETag></Part>";
    body += "</CompleteMultipartUpload>";
    const std::uint64_t parts = (end_ + part_size_ - 1) / part_size_;
    if (etags_.size() != parts)
      throw InvalidArgument(medium_->location_text() + ": '" + key_ + "' was closed with " +
                            std::to_string(parts - etags_.size()) + " of its parts never written");
    Call call{.method = "POST", .key = key_, .query = {{"uploadId", upload_id_}}, .body = body};
    auto r = medium_->send(call);
    // S3 may answer 200 and put the error in the body.
    if (r.status == 200 && r.body.find("<Error>") == std::string::npos) {
      completed_ = true;
      return;
    }
    // A completion sent again after its answer was lost finds the upload
    // gone: the object is there if the first one went through.
    if (r.status == 404 && call.attempts > 1) {
      if (auto there = medium_->head(key_); there && there->size == end_) {
        completed_ = true;
        return;
      }
    }
    medium_->fail(call, r);
  }

  std::shared_ptr<S3Medium> medium_;
  std::string key_;
  mutable std::mutex mutex_;
  std::uint64_t part_size_ = 0;
  std::uint64_t end_ = 0;
  std::map<std::uint64_t, Part> pending_;
  std::map<std::uint64_t, std::string> etags_;
  std::once_flag started_;
  std::string upload_id_;
  bool closed_ = false;
  bool failed_ = false;
  bool completed_ = false;
};

// Files written in place under a folder known in advance; the marker,
// written last, publishes them. An unpublished area leaves its files for
// gc --remote to collect after its grace period: deleting them here could
// remove the files of another writer who published the same folder.
class S3Staging : public Staging {
 public:
  S3Staging(std::shared_ptr<S3Medium> medium, std::string prefix) : medium_(std::move(medium)), prefix_(std::move(prefix)) {}

  std::unique_ptr<StagedFile> create_file(std::string_view relpath) override {
    check_storage_key(relpath);
    std::lock_guard lock(mutex_);
    if (!paths_.insert(std::string(relpath)).second)
      throw InvalidArgument("staged file '" + std::string(relpath) + "' is created twice");
    return std::make_unique<S3StagedFile>(medium_, prefix_ + std::string(relpath));
  }

  bool publish(std::string_view prefix, std::string_view marker, std::string_view marker_bytes) override {
    check_prefix(prefix);
    return medium_->put(prefix_ + std::string(marker), marker_bytes, PutCondition::absent()).has_value();
  }

  void replace(std::string_view prefix, std::string_view marker, std::string_view marker_bytes) override {
    check_prefix(prefix);
    medium_->put(prefix_ + std::string(marker), marker_bytes, {});
  }

 private:
  void check_prefix(std::string_view prefix) const {
    if (prefix != prefix_)
      throw InvalidArgument("files staged for '" + prefix_ + "' cannot be published under '" + std::string(prefix) + "'");
  }

  std::shared_ptr<S3Medium> medium_;
  std::string prefix_;
  std::mutex mutex_;
  std::set<std::string> paths_;
};

std::unique_ptr<Staging> S3Medium::begin_staging_at(std::string_view prefix) {
  check_storage_key(prefix, true);
  if (!prefix.ends_with('/')) throw InvalidArgument("a staging folder ends with '/', not '" + std::string(prefix) + "'");
  return std::make_unique<S3Staging>(shared_from_this(), std::string(prefix));
}

S3Options resolve_options(const ParsedUrl& url, S3Options options) {
  for (const auto& [name, value] : url.query) {
    if (name == "endpoint") options.endpoint = value;
    else if (name == "region") options.region = value;
    else if (name == "path_style") options.path_style = parse_bool(value, "path_style");
    else if (name == "profile") options.profile = value;
    else
      throw InvalidArgument("unknown option '" + printable(name) +
                            "' in an S3 URL; known: endpoint, region, path_style, profile");
  }
  if (options.endpoint.empty()) options.endpoint = environment("AWS_ENDPOINT_URL_S3").value_or(environment("AWS_ENDPOINT_URL").value_or(""));
  if (options.region.empty()) options.region = environment("AWS_REGION").value_or(environment("AWS_DEFAULT_REGION").value_or("us-east-1"));
  if (options.region.empty() || options.region.size() > 64 ||
      !std::all_of(options.region.begin(), options.region.end(),
                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; }))
    throw InvalidArgument("invalid S3 region '" + printable(options.region) + "'");
  if (!options.endpoint.empty()) parse_endpoint(options.endpoint);
  // Knobs for slow links and for tests: how long a silent transfer may
  // stall, and how many tries a request gets.
  auto whole = [](const char* name, long least, long most) -> std::optional<long> {
    auto text = environment(name);
    if (!text) return std::nullopt;
    char* end = nullptr;
    const long value = std::strtol(text->c_str(), &end, 10);
    if (end == text->c_str() || *end || value < least || value > most)
      throw InvalidArgument("$" + std::string(name) + " must be a whole number from " + std::to_string(least) + " to " +
                            std::to_string(most) + ", not '" + printable(*text) + "'");
    return value;
  };
  if (auto seconds = whole("AMPHORA_S3_STALL_SECONDS", 1, 3600)) options.stall_timeout = std::chrono::seconds(*seconds);
  if (auto tries = whole("AMPHORA_S3_ATTEMPTS", 1, 100)) options.max_attempts = static_cast<int>(*tries);
  if (options.max_attempts < 1) options.max_attempts = 1;
  return options;
}

}  // namespace

void check_s3_url(std::string_view url) {
  if (url.find('?') != std::string_view::npos)
    throw InvalidArgument("'" + printable(url) + "': give the endpoint and region as options, not in the URL");
  parse_url(url);
}

void check_s3_endpoint(std::string_view endpoint) { parse_endpoint(std::string(endpoint)); }

std::shared_ptr<Medium> open_s3_medium(std::string_view url, const S3Options& options) {
  auto parsed = parse_url(url);
  auto resolved = resolve_options(parsed, options);
  auto credentials = detail::sigv4::find_credentials(detail::sigv4::process_environment(), resolved.profile);
  return std::make_shared<S3Medium>(std::move(parsed), std::move(resolved), std::move(credentials));
}

namespace detail {

void add_remote_schemes(const std::function<void(std::string, MediumFactory)>& add) {
  add("s3", [](const MediumRequest& request) { return open_s3_medium(request.uri); });
}

}  // namespace detail

}  // namespace amphora
