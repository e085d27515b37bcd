// S3's listings as an untrusted server sends them: a ListObjectsV2 page read
// as a medium's listing, a ListMultipartUploads page as unfinished uploads.
// Input: a mode byte (bit 0: uploads), a limit byte, then the medium's base,
// the listed prefix and the cursor, each ended by a NUL, then the document.
// Whatever the bytes, the reader returns or throws CorruptData; what it
// returns keeps the listing's promises: sorted distinct keys after the
// cursor, at most the limit, every usable key a valid storage key under the
// prefix without control characters, every message printable.

#include "s3_listing.hpp"

#include <amphora/error.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void finding(const char* what) {
  __builtin_fprintf(stderr, "fuzz_s3_listing: %s\n", what);
  __builtin_trap();
}

bool next_field(std::string_view& rest, std::string& out) {
  auto end = rest.find('\0');
  if (end == std::string_view::npos) return false;
  out = std::string(rest.substr(0, end));
  rest.remove_prefix(end + 1);
  return true;
}

bool printable_text(const std::string& text) {
  for (unsigned char c : text)
    if (c < 0x20 || c >= 0x7f) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace amphora;
  if (size < 2) return 0;
  const bool uploads = data[0] & 1;
  const std::size_t limit = data[1];
  std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  std::string base, prefix, after;
  if (!next_field(rest, base) || !next_field(rest, prefix) || !next_field(rest, after)) return 0;
  if (!base.empty() && !base.ends_with('/')) base += '/';

  if (uploads) {
    detail::s3::UploadPage page;
    try {
      page = detail::s3::read_uploads(rest, base, after, "", "s3://fuzz");
    } catch (const CorruptData& e) {
      if (!printable_text(e.what())) finding("a message holds unprintable bytes");
      return 0;
    }
    for (const auto& u : page.uploads)
      if (u.key.empty() || u.id.empty()) finding("an upload without a key or id");
    if (page.truncated && page.next_key_marker.empty()) finding("a truncated page without a marker");
    return 0;
  }

  if (!prefix.empty()) {
    try {
      check_storage_key(prefix, true);
    } catch (const InvalidArgument&) {
      return 0;  // the medium refuses such a prefix before asking
    }
  }
  ListPage page;
  try {
    page = detail::s3::read_listing(rest, base, prefix, after, limit, "s3://fuzz");
  } catch (const CorruptData& e) {
    if (!printable_text(e.what())) finding("a message holds unprintable bytes");
    return 0;
  }
  if (page.entries.size() > std::max<std::size_t>(limit, 1)) finding("more entries than the limit");
  if (page.truncated && page.entries.empty()) finding("a truncated page without entries");
  for (std::size_t k = 0; k < page.entries.size(); ++k) {
    const auto& e = page.entries[k];
    if (k > 0 && !(page.entries[k - 1].key < e.key)) finding("keys not sorted and distinct");
    if (!after.empty() && !(e.key > after)) finding("a key at or before the cursor");
    if (e.kind == ListedEntry::Kind::irregular) {
      if (e.what.empty() || !printable_text(e.what)) finding("an irregular entry without a printable reason");
      continue;
    }
    if (!e.key.starts_with(prefix)) finding("a key outside the prefix");
    for (unsigned char c : e.key)
      if (c < 0x20 || c == 0x7f) finding("a usable key with a control character");
    try {
      check_storage_key(e.key, e.kind == ListedEntry::Kind::folder);
    } catch (const InvalidArgument&) {
      finding("a usable key that is not a valid storage key");
    }
    if (e.kind == ListedEntry::Kind::folder && !e.key.ends_with('/')) finding("a folder not ending with '/'");
  }
  return 0;
}
