#include <amphora/json.hpp>
#include <amphora/error.hpp>
#include <amphora/manifest.hpp>

#include "json_text.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <string>

namespace amphora {

namespace {

constexpr std::size_t kMaxFiles = 1u << 20;
constexpr std::uint64_t kSmallestPiece = 4096;
constexpr std::uint64_t kLargestPiece = 1ull << 40;

[[noreturn]] void corrupt(std::string_view where, const std::string& what) {
  throw CorruptData(std::string(where) + ": manifest.json " + what);
}

const nlohmann::json& field(const nlohmann::json& object, const char* key, std::string_view where,
                            std::string_view context) {
  auto it = object.find(key);
  if (it == object.end()) corrupt(where, std::string(context) + " has no \"" + key + "\"");
  return *it;
}

std::uint64_t unsigned_field(const nlohmann::json& object, const char* key, std::string_view where,
                             std::string_view context) {
  const auto& v = field(object, key, where, context);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    corrupt(where, std::string(context) + " \"" + key + "\" is not a non-negative integer");
  return v.get<std::uint64_t>();
}

void expect_keys(const nlohmann::json& object, std::initializer_list<const char*> keys, std::string_view where,
                 std::string_view context) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; }))
      corrupt(where, std::string(context) + " has unknown field \"" + it.key() + "\"");
  }
}

}  // namespace


std::uint64_t Manifest::piece_size_for(std::uint64_t size, std::uint64_t min_piece_size) {
  if (size > kSplitAbove && size <= min_piece_size) return std::bit_ceil((size + kSmallFilePieces - 1) / kSmallFilePieces);
  std::uint64_t piece = min_piece_size;
  while (piece < kLargestPiece && piece_count(size, piece) > kMaxPieces) piece *= 2;
  return piece;
}

std::uint64_t piece_count(std::uint64_t size, std::uint64_t piece_size) {
  return size == 0 ? 1 : (size - 1) / piece_size + 1;
}

std::string artifact_path_problem(std::string_view path) {
  if (path.empty()) return "empty";
  if (path.size() > 1024) return "longer than 1024 characters";
  if (path.front() == '/') return "absolute";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    auto part = path.substr(start, end - start);
    if (part.empty()) return "empty component";
    if (part == "." || part == "..") return "'" + std::string(part) + "' component";
    if (part.front() == '.') return "hidden component";
    for (unsigned char c : part)
      if (c < 0x20 || c == 0x7f || c == '\\') return "control character or backslash";
    start = end + 1;
  }
  if (path == "manifest.json") return "reserved name";
  return {};
}

void validate_artifact_path(std::string_view path, std::string_view where) {
  auto problem = artifact_path_problem(path);
  if (!problem.empty())
    throw CorruptData(std::string(where) + ": unsafe payload path '" + std::string(path) + "': " + problem);
}


