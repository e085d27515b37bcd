#include "store_areas.hpp"

#include "json_text.hpp"

#include <amphora/json.hpp>

#include <algorithm>
#include <charconv>
#include <limits>

namespace amphora::detail {

namespace {

constexpr std::size_t kMaxTombstoneBytes = 1u << 16;
constexpr std::string_view kObjects = "objects/sha256/";
constexpr std::string_view kClaims = "claims/";

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// What follows `prefix` in `key`, without a folder's trailing '/'.
std::string_view tail(std::string_view key, std::size_t prefix) {
  key.remove_prefix(prefix);
  if (key.ends_with('/')) key.remove_suffix(1);
  return key;
}

std::string shown(const Medium& medium, std::string_view key) { return medium.location() + "/" + std::string(key); }

bool valid_record_stem(std::string_view s) {
  auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
  };
  return !s.empty() && s.size() <= 128 && s.front() != '.' && std::all_of(s.begin(), s.end(), ok);
}

// Serialized as docs/FORMAT.md gives it, refused when over `max_bytes`.
std::string record_text(const nlohmann::json& record, int indent, std::size_t max_bytes, const char* what,
                        const std::string& where) {
  std::string text;
  detail::append_json_text(text, record, indent, std::string(what) + " " + where);
  text += '\n';
  if (text.size() > max_bytes)
    throw InvalidArgument(std::string(what) + " " + where + " would be " + std::to_string(text.size()) +
                          " bytes, more than the " + std::to_string(max_bytes) + " a store accepts");
  return text;
}

}  // namespace

nlohmann::json read_record(Medium& medium, const std::string& key, std::size_t max_bytes, const char* what) {
  std::string text;
  try {
    text = medium.get(key, max_bytes);
  } catch (const CorruptData& e) {
    throw CorruptData(std::string(what) + " " + e.what());
  }
  return parse_record(text, medium, key, what);
}

nlohmann::json parse_record(const std::string& text, Medium& medium, const std::string& key, const char* what) {
  try {
    auto doc = parse_untrusted_json(text);
    if (doc.is_object()) return doc;
  } catch (const CorruptData& e) {
    throw CorruptData(std::string(what) + " " + shown(medium, key) + " is not valid JSON: " + e.what());
  }
  throw CorruptData(std::string(what) + " " + shown(medium, key) + " is not a JSON object");
}

// ---------------------------------------------------------------- artifacts

std::string ArtifactArea::prefix(const Digest& digest) {
  auto hex = digest.hex();
  return std::string(kObjects) + hex.substr(0, 2) + "/" + hex + "/";
}

bool ArtifactArea::publish(Staging& staging, const Digest& digest, std::string_view manifest) const {
  return staging.publish(prefix(digest), kManifest, manifest);
}

void ArtifactArea::replace(Staging& staging, const Digest& digest, std::string_view manifest) const {
  staging.replace(prefix(digest), kManifest, manifest);
}

bool ArtifactArea::has(const Digest& digest) const {
  try {
    return medium_->head(prefix(digest) + std::string(kManifest)).has_value();
  } catch (const CorruptData&) {
    return false;  // a link or a FIFO where the manifest belongs is no artifact
  }
}

std::string ArtifactArea::read_manifest(const Digest& digest, std::size_t max_bytes) const {
  try {
    return medium_->get(prefix(digest) + std::string(kManifest), max_bytes);
  } catch (const NotFound&) {
    throw NotFound("no artifact " + digest.str() + " in store " + location());
  }
}

std::shared_ptr<const Buffer> ArtifactArea::map_listed(const Digest& digest, std::string_view relpath,
                                                       std::uint64_t size) const {
  return medium_->map_sized(prefix(digest) + std::string(relpath), size);
}

std::unique_ptr<RandomAccessFile> ArtifactArea::open_listed(const Digest& digest, std::string_view relpath,
                                                            std::uint64_t size) const {
  return medium_->open_sized(prefix(digest) + std::string(relpath), size);
}

