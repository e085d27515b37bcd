#include "s3_listing.hpp"

#include "xml.hpp"

#include <amphora/error.hpp>

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace amphora::detail::s3 {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool valid_key(const std::string& key, bool folder) {
  if (key.empty() || has_control(key)) return false;
  try {
    check_storage_key(key, folder);
    return true;
  } catch (const InvalidArgument&) {
    return false;
  }
}

xml::Element parse_page(std::string_view document, const char* root, const std::string& what,
                        std::string_view location) {
  xml::Element doc;
  try {
    doc = xml::parse(document);
  } catch (const std::exception& e) {
    throw CorruptData(std::string(location) + ": " + what + " is not readable: " + e.what());
  }
  if (doc.name != root)
    throw CorruptData(std::string(location) + ": " + what + " is a <" + printable(doc.name) + "> document, not a " +
                      root);
  return doc;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::optional<std::string> url_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (text[i] == '+') {
      out += ' ';
    } else {
      out += text[i];
    }
  }
  return out;
}

bool has_control(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

std::optional<std::chrono::system_clock::time_point> parse_time(const std::string& text) {
  std::tm t{};
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour, &t.tm_min,
                  &t.tm_sec) != 6)
    return std::nullopt;
  if (t.tm_mon < 1 || t.tm_mon > 12 || t.tm_mday < 1 || t.tm_mday > 31 || t.tm_hour > 23 || t.tm_min > 59 ||
      t.tm_sec > 60 || t.tm_year < 1970 || t.tm_year > 2200)  // beyond 2262 a time_point in ns overflows
    return std::nullopt;
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(timegm(&t));
}

ListPage read_listing(std::string_view document, std::string_view base, std::string_view prefix,
                      std::string_view start_after, std::size_t limit, std::string_view location) {
  const std::string what = "the listing of '" + printable(prefix) + "'";
  const auto doc = parse_page(document, "ListBucketResult", what, location);
  const std::string under = std::string(base) + std::string(prefix);
  ListPage page;
  // Keys come percent-encoded when the service honoured encoding-type=url.
  const bool encoded = doc.text_of("EncodingType") == "url";
  for (const auto& child : doc.children) {
    ListedEntry entry;
    std::string raw;
    if (child.name == "Contents") {
      raw = child.text_of("Key");
      entry.kind = ListedEntry::Kind::object;
    } else if (child.name == "CommonPrefixes") {
      raw = child.text_of("Prefix");
      entry.kind = ListedEntry::Kind::folder;
    } else {
      continue;
    }
    auto key = encoded ? url_decode(raw) : std::optional<std::string>(raw);
    if (!key || !key->starts_with(under)) {
      // Kept under its own (raw) key, so that pages still follow in order.
      entry = {raw, ListedEntry::Kind::irregular,
               "a listed key outside " + std::string(location) + "/" + printable(prefix) + " ('" + printable(raw) + "')"};
    } else {
      entry.key = key->substr(base.size());
      const bool folder = entry.kind == ListedEntry::Kind::folder;
      if (!valid_key(entry.key, folder) || folder != entry.key.ends_with('/')) {
        entry.what = "an object whose key is not a valid storage key ('" + printable(entry.key) + "')";
        entry.kind = ListedEntry::Kind::irregular;
      }
    }
    // Only what follows the cursor: every page makes progress.
    if (!start_after.empty() && entry.key <= start_after) continue;
    page.entries.push_back(std::move(entry));
  }
  std::sort(page.entries.begin(), page.entries.end(),
            [](const ListedEntry& a, const ListedEntry& b) { return a.key < b.key; });
  page.entries.erase(std::unique(page.entries.begin(), page.entries.end(),
                                 [](const ListedEntry& a, const ListedEntry& b) { return a.key == b.key; }),
                     page.entries.end());
  page.truncated = doc.text_of("IsTruncated") == "true";
  limit = std::max<std::size_t>(limit, 1);
  if (page.entries.size() > limit) {
    page.entries.resize(limit);
    page.truncated = true;
  }
  if (page.truncated && page.entries.empty())
    throw CorruptData(std::string(location) + ": " + what + " says more follows but lists nothing");
  return page;
}

UploadPage read_uploads(std::string_view document, std::string_view base, std::string_view key_marker,
                        std::string_view upload_id_marker, std::string_view location) {
  const auto doc = parse_page(document, "ListMultipartUploadsResult", "the list of unfinished uploads", location);
  const bool encoded = doc.text_of("EncodingType") == "url";
  auto decoded = [&](const std::string& text) { return encoded ? url_decode(text) : std::optional<std::string>(text); };
  UploadPage page;
  for (const auto& upload : doc.children) {
    if (upload.name != "Upload") continue;
    const auto key = decoded(upload.text_of("Key"));
    const std::string id = upload.text_of("UploadId");
    const auto initiated = parse_time(upload.text_of("Initiated"));
    if (!key || !key->starts_with(base) || key->size() == base.size() || id.empty() || !initiated) continue;
    page.uploads.push_back({key->substr(base.size()), id, *initiated});
  }
  page.truncated = doc.text_of("IsTruncated") == "true";
  if (page.truncated) {
    const auto next = decoded(doc.text_of("NextKeyMarker"));
    page.next_key_marker = next.value_or("");
    page.next_upload_id_marker = doc.text_of("NextUploadIdMarker");
    if (page.next_key_marker.empty() ||
        (page.next_key_marker == key_marker && page.next_upload_id_marker == upload_id_marker))
      throw CorruptData(std::string(location) + ": the list of unfinished uploads does not advance");
  }
  return page;
}

}  // namespace amphora::detail::s3