// Written field by field, keys in byte order as canonical_json sorts them,
// rather than through a JSON document: a wide table's manifest has an entry
// per column file, and building, walking and freeing a document of them (a
// map node per key, a copy of meta) cost several times the text itself.
// Version 1 has no "children" key, so a manifest read back re-serializes to
// the very bytes its digest was taken of. Fails as canonical_json of that
// document would: InvalidArgument naming the first string that is not
// UTF-8, or meta's first value JSON cannot hold, with its key path.
std::string Manifest::canonical() const {
  std::string text;
  text.reserve(128 + files.size() * 160 + children.size() * 120);
  auto put_string = [&text](std::string_view s, auto&& path) {
    if (!is_valid_utf8(s)) throw InvalidArgument("manifest at " + path() + " holds a string that is not valid UTF-8");
    append_json_string(text, s);
  };
  auto put_number = [&text](auto n) {
    char digits[24];
    text.append(digits, std::to_chars(digits, digits + sizeof digits, n).ptr);
  };
  text += '{';
  if (manifest_version >= 2) {
    text += "\"children\":[";
    for (std::size_t i = 0; i < children.size(); ++i) {
      text += i ? ",{\"digest\":\"" : "{\"digest\":\"";
      text += children[i].digest.str();
      text += "\",\"role\":";
      put_string(children[i].role, [i] { return ".children[" + std::to_string(i) + "].role"; });
      text += '}';
    }
    text += "],";
  }
  text += "\"files\":[";
  for (std::size_t i = 0; i < files.size(); ++i) {
    const FileEntry& f = files[i];
    text += i ? ",{\"path\":" : "{\"path\":";
    put_string(f.path, [i] { return ".files[" + std::to_string(i) + "].path"; });
    text += ",\"piece_size\":";
    put_number(f.piece_size);
    text += ",\"sha256\":[";
    for (std::size_t k = 0; k < f.pieces.size(); ++k) {
      text += k ? ",\"" : "\"";
      text += f.pieces[k].hex();
      text += '"';
    }
    text += "],\"size\":";
    put_number(f.size);
    text += '}';
  }
  text += "],\"manifest_version\":";
  put_number(manifest_version);
  text += ",\"materializer\":{\"name\":";
  put_string(materializer, [] { return std::string(".materializer.name"); });
  text += ",\"version\":";
  put_number(materializer_version);
  text += "},\"meta\":";
  // canonical_json's bytes, without its depth limit: a manifest read back
  // from disk must re-serialize even if it nests as deep as a reader accepts.
  detail::append_canonical_member(text, meta, "manifest", "meta");
  text += '}';
  return text;
}

Digest Manifest::digest() const { return Digest(Sha256::of(canonical())); }

const ChildEntry* Manifest::find_child(std::string_view role) const {
  auto it = std::lower_bound(children.begin(), children.end(), role,
                             [](const ChildEntry& c, std::string_view r) { return c.role < r; });
  return it != children.end() && it->role == role ? &*it : nullptr;
}

const FileEntry* Manifest::find(std::string_view path) const {
  auto it = std::lower_bound(files.begin(), files.end(), path,
                             [](const FileEntry& f, std::string_view p) { return f.path < p; });
  return it != files.end() && it->path == path ? &*it : nullptr;
}

std::uint64_t Manifest::payload_bytes() const {
  std::uint64_t total = 0;
  for (const auto& f : files) total += f.size;
  return total;
}