std::unique_ptr<RandomAccessFile> ArtifactArea::open(const Digest& digest, std::string_view relpath) const {
  return medium_->open(prefix(digest) + std::string(relpath));
}

std::optional<ObjectInfo> ArtifactArea::head(const Digest& digest, std::string_view relpath) const {
  return medium_->head(prefix(digest) + std::string(relpath));
}

std::vector<HeadAnswer> ArtifactArea::heads(const Digest& digest, std::span<const std::string> relpaths) const {
  return medium_->head_each(prefix(digest), relpaths);
}

std::vector<StoredFile> ArtifactArea::files(const Digest& digest) const {
  const std::string base = prefix(digest);
  auto entries = list_all(*medium_, base, false);
  if (entries.empty()) {
    // An empty folder (a medium with folders) is there, unlike a removed one.
    auto up = medium_->list(base.substr(0, base.size() - 1), {}, true, 1);
    if (up.entries.empty() || up.entries.front().key != base)
      throw NotFound("no artifact " + digest.str() + " in store " + location());
  }
  std::vector<StoredFile> out;
  for (auto& e : entries) {
    std::string path = e.key.substr(base.size());
    if (path == kManifest) continue;
    bool regular = e.kind == ListedEntry::Kind::object;
    out.push_back({std::move(path), regular, regular ? std::string() : e.what});
  }
  return out;
}

