#pragma once
// What S3's listings say, read from their XML as untrusted input: the keys
// of a ListObjectsV2 page as a medium's listing, and the unfinished
// multipart uploads of a ListMultipartUploads page. Pure functions (the
// fuzz target fuzz_s3_listing drives them); internal to the framework.

#include <amphora/storage/medium.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace amphora::detail::s3 {

/// Text from a server, made safe to print: printable ASCII only (other
/// bytes as \xNN), at most `max` characters and "...".
std::string printable(std::string_view text, std::size_t max = 200);
/// A listing's key with encoding-type=url: percent-escapes, '+' for a
/// space; nullopt for a malformed escape.
std::optional<std::string> url_decode(std::string_view text);
/// Whether `text` holds a control character (below 0x20, or 0x7f).
bool has_control(std::string_view text);
/// "2024-05-01T12:34:56.000Z", as S3's listings give times; nullopt when
/// it does not read so.
std::optional<std::chrono::system_clock::time_point> parse_time(const std::string& text);

/// One ListObjectsV2 page for the medium whose keys live under `base`
/// ("PREFIX/" or empty), asked for keys under `prefix` after `start_after`,
/// at most `limit` of them. Keys are the medium's (without `base`), sorted
/// and distinct. A key that is outside `base + prefix`, malformed, not a
/// valid storage key or holding a control character is an irregular entry
/// (`what` says why, printably): never read or followed, yet kept in order
/// so that the next page starts after it. Throws CorruptData (naming
/// `location`) for a document that is not such a page, or that says more
/// follows but lists nothing.
ListPage read_listing(std::string_view document, std::string_view base, std::string_view prefix,
                      std::string_view start_after, std::size_t limit, std::string_view location);

/// One unfinished multipart upload under the medium's `base`.
struct Upload {
  std::string key;  ///< the medium's key (without `base`)
  std::string id;
  std::chrono::system_clock::time_point initiated;
};

/// One ListMultipartUploads page: the uploads under `base` (others, and
/// entries without a readable key, id or time, are left out) and, when
/// truncated, the markers of the next page.
struct UploadPage {
  std::vector<Upload> uploads;
  bool truncated = false;
  std::string next_key_marker;  ///< the bucket's key (decoded), for the next request's key-marker
  std::string next_upload_id_marker;
};
/// Throws CorruptData (naming `location`) for a document that is not such a
/// page, or one that is truncated without markers that advance past
/// `key_marker` / `upload_id_marker`.
UploadPage read_uploads(std::string_view document, std::string_view base, std::string_view key_marker,
                        std::string_view upload_id_marker, std::string_view location);

}  // namespace amphora::detail::s3