Manifest Manifest::parse(std::string_view bytes, std::string_view where) {
  nlohmann::json doc;
  try {
    doc = parse_untrusted_json(bytes);
  } catch (const CorruptData& e) {
    corrupt(where, std::string("is not valid JSON (") + e.what() + ")");
  }
  if (!doc.is_object()) corrupt(where, "is not a JSON object");
  const auto& version = field(doc, "manifest_version", where, "manifest");
  if (!version.is_number_integer()) corrupt(where, "\"manifest_version\" is not an integer");
  if (version.is_number_unsigned() && version.get<std::uint64_t>() > kFormatVersion)
    throw Unsupported(std::string(where) + ": manifest version " + version.dump() +
                      " was written by a newer Amphora; this build reads versions " +
                      std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion));
  if (!version.is_number_unsigned() || version.get<std::uint64_t>() < kOldestFormatVersion)
    corrupt(where, "has invalid manifest_version " + version.dump());
  const int manifest_version = version.get<int>();
  if (manifest_version >= 2)
    expect_keys(doc, {"manifest_version", "materializer", "files", "meta", "children"}, where, "manifest");
  else
    expect_keys(doc, {"manifest_version", "materializer", "files", "meta"}, where, "manifest");

  Manifest m;
  m.manifest_version = manifest_version;
  const auto& mat = field(doc, "materializer", where, "manifest");
  if (!mat.is_object()) corrupt(where, "\"materializer\" is not an object");
  expect_keys(mat, {"name", "version"}, where, "materializer");
  const auto& mat_name = field(mat, "name", where, "materializer");
  if (!mat_name.is_string() || mat_name.get_ref<const std::string&>().empty())
    corrupt(where, "materializer name is not a non-empty string");
  m.materializer = mat_name.get<std::string>();
  auto mat_version = unsigned_field(mat, "version", where, "materializer");
  if (mat_version < 1 || mat_version > 1'000'000) corrupt(where, "materializer version is out of range");
  m.materializer_version = static_cast<int>(mat_version);


  const auto& meta = field(doc, "meta", where, "manifest");
  if (!meta.is_object()) corrupt(where, "\"meta\" is not an object");
  m.meta = meta;

  const auto& files = field(doc, "files", where, "manifest");
  if (!files.is_array()) corrupt(where, "\"files\" is not an array");
  if (files.size() > kMaxFiles) corrupt(where, "lists more than " + std::to_string(kMaxFiles) + " files");
  for (const auto& f : files) {
    if (!f.is_object()) corrupt(where, "has a file entry that is not an object");
    expect_keys(f, {"path", "size", "piece_size", "sha256"}, where, "file entry");
    const auto& path = field(f, "path", where, "file entry");
    if (!path.is_string()) corrupt(where, "has a file path that is not a string");
    FileEntry entry;
    entry.path = path.get<std::string>();
    validate_artifact_path(entry.path, where);
    entry.size = unsigned_field(f, "size", where, "file '" + entry.path + "'");
    entry.piece_size = unsigned_field(f, "piece_size", where, "file '" + entry.path + "'");
    if (entry.piece_size < kSmallestPiece || entry.piece_size > kLargestPiece)
      corrupt(where, "file '" + entry.path + "' piece_size " + std::to_string(entry.piece_size) +
                         " is outside [4096, 2^40]");
    const auto& pieces = field(f, "sha256", where, "file '" + entry.path + "'");
    if (!pieces.is_array()) corrupt(where, "file '" + entry.path + "' sha256 is not an array");
    if (pieces.size() != piece_count(entry.size, entry.piece_size))
      corrupt(where, "file '" + entry.path + "' lists " + std::to_string(pieces.size()) + " piece digests, but " +
                         std::to_string(entry.size) + " bytes make " +
                         std::to_string(piece_count(entry.size, entry.piece_size)) + " pieces");
    entry.pieces.reserve(pieces.size());
    for (const auto& p : pieces) {
      if (!p.is_string()) corrupt(where, "file '" + entry.path + "' has a non-string digest");
      try {
        entry.pieces.push_back(Sha256Value::from_hex(p.get<std::string>()));
      } catch (const InvalidArgument& e) {
        corrupt(where, "file '" + entry.path + "': " + e.what());
      }
    }
    if (!m.files.empty() && !(m.files.back().path < entry.path))
      corrupt(where, "files are not sorted by path, or '" + entry.path + "' is listed twice");
    m.files.push_back(std::move(entry));
  }

  if (manifest_version >= 2) {
    const auto& children = field(doc, "children", where, "manifest");
    if (!children.is_array()) corrupt(where, "\"children\" is not an array");
    if (children.size() > kMaxFiles) corrupt(where, "lists more than " + std::to_string(kMaxFiles) + " children");
    for (const auto& c : children) {
      if (!c.is_object()) corrupt(where, "has a child entry that is not an object");
      expect_keys(c, {"role", "digest"}, where, "child entry");
      const auto& role = field(c, "role", where, "child entry");
      if (!role.is_string()) corrupt(where, "has a child role that is not a string");
      ChildEntry child;
      child.role = role.get<std::string>();
      if (auto problem = artifact_path_problem(child.role); !problem.empty())
        corrupt(where, "has an invalid child role '" + child.role + "': " + problem);
      const auto& digest = field(c, "digest", where, "child '" + child.role + "'");
      if (!digest.is_string() || !Digest::is_digest(digest.get<std::string>()))
        corrupt(where, "child '" + child.role + "' has no valid digest");
      child.digest = Digest::parse(digest.get<std::string>());
      if (!m.children.empty() && !(m.children.back().role < child.role))
        corrupt(where, "children are not sorted by role, or role '" + child.role + "' is listed twice");
      m.children.push_back(std::move(child));
    }
  }
  return m;
}

}  // namespace amphora