std::vector<Digest> ArtifactArea::list(std::string_view hex_prefix, std::vector<std::string>* problems) const {
  std::vector<Digest> out;
  auto digests_in = [&](std::string_view fan, std::string_view start) {
    const std::string base = std::string(kObjects) + std::string(fan) + "/";
    for (const auto& e : list_all(*medium_, base + std::string(start), true)) {
      auto hex = tail(e.key, base.size());
      if (e.kind == ListedEntry::Kind::folder && hex.size() == 64 && is_hex(hex) && hex.substr(0, 2) == fan)
        out.push_back(Digest(Sha256Value::from_hex(std::string(hex))));
    }
  };
  if (hex_prefix.size() >= 2) {
    digests_in(hex_prefix.substr(0, 2), hex_prefix);
  } else {
    for (const auto& fan : list_all(*medium_, std::string(kObjects) + std::string(hex_prefix), true)) {
      auto name = tail(fan.key, kObjects.size());
      if (name.size() != 2 || !is_hex(name)) continue;
      if (fan.kind != ListedEntry::Kind::folder) {
        std::string problem = location() + ": " + std::string(kObjects) + std::string(name) + " is " +
                              (fan.kind == ListedEntry::Kind::object ? std::string("a regular file") : fan.what) +
                              ", not a directory";
        if (!problems) throw CorruptData(problem);
        problems->push_back(problem);
        continue;
      }
      digests_in(name, "");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::chrono::system_clock::time_point ArtifactArea::time(const Digest& digest) const {
  std::optional<std::chrono::system_clock::time_point> when;
  try {
    if (auto info = medium_->head(prefix(digest) + std::string(kManifest))) when = info->modified;
  } catch (const CorruptData&) {
  }
  if (!when) {
    // A folder without its manifest: as young as its newest file.
    for (const auto& e : list_all(*medium_, prefix(digest), false)) {
      if (e.kind != ListedEntry::Kind::object) continue;
      if (auto info = medium_->head(e.key); info && (!when || info->modified > *when)) when = info->modified;
    }
  }
  if (!when) throw NotFound("no artifact " + digest.str() + " in store " + location());
  try {
    if (auto claimed = medium_->head(std::string(kClaims) + digest.hex()); claimed && claimed->modified > *when)
      when = claimed->modified;
  } catch (const CorruptData&) {
  }
  return *when;
}

void ArtifactArea::claim(const Digest& digest) const { medium_->put(std::string(kClaims) + digest.hex(), ""); }

std::map<Digest, std::chrono::system_clock::time_point> ArtifactArea::claims() const {
  std::map<Digest, std::chrono::system_clock::time_point> out;
  for (const auto& e : list_all(*medium_, std::string(kClaims), true)) {
    auto hex = tail(e.key, kClaims.size());
    if (e.kind != ListedEntry::Kind::object || hex.size() != 64 || !is_hex(hex)) continue;
    try {
      if (auto info = medium_->head(e.key)) out.emplace(Digest(Sha256Value::from_hex(std::string(hex))), info->modified);
    } catch (const CorruptData&) {
    }
  }
  return out;
}

void ArtifactArea::drop_claim(const Digest& digest) const { medium_->remove(std::string(kClaims) + digest.hex()); }

std::uint64_t ArtifactArea::remove(const Digest& digest) const {
  auto bytes = medium_->remove_folder(prefix(digest), kManifest);
  drop_claim(digest);
  return bytes;
}

std::uint64_t ArtifactArea::bytes(const Digest& digest) const {
  std::uint64_t total = 0;
  for (const auto& e : list_all(*medium_, prefix(digest), false)) {
    if (e.kind != ListedEntry::Kind::object) continue;
    try {
      if (auto info = medium_->head(e.key)) total += info->size;
    } catch (const Error&) {
    }
  }
  return total;
}

// ---------------------------------------------------------------- names

std::uint64_t NameIndex::add(std::string_view name_view, nlohmann::json record, std::optional<std::uint64_t> only_after) const {
  const std::string name(name_view);
  auto numbering = medium_->lease("names", LeaseMode::shared, true);  // no version is removed while one is chosen
  // Put only if absent: exactly one writer wins each version.
  auto claim = [&](std::uint64_t version) {
    record["version"] = version;
    std::string text;
    detail::append_json_text(text, record, 2, "the name record for '" + name + "'");
    text += '\n';
    if (text.size() > kMaxRecordBytes)
      throw InvalidArgument("the name record for '" + name + "' is " + std::to_string(text.size()) +
                            " bytes, more than the " + std::to_string(kMaxRecordBytes) + " a record may hold");
    if (!medium_->put("names/" + name + "/" + std::to_string(version) + ".json", text, PutCondition::absent()))
      return false;
    std::lock_guard lock(newest_mutex_);
    if (highest_.size() >= kKeptRecords) highest_.clear();
    highest_.insert_or_assign(name, version);
    return true;
  };
  auto after = [&](std::uint64_t highest) {
    if (highest == std::numeric_limits<std::uint64_t>::max())
      throw CorruptData("name '" + name + "' has reached the largest possible version number");
    return highest + 1;
  };
  // Numbers of removed versions are never issued again: the tombstone keeps
  // the highest one issued. Numbers only grow while the shared lease is
  // held, so the highest this process issued is a floor, and with a look for
  // a tombstone it spares listing every version; another writer's number in
  // the way sends the choice to the listing.
  if (only_after) {
    bool tombstoned = false;
    const auto existing = versions(name, &tombstoned);
    if ((existing.empty() ? 0 : existing.back()) != *only_after) return 0;
    // A writer that lists after this and claims first takes the number: the claim then fails.
    const std::uint64_t version = after(std::max(*only_after, tombstoned ? tombstone(name) : 0));
    return claim(version) ? version : 0;
  }
  std::uint64_t known = 0;
  {
    std::lock_guard lock(newest_mutex_);
    if (auto it = highest_.find(name); it != highest_.end()) known = it->second;
  }
  if (known > 0) {
    bool tombstoned = true;
    try {
      tombstoned = medium_->head("names/" + name + "/" + std::string(kTombstone)).has_value();
    } catch (const CorruptData&) {
    }
    const std::uint64_t version = after(std::max(known, tombstoned ? tombstone(name) : 0));
    if (claim(version)) return version;
  }
  bool tombstoned = false;
  auto existing = versions(name, &tombstoned);
  for (std::uint64_t version = after(std::max(existing.empty() ? 0 : existing.back(), tombstoned ? tombstone(name) : 0));;
       version = after(version))
    if (claim(version)) return version;
}

std::vector<ListedName> NameIndex::list() const {
  constexpr std::string_view kNames = "names/";
  std::vector<ListedName> out;
  for (const auto& e : list_all(*medium_, std::string(kNames), true)) {
    ListedName listed{std::string(tail(e.key, kNames.size())), {}};
    if (e.kind == ListedEntry::Kind::object)
      listed.problem = shown(*medium_, e.key) + " is a regular file, not a name's directory";
    else if (e.kind == ListedEntry::Kind::irregular)
      listed.problem = shown(*medium_, e.key) + " is " + e.what + ", not a name's directory";
    out.push_back(std::move(listed));
  }
  return out;
}

std::vector<std::uint64_t> NameIndex::versions(std::string_view name, bool* tombstoned) const {
  const std::string base = "names/" + std::string(name) + "/";
  std::vector<std::uint64_t> out;
  for (const auto& e : list_all(*medium_, base, true)) {
    // Anything named like a version counts, so that reading it reports
    // what is wrong (a directory, a link) instead of hiding it.
    std::string_view file = tail(e.key, base.size());
    if (tombstoned && file.starts_with(kTombstone)) *tombstoned = true;  // a folder or a link too: read, it says what is wrong
    if (file.size() < 6 || !file.ends_with(".json") || file[0] == '0') continue;
    std::uint64_t v = 0;
    auto [ptr, err] = std::from_chars(file.data(), file.data() + file.size() - 5, v);
    if (err == std::errc() && ptr == file.data() + file.size() - 5) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json NameIndex::read(std::string_view name, std::uint64_t version) const {
  try {
    return read_record(*medium_, "names/" + std::string(name) + "/" + std::to_string(version) + ".json",
                       kMaxRecordBytes, "name record");
  } catch (const NotFound&) {
    throw NotFound("no version " + std::to_string(version) + " of name '" + std::string(name) + "'");
  }
}

Digest record_digest(const nlohmann::json& record, std::string_view name, std::uint64_t version) {
  auto it = record.find("digest");
  if (it == record.end() || !it->is_string() || !Digest::is_digest(it->get<std::string>()))
    throw CorruptData("name record " + std::string(name) + "@" + std::to_string(version) + " has no valid digest");
  return Digest::parse(it->get<std::string>());
}

Digest NameIndex::digest(std::string_view name_view, std::uint64_t version) const {
  std::string name(name_view);
  {
    std::lock_guard lock(newest_mutex_);
    if (auto it = newest_.find(name); it != newest_.end() && it->second.first == version) return it->second.second;
  }
  const Digest digest = record_digest(read(name, version), name, version);
  std::lock_guard lock(newest_mutex_);
  if (newest_.size() >= kKeptRecords) newest_.clear();
  newest_.insert_or_assign(std::move(name), std::make_pair(version, digest));
  return digest;
}

std::optional<std::pair<std::uint64_t, Digest>> NameIndex::newest(std::string_view name) const {
  auto existing = versions(name);
  if (existing.empty()) return std::nullopt;
  try {
    return std::make_pair(existing.back(), digest(name, existing.back()));
  } catch (const Error&) {
    return std::nullopt;
  }
}

void NameIndex::remove(std::string_view name_view, std::uint64_t version) const {
  const std::string name(name_view);
  auto numbering = medium_->lease("names", LeaseMode::exclusive, true);  // no version is chosen meanwhile
  auto existing = versions(name);
  if (existing.empty()) throw NotFound("no name '" + name + "' in store " + location());
  if (!std::binary_search(existing.begin(), existing.end(), version))
    throw NotFound("no version " + std::to_string(version) + " of name '" + name + "' in store " + location());
  // The tombstone records the highest number issued before the version
  // goes, so add() never issues a removed number again.
  if (existing.back() > tombstone(name))
    medium_->put("names/" + name + "/" + std::string(kTombstone),
                 nlohmann::json{{"highest_version", existing.back()}}.dump(2) + "\n");
  medium_->remove("names/" + name + "/" + std::to_string(version) + ".json");  // a link is removed, never followed
}

// The highest version `name` had when one of its versions was last
// removed, or 0 when none ever was.
std::uint64_t NameIndex::tombstone(const std::string& name) const {
  const std::string key = "names/" + name + "/" + std::string(kTombstone);
  std::string text;
  try {
    text = medium_->get(key, kMaxTombstoneBytes);
  } catch (const NotFound&) {
    return 0;
  } catch (const CorruptData&) {
  }
  nlohmann::json doc;
  try {
    doc = parse_untrusted_json(text);
  } catch (const CorruptData&) {
  }
  auto it = doc.is_object() ? doc.find("highest_version") : doc.end();
  if (!doc.is_object() || it == doc.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() == 0)
    throw CorruptData(shown(*medium_, key) + " is not a tombstone ({\"highest_version\": N}); versions of this name "
                      "cannot be numbered safely until it holds the highest version the name ever had");
  return it->get<std::uint64_t>();
}

// ---------------------------------------------------------------- action cache

std::shared_ptr<const CacheEntry> ActionCache::get(const Digest& key) const {
  const std::string object = "cache/" + key.hex() + ".json";
  // Looked at before it is read: an entry replaced in between is read
  // again next time, never kept under the newer tag.
  auto now = medium_->head(object);
  if (!now) return nullptr;
  if (!now->tag.empty()) {
    std::lock_guard lock(kept_mutex_);
    if (auto it = kept_.find(key); it != kept_.end() && it->second.first == now->tag) return it->second.second;
  }
  nlohmann::json doc;
  try {
    doc = read_record(*medium_, object, NameIndex::kMaxRecordBytes, "cache entry");
  } catch (const NotFound&) {
    return nullptr;
  }
  auto entry = std::make_shared<CacheEntry>();
  parse_entry(std::move(doc), *entry);
  if (!now->tag.empty()) {
    std::lock_guard lock(kept_mutex_);
    if (kept_.size() >= kKeptRecords) kept_.clear();
    kept_.insert_or_assign(key, std::make_pair(now->tag, entry));
  }
  return entry;
}

std::shared_ptr<const CacheEntry> ActionCache::read(const Digest& key) const {
  nlohmann::json doc;
  try {
    doc = read_record(*medium_, "cache/" + key.hex() + ".json", NameIndex::kMaxRecordBytes, "cache entry");
  } catch (const NotFound&) {
    return nullptr;
  }
  auto entry = std::make_shared<CacheEntry>();
  parse_entry(std::move(doc), *entry);
  return entry;
}

void ActionCache::parse_entry(nlohmann::json doc, CacheEntry& entry) {
  auto text = [&](const char* field) {
    auto it = doc.find(field);
    return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  // What the entry says it is the entry of: a copied or edited one says
  // another key (or none), and the lookup compares.
  if (auto recorded = text("key"); Digest::is_digest(recorded)) entry.key = Digest::parse(recorded);
  entry.pipeline = text("pipeline");
  entry.step = text("step");
  entry.created_at = text("created_at");
  if (auto it = doc.find("outputs"); it != doc.end() && it->is_object())
    for (auto o = it->begin(); o != it->end(); ++o)
      if (o->is_string() && Digest::is_digest(o->get<std::string>()))
        entry.outputs.emplace(o.key(), Digest::parse(o->get<std::string>()));
  if (auto it = doc.find("provenance"); it != doc.end() && it->is_object()) entry.provenance = std::move(*it);
}

bool ActionCache::put(const CacheEntry& entry, bool only_if_absent) const {
  nlohmann::json outputs = nlohmann::json::object();
  for (const auto& [name, digest] : entry.outputs) outputs[name] = digest.str();
  nlohmann::json doc = {{"key", entry.key.str()},   {"pipeline", entry.pipeline},     {"step", entry.step},
                        {"outputs", outputs},        {"provenance", entry.provenance}, {"created_at", entry.created_at}};
  const std::string key = "cache/" + entry.key.hex() + ".json";
  return medium_
      ->put(key, record_text(doc, 1, NameIndex::kMaxRecordBytes, "cache entry", shown(*medium_, key)),
            only_if_absent ? PutCondition::absent() : PutCondition{})
      .has_value();
}

std::vector<Digest> ActionCache::keys() const {
  std::vector<Digest> out;
  for (const auto& e : list_all(*medium_, "cache/", true)) {
    auto file = std::string_view(e.key).substr(6);
    if (e.kind != ListedEntry::Kind::object || file.size() != 64 + 5 || !file.ends_with(".json") ||
        !is_hex(file.substr(0, 64)))
      continue;
    out.push_back(Digest(Sha256Value::from_hex(std::string(file.substr(0, 64)))));
  }
  return out;
}

bool ActionCache::remove(const Digest& key) const { return medium_->remove("cache/" + key.hex() + ".json"); }

// ---------------------------------------------------------------- runs

void RunLog::write(std::string_view pipeline, std::string_view run_id, const nlohmann::json& record) const {
  if (!valid_record_stem(pipeline) || !valid_record_stem(run_id))
    throw InvalidArgument("invalid run '" + std::string(pipeline) + "/" + std::string(run_id) + "'");
  const std::string key = "runs/" + std::string(pipeline) + "/" + std::string(run_id) + ".json";
  medium_->put(key, record_text(record, 1, kMaxRunBytes, "run record", shown(*medium_, key)));
}

std::vector<std::pair<std::string, std::string>> RunLog::list(std::vector<std::string>* problems) const {
  std::vector<std::pair<std::string, std::string>> runs;
  for (const auto& dir : list_all(*medium_, "runs/", true)) {
    std::string pipeline(tail(dir.key, 5));
    if (dir.kind != ListedEntry::Kind::folder || !valid_record_stem(pipeline)) {
      if (problems) problems->push_back(shown(*medium_, tail(dir.key, 0)) + " is not a pipeline's run directory");
      continue;
    }
    for (const auto& e : list_all(*medium_, dir.key, true)) {
      std::string_view file = tail(e.key, dir.key.size());
      if (e.kind == ListedEntry::Kind::object && file.ends_with(".json") &&
          valid_record_stem(file.substr(0, file.size() - 5)))
        runs.emplace_back(pipeline, std::string(file.substr(0, file.size() - 5)));
      else if (problems)
        problems->push_back(shown(*medium_, tail(e.key, 0)) + " is not a run record");
    }
  }
  return runs;
}

std::string RunLog::read_text(std::string_view pipeline, std::string_view run_id) const {
  auto missing = [&] {
    return NotFound("no run '" + std::string(run_id) + "' of pipeline '" + std::string(pipeline) + "' in store " +
                    medium_->location());
  };
  if (!valid_record_stem(pipeline) || !valid_record_stem(run_id)) throw missing();
  try {
    return medium_->get("runs/" + std::string(pipeline) + "/" + std::string(run_id) + ".json", kMaxRunBytes);
  } catch (const NotFound&) {
    throw missing();
  } catch (const CorruptData& e) {
    throw CorruptData(std::string("run record ") + e.what());
  }
}

nlohmann::json RunLog::read(std::string_view pipeline, std::string_view run_id) const {
  return parse_record(read_text(pipeline, run_id), *medium_,
                      "runs/" + std::string(pipeline) + "/" + std::string(run_id) + ".json", "run record");
}

}  // namespace amphora::detail
