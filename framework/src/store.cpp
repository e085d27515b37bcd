#include <amphora/store.hpp>

#include "piece_hash.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <set>
#include <unistd.h>

namespace amphora {

namespace fs = std::filesystem;

void validate_name(std::string_view name) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  bool ok = !name.empty() && name.size() <= 128 && (alnum(name.front()) || name.front() == '_');
  for (char c : name) ok = ok && (alnum(c) || c == '.' || c == '_' || c == '-');
  if (!ok)
    throw InvalidArgument("invalid name '" + std::string(name) +
                          "': use 1-128 letters, digits, '.', '_' or '-', starting with a letter, digit or '_'");
}

namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Digest record_digest(const nlohmann::json& record, std::string_view name, std::uint64_t version) {
  auto it = record.find("digest");
  if (it == record.end() || !it->is_string() || !Digest::is_digest(it->get<std::string>()))
    throw CorruptData("name record " + std::string(name) + "@" + std::to_string(version) + " has no valid digest");
  return Digest::parse(it->get<std::string>());
}

// Checks an artifact's files against its manifest: nothing unlisted, every
// listed file present at its size and, with `hash`, matching its piece
// digests. Damage becomes a line in `problems`; I/O failures throw.
void check_files(StorageBackend& backend, const Digest& digest, const Manifest& m, const std::string& label,
                 bool hash, std::vector<std::string>& problems,
                 const std::function<void(std::uint64_t)>& hashed = {}) {
  std::set<std::string> listed;
  for (const auto& f : m.files) listed.insert(f.path);
  for (const auto& present : backend.list_files(digest))
    if (!listed.count(present)) problems.push_back(label + ": unexpected file '" + present + "'");
  for (const auto& f : m.files) {
    std::shared_ptr<const Buffer> data;
    try {
      data = backend.map_file(digest, f.path);
    } catch (const NotFound& e) {
      problems.push_back(label + ": file '" + f.path + "': " + e.what());
      continue;
    } catch (const CorruptData& e) {
      problems.push_back(label + ": file '" + f.path + "': " + e.what());
      continue;
    }
    if (data->size() != f.size) {
      problems.push_back(label + ": file '" + f.path + "' is " + std::to_string(data->size()) +
                         " bytes, manifest says " + std::to_string(f.size));
      continue;
    }
    if (!hash) continue;
    ConstBytes whole = data->bytes();
    auto actual = detail::hash_pieces(detail::PartList({&whole, 1}), f.piece_size, {});
    for (std::size_t k = 0; k < actual.size(); ++k)
      if (actual[k] != f.pieces[k])
        problems.push_back(label + ": file '" + f.path + "' piece " + std::to_string(k) + " (bytes " +
                           std::to_string(k * f.piece_size) + "..) does not match its SHA-256");
    if (hashed) hashed(f.size);
  }
}

}  // namespace

struct Store::Impl {
  fs::path path;
  std::shared_ptr<StorageBackend> backend;
  std::shared_ptr<Registry> registry;

  std::vector<Digest> match_prefix(std::string_view hex) const {
    std::vector<Digest> out;
    for (const auto& d : backend->list_artifacts())
      if (d.hex().compare(0, hex.size(), hex) == 0) out.push_back(d);
    return out;
  }

  Digest resolve_prefix(std::string_view ref, std::string_view hex) const {
    auto matches = match_prefix(hex);
    if (matches.empty()) throw NotFound("no artifact matches '" + std::string(ref) + "' in store " + path.string());
    if (matches.size() > 1) {
      std::string list;
      for (std::size_t i = 0; i < matches.size() && i < 5; ++i) list += (i ? ", " : "") + matches[i].short_str();
      throw InvalidArgument("ref '" + std::string(ref) + "' is ambiguous: it matches " +
                            std::to_string(matches.size()) + " artifacts (" + list + "); give more digits");
    }
    return matches.front();
  }

  Digest resolve(std::string_view ref) const {
    if (ref.empty()) throw InvalidArgument("empty ref: give NAME, NAME@N, sha256:HEX or a hex prefix");
    if (auto at = ref.find('@'); at != std::string_view::npos) {
      auto name = ref.substr(0, at);
      auto vtext = ref.substr(at + 1);
      validate_name(name);
      std::uint64_t version = 0;
      auto [ptr, err] = std::from_chars(vtext.data(), vtext.data() + vtext.size(), version);
      if (err != std::errc() || ptr != vtext.data() + vtext.size() || version == 0)
        throw InvalidArgument("invalid version in ref '" + std::string(ref) + "': expected NAME@N with N >= 1");
      auto versions = backend->list_versions(name);
      if (versions.empty()) throw NotFound("no name '" + std::string(name) + "' in store " + path.string());
      if (!std::binary_search(versions.begin(), versions.end(), version))
        throw NotFound("name '" + std::string(name) + "' has no version " + std::to_string(version) +
                       " (latest is " + std::to_string(versions.back()) + ")");
      return record_digest(backend->read_version(name, version), name, version);
    }
    if (ref.starts_with("sha256:")) {
      auto hex = ref.substr(7);
      if (!is_hex(hex) || hex.size() < 8 || hex.size() > 64)
        throw InvalidArgument("invalid digest ref '" + std::string(ref) +
                              "': expected sha256: and 8 to 64 lower-case hex digits");
      if (hex.size() == 64) {
        Digest d = Digest::parse(ref);
        if (!backend->has_artifact(d)) throw NotFound("no artifact " + d.str() + " in store " + path.string());
        return d;
      }
      return resolve_prefix(ref, hex);
    }
    bool valid_name = true;
    try {
      validate_name(ref);
    } catch (const InvalidArgument&) {
      valid_name = false;
    }
    if (valid_name) {
      auto versions = backend->list_versions(ref);
      if (!versions.empty()) return record_digest(backend->read_version(ref, versions.back()), ref, versions.back());
    }
    if (ref.size() >= 8 && ref.size() <= 64 && is_hex(ref)) return resolve_prefix(ref, ref);
    if (!valid_name) validate_name(ref);  // throws the precise reason
    throw NotFound("no name or artifact '" + std::string(ref) + "' in store " + path.string());
  }

  // Cheap check that a stored artifact lost a file or bytes. Only damage
  // counts: an I/O failure (say, out of file descriptors) propagates rather
  // than condemn a good copy.
  bool damaged(const Digest& digest, const Manifest& expected) const {
    try {
      if (backend->read_manifest(digest) != expected.canonical()) return true;
    } catch (const NotFound&) {
      return true;
    }
    std::vector<std::string> problems;
    check_files(*backend, digest, expected, "artifact " + digest.str(), false, problems);
    return !problems.empty();
  }

  ArtifactReader open(std::string_view ref) const {
    Digest digest = resolve(ref);
    std::string label = "artifact ";
    label += Digest::is_digest(ref) ? digest.short_str() : std::string(ref) + " (" + digest.short_str() + ")";
    auto bytes = backend->read_manifest(digest);
    if (Sha256::of(bytes) != digest.value())
      throw CorruptData(label + ": manifest.json does not hash to the artifact's digest");
    return ArtifactReader(backend, digest, Manifest::parse(bytes, label), label);
  }
};

Store::Store(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Store Store::open(const fs::path& dir, OpenOptions options) {
  auto impl = std::make_shared<Impl>();
  impl->path = dir;
  const char* env = std::getenv("AMPHORA_DURABLE");
  bool durable = options.durable || (env && std::string_view(env) == "1");
  impl->backend = open_local_backend(dir, options.create, durable);
  impl->registry = options.registry ? std::move(options.registry) : std::make_shared<Registry>();
  return Store(std::move(impl));
}

fs::path Store::default_path() {
  if (const char* env = std::getenv("AMPHORA_STORE"); env && *env) return env;
  return ".amphora";
}

const fs::path& Store::path() const { return impl_->path; }
Registry& Store::registry() const { return *impl_->registry; }
const std::shared_ptr<StorageBackend>& Store::backend() const { return impl_->backend; }

SaveResult Store::save_erased(const MaterializerEntry& entry, const void* value, const SaveOptions& options) {
  if (!options.name.empty()) validate_name(options.name);
  if (!options.provenance.is_object()) throw InvalidArgument("SaveOptions::provenance must be a JSON object");
  try {
    (void)options.provenance.dump();  // fail before writing anything, not after publishing
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("SaveOptions::provenance cannot be stored: ") + e.what());
  }
  ArtifactWriter writer(impl_->backend->begin_artifact(), options);
  entry.save(value, writer);
  Manifest manifest = writer.finish(entry.name, entry.version);
  SaveResult result;
  result.digest = manifest.digest();

  // From publishing until the name exists the artifact is unreferenced; the
  // shared lease keeps gc from collecting it in that window.
  auto lease = impl_->backend->publish_lease();
  result.created = writer.publish(result.digest);
  if (!result.created && impl_->damaged(result.digest, manifest)) {
    // The stored copy lost files or bytes; ours is complete, so it takes its
    // place. One repairer per digest, and only if still damaged once it may.
    auto repair = impl_->backend->repair_lease(result.digest);
    if (impl_->damaged(result.digest, manifest)) {
      writer.replace(result.digest);
      result.created = true;
    }
  }
  if (!options.name.empty()) {
    nlohmann::json record = options.provenance;
    record["name"] = options.name;
    record["digest"] = result.digest.str();
    record["materializer"] = entry.name;
    record["materializer_version"] = entry.version;
    record["payload_bytes"] = manifest.payload_bytes();
    record["created_at"] = utc_now();
    record["host"] = host_name();
    record["pid"] = ::getpid();
    result.name = options.name;
    result.version = impl_->backend->add_version(options.name, std::move(record));
  }
  return result;
}

std::shared_ptr<void> Store::load_erased(std::string_view ref, std::string_view expected) const {
  ArtifactReader reader = impl_->open(ref);
  const Manifest& m = reader.manifest();
  auto entry = impl_->registry->find(m.materializer);
  if (!entry)
    throw Unsupported(reader.label() + " was written by materializer '" + m.materializer + "' (format version " +
                      std::to_string(m.materializer_version) +
                      "), which is not registered; register it or load the plugin that provides it");
  if (!expected.empty() && entry->name != expected)
    throw Unsupported(reader.label() + " holds a '" + m.materializer + "' artifact (" +
                      type_display_name(entry->type) + "), not a '" + std::string(expected) + "'");
  if (m.materializer_version > entry->version)
    throw Unsupported(reader.label() + " uses '" + m.materializer + "' format version " +
                      std::to_string(m.materializer_version) + ", newer than the version " +
                      std::to_string(entry->version) + " this build reads (" + entry->origin + ")");
  return entry->load(reader);
}

Digest Store::resolve(std::string_view ref) const { return impl_->resolve(ref); }
ArtifactReader Store::open_artifact(std::string_view ref) const { return impl_->open(ref); }

std::vector<std::string> Store::names() const { return impl_->backend->list_names(); }

std::vector<VersionInfo> Store::versions(std::string_view name) const {
  validate_name(name);
  auto versions = impl_->backend->list_versions(name);
  if (versions.empty()) throw NotFound("no name '" + std::string(name) + "' in store " + impl_->path.string());
  std::vector<VersionInfo> out;
  for (auto v : versions) {
    VersionInfo info;
    info.name = std::string(name);
    info.version = v;
    info.record = impl_->backend->read_version(name, v);
    info.digest = record_digest(info.record, name, v);
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<VersionInfo> Store::names_of(const Digest& digest) const {
  std::vector<VersionInfo> out;
  for (const auto& name : names())
    for (auto& info : versions(name))
      if (info.digest == digest) out.push_back(std::move(info));
  return out;
}

std::vector<Digest> Store::artifacts() const { return impl_->backend->list_artifacts(); }

VerifyReport Store::verify(std::optional<std::string_view> ref, const Progress& progress) const {
  auto& backend = *impl_->backend;
  VerifyReport report;
  std::vector<Digest> digests;
  if (ref) {
    digests.push_back(resolve(*ref));
  } else {
    digests = backend.list_artifacts();
    for (const auto& name : names()) {
      for (auto v : backend.list_versions(name)) {
        try {
          Digest d = record_digest(backend.read_version(name, v), name, v);
          if (!backend.has_artifact(d))
            report.problems.push_back("name " + name + "@" + std::to_string(v) + " points to missing artifact " +
                                      d.str());
        } catch (const Error& e) {
          report.problems.push_back(e.what());
        }
      }
    }
  }

  struct Item {
    Digest digest;
    std::string bytes;
    std::optional<Manifest> manifest;
  };
  std::vector<Item> items;
  std::uint64_t total = 0;
  for (const auto& d : digests) {
    Item item{d, {}, std::nullopt};
    std::string label = "artifact " + d.str();
    try {
      try {
        item.bytes = backend.read_manifest(d);
      } catch (const NotFound&) {
        if (!ref && !backend.has_artifact(d)) continue;  // collected by a concurrent gc since listed
        throw;
      }
      if (Sha256::of(item.bytes) != d.value()) {
        report.problems.push_back(label + ": manifest.json does not hash to the artifact's digest (found sha256:" +
                                  Sha256::of(item.bytes).hex() + ")");
      }
      item.manifest = Manifest::parse(item.bytes, label);
      if (item.manifest->canonical() != item.bytes)
        report.problems.push_back(label + ": manifest.json is not in canonical form");
      total += item.manifest->payload_bytes();
    } catch (const Error& e) {
      report.problems.push_back(e.what());
    }
    items.push_back(std::move(item));
  }

  std::uint64_t done = 0;
  for (auto& item : items) {
    ++report.artifacts;
    if (!item.manifest) continue;
    const Manifest& m = *item.manifest;
    std::string label = "artifact " + item.digest.str();
    try {
      check_files(backend, item.digest, m, label, true, report.problems, [&](std::uint64_t bytes) {
        done += bytes;
        report.bytes += bytes;
        if (progress) progress(done, total);
      });
    } catch (const Error& e) {
      report.problems.push_back(label + ": " + e.what());
    }
  }
  return report;
}

GcReport Store::gc(bool dry_run, std::chrono::seconds staging_grace) {
  auto& backend = *impl_->backend;
  GcReport report;
  auto lease = backend.gc_lease();
  std::set<Digest> live;
  for (const auto& name : backend.list_names())
    for (auto v : backend.list_versions(name)) live.insert(record_digest(backend.read_version(name, v), name, v));
  for (const auto& d : backend.list_artifacts()) {
    if (live.count(d)) {
      ++report.kept;
      continue;
    }
    report.removed.push_back(d);
    report.bytes_freed += dry_run ? backend.artifact_bytes(d) : backend.remove_artifact(d);
  }
  report.staging = backend.sweep_staging(dry_run, staging_grace);
  return report;
}

}  // namespace amphora
