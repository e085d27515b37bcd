#include <amphora/store.hpp>

#include <amphora/parallel.hpp>

#include "artifact_context.hpp"
#include "error_boundary.hpp"
#include "guarded_medium.hpp"
#include "posix.hpp"
#include "store_access.hpp"
#include "store_areas.hpp"

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <new>
#include <system_error>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <set>
#include <sys/stat.h>
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

// SHA-256 of each piece of a stored file, read with pread on all cores: a
// file that shrinks meanwhile is an error, never a SIGBUS.
std::vector<Sha256Value> hash_stored_file(const RandomAccessFile& file, const FileEntry& f,
                                          const std::function<void(std::uint64_t)>& hashed) {
  constexpr std::size_t kBlock = 1u << 20;
  const std::uint64_t pieces = piece_count(f.size, f.piece_size);
  std::vector<Sha256Value> out(static_cast<std::size_t>(pieces));
  std::mutex progress_mutex;
  parallel_for(static_cast<std::size_t>(pieces), [&](std::size_t k) {
    thread_local std::vector<std::byte> buffer(kBlock);
    Sha256 hash;
    std::uint64_t begin = k * f.piece_size, end = std::min(f.size, begin + f.piece_size);
    for (std::uint64_t at = begin; at < end; at += kBlock) {
      auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, end - at));
      file.read_at(at, n, buffer.data());
      hash.update(buffer.data(), n);
    }
    out[k] = hash.finish();
    if (hashed) {
      std::lock_guard lock(progress_mutex);
      hashed(end - begin);
    }
  });
  return out;
}

// What is wrong with one listed file, from what the medium says of it, or
// empty when it is there at its size.
std::string file_problem(const std::string& label, const FileEntry& f, const HeadAnswer& seen) {
  if (!seen.problem.empty()) return label + ": " + seen.problem;
  if (!seen.info) return label + ": file '" + f.path + "' is missing";
  if (seen.info->size != f.size)
    return label + ": file '" + f.path + "' is " + std::to_string(seen.info->size) + " bytes, manifest says " +
           std::to_string(f.size);
  return {};
}

// Checks an artifact's files against its manifest: every listed file a
// regular file of its size and, with `hash`, matching its piece digests and
// nothing unlisted beside them. Without `hash` it is the quick check of what
// a load reads (an extra file harms no load, and listing costs a directory
// read). Damage becomes a line in `problems`; I/O failures throw.
void check_files(const detail::ArtifactArea& artifacts, const Digest& digest, const Manifest& m, const std::string& label,
                 bool hash, std::vector<std::string>& problems,
                 const std::function<void(std::uint64_t)>& hashed = {}) {
  if (hash) {
    std::set<std::string> listed;
    for (const auto& f : m.files) listed.insert(f.path);
    for (const auto& present : artifacts.files(digest)) {
      if (listed.count(present.path)) continue;  // its own check below says what is wrong with it
      if (present.regular)
        problems.push_back(label + ": unexpected file '" + present.path + "'");
      else
        problems.push_back(label + ": unexpected entry '" + present.path + "', " + present.kind);
    }
  }
  if (!hash) {
    // What the medium knows of the files is enough: one look, no opens.
    std::vector<std::string> paths;
    for (const auto& f : m.files) paths.push_back(f.path);
    auto answers = artifacts.heads(digest, paths);
    for (std::size_t k = 0; k < m.files.size(); ++k)
      if (auto problem = file_problem(label, m.files[k], answers[k]); !problem.empty()) problems.push_back(problem);
    return;
  }
  for (const auto& f : m.files) {
    std::unique_ptr<RandomAccessFile> file;
    HeadAnswer seen;
    try {
      file = artifacts.open(digest, f.path);
      seen.info = ObjectInfo{file->size(), {}, {}, {}};
    } catch (const NotFound&) {
    } catch (const CorruptData& e) {
      seen.problem = e.what();
    }
    if (auto problem = file_problem(label, f, seen); !problem.empty()) {
      problems.push_back(problem);
      continue;
    }
    std::vector<Sha256Value> actual;
    try {
      actual = hash_stored_file(*file, f, hashed);
    } catch (const CorruptData& e) {
      problems.push_back(label + ": file '" + f.path + "': " + e.what());
      continue;
    }
    for (std::size_t k = 0; k < actual.size(); ++k)
      if (actual[k] != f.pieces[k])
        problems.push_back(label + ": file '" + f.path + "' piece " + std::to_string(k) + " (bytes " +
                           std::to_string(k * f.piece_size) + " to " +
                           std::to_string(std::min<std::uint64_t>(f.size, (k + 1) * f.piece_size) - 1) + " of " +
                           std::to_string(f.size) + ") does not match its SHA-256");
  }
}

// Every failure leaving the Store is an amphora::Error of the right class,
// whatever the standard library, nlohmann::json or a materializer threw
// underneath (error_boundary.hpp); the medium's own failures are already
// translated where the store calls it (guarded_medium.hpp).
template <class F>
auto translated(bool reading, F&& body) -> decltype(body()) {
  return detail::translate_errors(reading ? detail::Blame::stored_data : detail::Blame::caller_value,
                                  std::forward<F>(body));
}

// One reading of a store's remotes, for a ref the store lacks, and the
// remote it reads through to, if any.
struct ReadThrough {
  std::vector<RemoteSpec> remotes;  // empty when the store does not read through
  std::optional<Store> remote;      // when it has exactly one, holding a store
};

// Rethrows the NotFound being handled (of a ref this store lacks and no
// remote was asked for), saying why when the store reads through but has
// several remotes (`all`, the reading that found no remote to ask): which
// they are and how to fetch from one.
[[noreturn]] void rethrow_missing(const std::vector<RemoteSpec>& all, const NotFound& here) {
  if (all.size() < 2) throw;
  throw NotFound(std::string(here.what()) + "; the store has " + std::to_string(all.size()) + " remotes (" +
                 detail::remote_names(all) + ") and reads through to none: pull it from one (amphora pull --remote NAME REF)");
}

}  // namespace

struct Store::Impl : detail::ArtifactContext, std::enable_shared_from_this<Store::Impl> {
  fs::path path;
  std::shared_ptr<Medium> medium;
  std::shared_ptr<const detail::ArtifactArea> artifacts;
  std::optional<detail::NameIndex> names;
  std::optional<detail::ActionCache> cache;
  std::optional<detail::RunLog> runs;
  std::shared_ptr<Registry> registry;
  bool read_through = true;
  // The remote reads go through to, opened once for as long as the
  // remotes it was opened from stay as they are (remotes.json is reread).
  std::mutex remote_mutex;
  std::string remote_key;
  std::shared_ptr<const Store> remote;

  // With several remotes, which one holds what is missing here would be a
  // guess: none is read through (rethrow_missing says so). One that holds
  // no store yet, or whose location cannot hold one, has nothing to read.
  ReadThrough read_through_from(const Store& self) {
    ReadThrough out;
    if (!read_through) return out;
    out.remotes = self.remotes();
    if (out.remotes.size() != 1) return out;
    const RemoteSpec& spec = out.remotes.front();
    std::string key = spec.name + '\n' + spec.url + '\n' + spec.endpoint + '\n' + spec.region;
    {
      std::lock_guard lock(remote_mutex);
      if (remote && remote_key == key) {
        out.remote = *remote;
        return out;
      }
    }
    try {
      auto opened = std::make_shared<const Store>(detail::StoreAccess::remote(self, spec, false));
      std::lock_guard lock(remote_mutex);
      remote = opened;
      remote_key = std::move(key);
      out.remote = *opened;
    } catch (const NotFound&) {
    } catch (const InvalidArgument&) {
    }
    return out;
  }

  // Only published artifacts count: a directory without a manifest (a
  // leftover verify reports) must not make a prefix ambiguous.
  std::vector<Digest> match_prefix(std::string_view hex) const {
    std::vector<Digest> out;
    for (const auto& d : artifacts->list(hex))
      if (artifacts->has(d)) out.push_back(d);
    return out;
  }

  Digest resolve_prefix(std::string_view ref, std::string_view hex) const {
    auto matches = match_prefix(hex);
    if (matches.empty()) throw NotFound("no artifact matches '" + std::string(ref) + "' in store " + path.string());
    if (matches.size() > 1) {
      std::string list;
      for (std::size_t i = 0; i < matches.size() && i < 5; ++i) list += (i ? ", " : "") + matches[i].str();
      if (matches.size() > 5) list += ", ...";
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
      // The record itself first: listing a name with many versions costs more.
      try {
        return detail::record_digest(names->read(name, version), name, version);
      } catch (const NotFound&) {
      }
      auto versions = names->versions(name);
      if (versions.empty()) throw NotFound("no name '" + std::string(name) + "' in store " + path.string());
      if (!std::binary_search(versions.begin(), versions.end(), version))
        throw NotFound("name '" + std::string(name) + "' has no version " + std::to_string(version) +
                       " (latest is " + std::to_string(versions.back()) + ")");
      return detail::record_digest(names->read(name, version), name, version);
    }
    if (ref.starts_with("sha256:")) {
      auto hex = ref.substr(7);
      if (!is_hex(hex) || hex.size() < 8 || hex.size() > 64)
        throw InvalidArgument("invalid digest ref '" + std::string(ref) +
                              "': expected sha256: and 8 to 64 lower-case hex digits");
      if (hex.size() == 64) {
        Digest d = Digest::parse(ref);
        if (!artifacts->has(d)) throw NotFound("no artifact " + d.str() + " in store " + path.string());
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
      auto versions = names->versions(ref);
      // The latest version's record was written once under a number never
      // issued again: its digest is read once (NameIndex::digest).
      if (!versions.empty()) return names->digest(ref, versions.back());
    }
    if (ref.size() >= 8 && ref.size() <= 64 && is_hex(ref)) return resolve_prefix(ref, ref);
    if (ref.size() < 8 && ref.size() >= 4 && is_hex(ref))
      throw NotFound("no name '" + std::string(ref) + "' in store " + path.string() +
                            ", and '" + std::string(ref) + "' is too short for a digest prefix: give at least 8 hex digits");
    if (!valid_name) validate_name(ref);  // throws the precise reason
    throw NotFound("no name or artifact '" + std::string(ref) + "' in store " + path.string());
  }

  // Whether a stored copy of an artifact we just staged lost or changed any
  // byte. Its payload is re-hashed: a size check alone would let a flipped
  // byte pass for an intact copy. Only damage counts: an I/O failure (say, out
  // of file descriptors) propagates rather than condemn a good copy.
  // `canonical` is expected's canonical form.
  bool damaged(const Digest& digest, const Manifest& expected, const std::string& canonical) const {
    try {
      if (artifacts->read_manifest(digest, Manifest::kMaxBytes) != canonical) return true;
    } catch (const NotFound&) {
      return true;
    } catch (const CorruptData&) {
      return true;
    }
    std::vector<std::string> problems;
    try {
      check_files(*artifacts, digest, expected, "artifact " + digest.str(), true, problems);
    } catch (const NotFound&) {
      return true;
    } catch (const CorruptData&) {
      return true;
    }
    return !problems.empty();
  }

  // Healthy versions of every name (or one), with a line per unreadable one.
  NameScan scan(std::optional<std::string_view> only) const {
    NameScan out;
    std::vector<detail::ListedName> listed;
    if (only) {
      validate_name(*only);
      listed.push_back({std::string(*only), {}});
    } else {
      listed = names->list();
    }
    for (const auto& [name, problem] : listed) {
      std::string shown = "names/" + name;
      try {
        validate_name(name);
      } catch (const InvalidArgument&) {
        out.problems.push_back(shown + " in store " + path.string() +
                               " is not a valid name: no ref can use it; remove it");
        continue;
      }
      if (!problem.empty()) {
        out.problems.push_back(problem);
        continue;
      }
      // Only damage is a bad record; running out of descriptors or an I/O
      // error is the machine's trouble and propagates.
      std::vector<std::uint64_t> versions;
      try {
        versions = names->versions(name);
      } catch (const CorruptData& e) {
        out.problems.push_back(e.what());
        continue;
      }
      for (auto v : versions) {
        try {
          VersionInfo info;
          info.name = name;
          info.version = v;
          info.record = names->read(name, v);
          info.digest = detail::record_digest(info.record, name, v);
          out.versions.push_back(std::move(info));
        } catch (const NotFound&) {
          // removed (by rm) since listed
        } catch (const CorruptData& e) {
          out.problems.push_back(e.what());
        }
      }
    }
    return out;
  }

  ArtifactReader open(const Digest& digest, std::string label, int depth = 0) override {
    auto manifest = manifest_of(digest, label);
    return detail::ArtifactAccess::reader(shared_from_this(), artifacts, digest, std::move(manifest), std::move(label),
                                          depth);
  }

  // A manifest hashes to its artifact's digest, so once read and checked it
  // is kept (bounded) for the next open of the same artifact, which then
  // only looks that the file is still there as it was (its version tag: a
  // byte changed in place changes its time). verify reads every manifest afresh.
  std::shared_ptr<const Manifest> manifest_of(const Digest& digest, const std::string& label) {
    std::optional<ObjectInfo> now = artifacts->head(digest, detail::ArtifactArea::kManifest);
    if (!now) throw NotFound("no artifact " + digest.str() + " in store " + path.string());
    {
      std::lock_guard lock(manifests_mutex);
      if (auto it = manifests.find(digest); it != manifests.end() && it->second.first == now->tag) return it->second.second;
    }
    auto bytes = artifacts->read_manifest(digest, Manifest::kMaxBytes);
    if (Sha256::of(bytes) != digest.value())
      throw CorruptData(label + ": manifest.json does not hash to the artifact's digest");
    auto manifest = std::make_shared<const Manifest>(Manifest::parse(bytes, label));
    std::lock_guard lock(manifests_mutex);
    if (manifests.size() >= kKeptManifests) manifests.clear();
    manifests.insert_or_assign(digest, std::make_pair(now->tag, manifest));
    return manifest;
  }
  // What damage() without hashing would report first for `digest` and what
  // it holds, or nullopt when that takes the full path: a manifest not kept
  // from an earlier read, or one whose tag changed. `made_by`, when given,
  // is the materializer the artifact must come from. With the manifest
  // kept, its tag and the files' sizes come from one look at the folder.
  // `kept_out`, when given, receives the top artifact's kept manifest.
  std::optional<std::string> quick_problem(const Digest& digest, std::string_view made_by, std::set<Digest>& seen,
                                           int depth = 0, std::shared_ptr<const Manifest>* kept_out = nullptr) {
    // Deeper than a reader follows: the full check says what is wrong, and
    // this recursion stays as shallow as a load's.
    if (depth > kMaxChildDepth) return std::nullopt;
    if (!seen.insert(digest).second) return std::string();
    std::shared_ptr<const Manifest> kept;
    std::string tag;
    {
      std::lock_guard lock(manifests_mutex);
      auto it = manifests.find(digest);
      if (it == manifests.end()) return std::nullopt;
      tag = it->second.first;
      kept = it->second.second;
    }
    std::vector<std::string> names{std::string(detail::ArtifactArea::kManifest)};
    for (const auto& f : kept->files) names.push_back(f.path);
    auto answers = artifacts->heads(digest, names);
    if (!answers[0].info || answers[0].info->tag != tag) return std::nullopt;
    const std::string label = "artifact " + digest.short_str();
    if (!made_by.empty() && kept->materializer != made_by)
      return label + " was made by " + kept->materializer + ", not " + std::string(made_by);
    for (std::size_t k = 0; k < kept->files.size(); ++k)
      if (auto problem = file_problem(label, kept->files[k], answers[k + 1]); !problem.empty()) return problem;
    for (const auto& child : kept->children) {
      auto problem = quick_problem(child.digest, {}, seen, depth + 1);
      if (!problem) return std::nullopt;
      if (!problem->empty()) return problem;
    }
    if (kept_out) *kept_out = std::move(kept);
    return std::string();
  }

  static constexpr std::size_t kKeptManifests = 4096;
  std::mutex manifests_mutex;
  std::map<Digest, std::pair<std::string, std::shared_ptr<const Manifest>>> manifests;

  ArtifactReader open(std::string_view ref) {
    Digest digest = resolve(ref);
    std::string label = "artifact ";
    label += Digest::is_digest(ref) ? digest.short_str() : std::string(ref) + " (" + digest.short_str() + ")";
    return open(digest, label);
  }

  // Writers are given a SaveSession, readers this store, and readers save
  // nothing; a child saved here all the same is a save of its own (its
  // own session), never one that shares another save's parts.
  Digest save_child(const MaterializerEntry& entry, const void* value, const SaveOptions& options, int depth,
                    std::function<void(std::uint64_t)> progress) override {
    SaveOptions child_options;
    child_options.options = options.options;
    return save(entry, value, child_options, depth, std::move(progress)).digest;
  }

  void claim(const Digest& digest) override {
    auto lease = artifacts->publish_lease();
    if (!artifacts->has(digest)) throw NotFound("no artifact " + digest.str() + " in store " + path.string());
    artifacts->claim(digest);
  }

  // The save of a value the store already holds whole, writing nothing but
  // its name: nullopt when the value (or a child) is not stored.
  std::optional<SaveResult> save_if_stored(const MaterializerEntry& entry, const void* value, const SaveOptions& options,
                                           int depth);

  // What one top-level save's writers save their children through: the
  // store, remembering the parts it has saved (see SaveSession).
  class SaveSession;
  std::shared_ptr<detail::ArtifactContext> new_save_session();

  // Writes, finishes and publishes one artifact, then names it when asked to.
  // Its writer saves children through `context` (a new save session when null).
  SaveResult save(const MaterializerEntry& entry, const void* value, const SaveOptions& options, int depth,
                  std::function<void(std::uint64_t)> progress,
                  std::shared_ptr<detail::ArtifactContext> context = nullptr) {
    if (depth > kMaxChildDepth)
      throw InvalidArgument("value nests child artifacts deeper than " + std::to_string(kMaxChildDepth) +
                            " levels (at materializer " + entry.name + ")");
    std::unique_ptr<ArtifactWriter> writer;
    std::optional<Manifest> finished;
    try {
      if (!context) context = new_save_session();
      writer = detail::ArtifactAccess::writer(artifacts->begin(), options, Manifest::kMinPieceSize, context, depth,
                                              std::move(progress));
      entry.save(value, *writer);
      finished = detail::ArtifactAccess::finish(*writer, entry.name, entry.version);
    } catch (const IoError&) {
      // Saving again what the store holds needs no room for a staged copy:
      // when staging fails (a disk full as the payload is written), the
      // value is saved once more hashing only, and if the store holds that
      // digest whole, the save is that artifact's; else this error stands.
      if (depth > 0) throw;
      writer.reset();  // its staged files go before the second pass
      std::optional<SaveResult> stored;
      try {
        stored = save_if_stored(entry, value, options, 0);
      } catch (const Error&) {
        // not stored, or failing anew: the first error says more
      }
      if (!stored) throw;
      return *stored;
    }
    const Manifest& manifest = *finished;
    const std::string& canonical = detail::ArtifactAccess::canonical_manifest(*writer);
    SaveResult result;
    result.digest = detail::ArtifactAccess::digest(*writer);
    nlohmann::json record;
    if (!options.name.empty()) record = name_record(entry, options, result.digest, manifest);

    // From publishing until the name exists the artifact is unreferenced; the
    // shared lease keeps gc from collecting it in that window, and gc's grace
    // period protects it (and its children) from then on while unnamed.
    auto lease = artifacts->publish_lease();
    for (const auto& child : manifest.children)
      if (!artifacts->has(child.digest))
        throw IoError("child '" + child.role + "' (" + child.digest.str() + ") of the " + entry.name +
                      " being saved was collected before its parent was published: gc ran with a grace period "
                      "shorter than this save; save again, and give gc a longer grace period");
    result.created = detail::ArtifactAccess::publish(*writer, *artifacts, result.digest);
    if (!result.created) {
      if (damaged(result.digest, manifest, canonical)) {
        // The stored copy lost or changed bytes; ours is complete, so it takes
        // its place. One repairer per digest, and only if still damaged once it may.
        auto repair = artifacts->repair_lease(result.digest);
        if (damaged(result.digest, manifest, canonical)) {
          detail::ArtifactAccess::replace(*writer, *artifacts, result.digest);
          result.created = true;
        }
      }
      if (!result.created) artifacts->claim(result.digest);  // saved again: young again
    }
    if (!options.name.empty()) {
      result.name = options.name;
      result.version = names->add(options.name, std::move(record));
    }
    return result;
  }

  // The name record is built and measured before anything is published, so
  // a record the store would refuse (or could not read back) fails the save.
  nlohmann::json name_record(const MaterializerEntry& entry, const SaveOptions& options, const Digest& digest,
                             const Manifest& manifest) const {
    return name_record(entry.name, entry.version, options, digest, manifest);
  }
  nlohmann::json name_record(const std::string& materializer, int materializer_version, const SaveOptions& options,
                             const Digest& digest, const Manifest& manifest) const {
    nlohmann::json record = options.provenance;
    record["name"] = options.name;
    record["digest"] = digest.str();
    record["materializer"] = materializer;
    record["materializer_version"] = materializer_version;
    record["payload_bytes"] = manifest.payload_bytes();
    record["created_at"] = utc_now();
    record["host"] = host_name();
    record["pid"] = ::getpid();
    nlohmann::json measured = record;
    measured["version"] = std::numeric_limits<std::uint64_t>::max();
    std::size_t bytes = measured.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).size() + 1;
    if (bytes > detail::NameIndex::kMaxRecordBytes)
      throw InvalidArgument("the name record for '" + options.name + "' would be " + std::to_string(bytes) +
                            " bytes, more than the limit of " + std::to_string(detail::NameIndex::kMaxRecordBytes) +
                            " (1 MiB); keep SaveOptions::provenance small");
    return record;
  }
};

// The context of one top-level save. A part (ArtifactWriter::save_part)
// whose materializer gives an identity is saved once per save: met again,
// in another field or on another thread at the same time, it is answered
// with the first one's digest. The tensor a model and its checkpoint both
// hold is then written and hashed once, not staged twice, refused once by
// the store as a duplicate and read back to check the stored copy.
class Store::Impl::SaveSession : public detail::ArtifactContext, public std::enable_shared_from_this<SaveSession> {
 public:
  explicit SaveSession(std::shared_ptr<Store::Impl> store) : store_(std::move(store)) {}

  Digest save_child(const MaterializerEntry& entry, const void* value, const SaveOptions& options, int depth,
                    std::function<void(std::uint64_t)> progress) override {
    SaveOptions child_options;
    child_options.options = options.options;
    return store_->save(entry, value, child_options, depth, std::move(progress), shared_from_this()).digest;
  }

  Digest save_part(const MaterializerEntry& entry, const void* value, const SaveOptions& options, int depth,
                   std::function<void(std::uint64_t)> progress) override {
    if (!entry.identity) return save_child(entry, value, options, depth, std::move(progress));
    ValueIdentity identity = entry.identity(value);
    // The C++ type as well as the name: two types may share a materializer
    // name, and their identities need not be comparable.
    std::string key = entry.name + '\n' + entry.type.name() + '\n' + identity.key;
    std::promise<Digest> promise;
    std::shared_future<Digest> saved;
    {
      std::lock_guard lock(mutex_);
      auto [first, last] = parts_.equal_range(key);
      for (auto it = first; it != last && !saved.valid(); ++it)
        if (it->second.options.same_objects(options.options)) saved = it->second.digest;
      if (!saved.valid())
        parts_.emplace(std::move(key), Part{options.options, std::move(identity.owner), promise.get_future().share()});
    }
    if (saved.valid()) return saved.get();  // saved, or being saved by another thread
    try {
      Digest digest = save_child(entry, value, options, depth, std::move(progress));
      promise.set_value(digest);
      return digest;
    } catch (...) {
      promise.set_exception(std::current_exception());
      throw;
    }
  }

  void claim(const Digest& digest) override { store_->claim(digest); }
  ArtifactReader open(const Digest& digest, std::string label, int depth) override {
    return store_->open(digest, std::move(label), depth);
  }

 private:
  struct Part {
    MaterializerOptions options;        // saved with these very options
    std::shared_ptr<const void> owner;  // kept so that no other value takes its address
    std::shared_future<Digest> digest;
  };
  std::shared_ptr<Store::Impl> store_;
  std::mutex mutex_;
  std::multimap<std::string, Part> parts_;
};

namespace {

// A staging area that keeps nothing: for saving a value only to learn its
// digest, which depends on the bytes' hashes, not on where they went.
class DiscardingStaging : public Staging {
  class Nothing : public StagedFile {
   public:
    void write_at(std::uint64_t, ConstBytes) override {}
    void close() override {}
  };

 public:
  std::unique_ptr<StagedFile> create_file(std::string_view) override { return std::make_unique<Nothing>(); }
  bool publish(std::string_view, std::string_view, std::string_view) override {
    throw std::logic_error("a discarding staging area publishes nothing");
  }
  void replace(std::string_view, std::string_view, std::string_view) override {
    throw std::logic_error("a discarding staging area publishes nothing");
  }
};

// Children of a value saved only to learn its digest: each must already be
// stored whole, or the whole save is not a save of stored content.
class StoredOnlyContext : public detail::ArtifactContext {
 public:
  using SaveIfStored =
      std::function<std::optional<SaveResult>(const MaterializerEntry&, const void*, const SaveOptions&, int)>;
  StoredOnlyContext(std::shared_ptr<detail::ArtifactContext> store, SaveIfStored save_if_stored)
      : store_(std::move(store)), save_if_stored_(std::move(save_if_stored)) {}
  Digest save_child(const MaterializerEntry& entry, const void* value, const SaveOptions& options, int depth,
                    std::function<void(std::uint64_t)>) override {
    SaveOptions child_options;
    child_options.options = options.options;
    auto saved = save_if_stored_(entry, value, child_options, depth);
    if (!saved) throw NotFound("a child of the value is not stored");
    return saved->digest;
  }
  void claim(const Digest& digest) override { store_->claim(digest); }
  ArtifactReader open(const Digest& digest, std::string label, int depth) override {
    return store_->open(digest, std::move(label), depth);
  }

 private:
  std::shared_ptr<detail::ArtifactContext> store_;
  SaveIfStored save_if_stored_;
};

}  // namespace

std::shared_ptr<detail::ArtifactContext> Store::Impl::new_save_session() {
  return std::make_shared<SaveSession>(shared_from_this());
}

std::optional<SaveResult> Store::Impl::save_if_stored(const MaterializerEntry& entry, const void* value,
                                                      const SaveOptions& options, int depth) {
  if (depth > kMaxChildDepth) return std::nullopt;
  auto self = shared_from_this();
  auto context = std::make_shared<StoredOnlyContext>(
      self, [self](const MaterializerEntry& e, const void* v, const SaveOptions& o, int d) {
        return self->save_if_stored(e, v, o, d);
      });
  auto writer = detail::ArtifactAccess::writer(std::make_unique<DiscardingStaging>(), options, Manifest::kMinPieceSize,
                                               context, depth);
  entry.save(value, *writer);
  Manifest manifest = detail::ArtifactAccess::finish(*writer, entry.name, entry.version);
  SaveResult result;
  result.digest = detail::ArtifactAccess::digest(*writer);
  nlohmann::json record;
  if (!options.name.empty()) record = name_record(entry, options, result.digest, manifest);
  auto lease = artifacts->publish_lease();
  if (!artifacts->has(result.digest) ||
      damaged(result.digest, manifest, detail::ArtifactAccess::canonical_manifest(*writer)))
    return std::nullopt;
  artifacts->claim(result.digest);  // saved again: young again
  if (!options.name.empty()) {
    result.name = options.name;
    result.version = names->add(options.name, std::move(record));
  }
  return result;
}


Store::Store(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

constexpr int kLayoutVersion = 1;
constexpr const char* kMarker = "amphora-store.json";
constexpr std::size_t kMaxMarkerBytes = 1u << 16;
// What a store keeps in its medium; each must be a folder (a link there
// could aim gc's deletions anywhere).
constexpr const char* kAreas[] = {"objects", "names", "cache", "runs", "claims"};
// Made when a store is created, where the medium has folders, so that a new
// store shows its layout.
constexpr const char* kFolders[] = {"objects/sha256/", "names/", "cache/", "runs/", "claims/"};
constexpr const char* kHowToCreate = "; create one with `amphora init` (from C++: Store::open with .create = true)";

// Reads, or with `create` writes, the store marker (docs/FORMAT.md §1.1)
// and checks the store's own folders.
void open_marker(Medium& medium, bool create) {
  const std::string where = medium.location();
  std::string text;
  try {
    text = medium.get(kMarker, kMaxMarkerBytes);
  } catch (const NotFound&) {
    if (!create) throw NotFound(where + " is not an Amphora store (it has no " + kMarker + ")" + kHowToCreate);
    nlohmann::json doc = {{"format", "amphora-store"}, {"layout_version", kLayoutVersion}};
    for (const char* folder : kFolders) medium.make_folder(folder);
    // The two lock files every save and gc use, made with the layout so
    // that a store's first save does not create them.
    for (const char* lock : {"gc", "names"}) (void)medium.lease(lock, LeaseMode::shared, true);
    medium.put(kMarker, doc.dump(2) + "\n", PutCondition::absent());  // or another process made it first
    text = medium.get(kMarker, kMaxMarkerBytes);
  }
  const std::string marker = where + "/" + kMarker;
  nlohmann::json doc;
  try {
    doc = parse_untrusted_json(text);
  } catch (const CorruptData&) {
    throw CorruptData(marker + " is not valid JSON");
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "amphora-store" ||
      !doc.contains("layout_version") || !doc["layout_version"].is_number_integer())
    throw CorruptData(marker + " is not an Amphora store marker");
  const auto& layout = doc["layout_version"];
  bool newer = layout.is_number_unsigned() ? layout.get<std::uint64_t>() > kLayoutVersion
                                           : layout.get<std::int64_t>() > kLayoutVersion;
  if (newer)
    throw Unsupported("store " + where + " has layout version " + layout.dump() + ", newer than the version " +
                      std::to_string(kLayoutVersion) + " this build understands");
  if (layout.get<std::int64_t>() < 1) throw CorruptData(marker + " has an invalid layout_version " + layout.dump());
  for (const auto& e : list_all(medium, "", true)) {
    std::string_view name = e.key;
    if (name.ends_with('/')) name.remove_suffix(1);
    if (e.kind == ListedEntry::Kind::folder ||
        std::find(std::begin(kAreas), std::end(kAreas), name) == std::end(kAreas))
      continue;
    throw CorruptData(where + ": '" + std::string(name) + "' is " +
                      (e.kind == ListedEntry::Kind::object ? std::string("a regular file") : e.what) +
                      ", not a directory: the store is damaged");
  }
}

}  // namespace

Store Store::open(const fs::path& dir, OpenOptions options) {
  if (!options.medium && options.uri.empty()) {
    if (is_medium_uri(dir.string()))
      options.uri = dir.string();
    else
      options.medium = translated(true, [&] {
        const char* env = std::getenv("AMPHORA_DURABLE");
        bool durable = options.durable || (env && std::string_view(env) == "1");
        try {
          return open_local_medium(dir, options.create, durable);
        } catch (const NotFound& e) {
          throw NotFound(e.what() + std::string(kHowToCreate));
        }
      });
  }
  return open(std::move(options));
}

Store Store::open(OpenOptions options) {
  if (options.medium && !options.uri.empty())
    throw InvalidArgument("Store::open: give OpenOptions::medium or OpenOptions::uri, not both");
  if (!options.medium && options.uri.empty())
    throw InvalidArgument("Store::open: give the store's directory, OpenOptions::medium or OpenOptions::uri");
  auto impl = std::make_shared<Impl>();
  impl->medium = std::move(options.medium);
  if (!impl->medium)
    impl->medium = translated(true, [&] {
      const char* env = std::getenv("AMPHORA_DURABLE");
      return open_medium(options.uri, options.create, options.durable || (env && std::string_view(env) == "1"));
    });
  impl->medium = translated(true, [&] { return detail::guard_medium(std::move(impl->medium)); });
  impl->path = impl->medium->location();
  translated(true, [&] { open_marker(*impl->medium, options.create); });
  impl->artifacts = std::make_shared<const detail::ArtifactArea>(impl->medium);
  impl->names.emplace(impl->medium);
  impl->cache.emplace(impl->medium);
  impl->runs.emplace(impl->medium);
  impl->registry = options.registry ? std::move(options.registry) : translated(true, [] { return Registry::with_defaults(); });
  impl->read_through = options.read_through;
  return Store(std::move(impl));
}

fs::path Store::default_path() {
  if (const char* env = std::getenv("AMPHORA_STORE"); env && *env) return env;
  return ".amphora";
}

const fs::path& Store::path() const { return impl_->path; }

const detail::NameIndex& detail::StoreAccess::names(const Store& store) { return *store.impl_->names; }
const detail::ActionCache& detail::StoreAccess::cache(const Store& store) { return *store.impl_->cache; }
std::optional<std::string> detail::StoreAccess::quick_problem(const Store& store, const Digest& digest,
                                                              std::string_view made_by,
                                                              std::optional<ArtifactReader>* intact) {
  return translated(true, [&] {
    std::set<Digest> seen;
    std::shared_ptr<const Manifest> kept;
    auto problem = store.impl_->quick_problem(digest, made_by, seen, 0, intact ? &kept : nullptr);
    if (intact && kept)
      intact->emplace(detail::ArtifactAccess::reader(store.impl_, store.impl_->artifacts, digest, std::move(kept),
                                                     "artifact " + digest.short_str(), 0));
    return problem;
  });
}
const detail::RunLog& detail::StoreAccess::runs(const Store& store) { return *store.impl_->runs; }
const detail::ArtifactArea& detail::StoreAccess::artifacts(const Store& store) { return *store.impl_->artifacts; }
Registry& Store::registry() const { return *impl_->registry; }
std::shared_ptr<Registry> detail::StoreAccess::registry(const Store& store) { return store.impl_->registry; }

SaveResult Store::save_erased(const MaterializerEntry& entry, const void* value, const SaveOptions& options) {
  return translated(false, [&] {
    if (!options.name.empty()) validate_name(options.name);
    if (!options.provenance.is_object()) throw InvalidArgument("SaveOptions::provenance must be a JSON object");
    validate_storable_json(options.provenance, "SaveOptions::provenance");
    return impl_->save(entry, value, options, 0, {});
  });
}

SaveResult Store::name_artifact(const Digest& digest, std::string_view name, const nlohmann::json& provenance) {
  return detail::StoreAccess::name_artifact(*this, digest, name, provenance, nullptr);
}

SaveResult detail::StoreAccess::name_artifact(Store& store, const Digest& digest, std::string_view name,
                                              const nlohmann::json& provenance, const Manifest* known,
                                              std::optional<std::uint64_t> only_after) {
  return translated(false, [&] {
    return name_artifacts(store, {{digest, std::string(name), provenance, known}}, only_after).front();
  });
}

std::vector<SaveResult> detail::StoreAccess::name_artifacts(Store& store, const std::vector<Naming>& namings,
                                                            std::optional<std::uint64_t> only_after) {
  auto& impl_ = store.impl_;
  if (namings.empty()) return {};  // and no lease: a steady cache hit names nothing
  return translated(false, [&] {
    for (const auto& n : namings) {
      validate_name(n.name);
      if (!n.provenance.is_object()) throw InvalidArgument("provenance must be a JSON object");
      validate_storable_json(n.provenance, "provenance");
    }
    // Held until the names exist, so gc cannot collect an artifact between
    // the check and the record.
    auto lease = impl_->artifacts->publish_lease();
    std::vector<nlohmann::json> records;
    records.reserve(namings.size());
    for (const auto& n : namings) {
      SaveOptions options;
      options.name = n.name;
      options.provenance = n.provenance;
      const auto manifest = n.known ? *n.known : store.open_artifact(n.digest).manifest();
      records.push_back(
          impl_->name_record(manifest.materializer, manifest.materializer_version, options, n.digest, manifest));
    }
    std::vector<SaveResult> results;
    for (std::size_t k = 0; k < namings.size(); ++k) {
      SaveResult& result = results.emplace_back();
      result.digest = namings[k].digest;
      result.name = namings[k].name;
      result.version = impl_->names->add(namings[k].name, std::move(records[k]), only_after);
    }
    return results;
  });
}

SaveResult Store::import_file(const fs::path& file, const SaveOptions& options) {
  // The format's reader or import failing means the file could not be read
  // as what its extension says: the caller's input, not the store.
  try {
    return import_checked(file, options);
  } catch (const Error&) {
    throw;
  } catch (...) {
    detail::rethrow_translated(detail::Blame::input, "cannot import " + file.string());
  }
}

SaveResult Store::import_checked(const fs::path& file, const SaveOptions& options) {
  // Every format reads a regular file: a FIFO would block its reader and a
  // directory or a device is no input. Checked once here, for the formats
  // plugins add as well as the built-in ones. A path through a file names
  // nothing that could ever be read: the argument is wrong, not the disk.
  if (struct stat st {}; ::stat(file.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw InvalidArgument(file.string() + " is not a regular file (" + detail::describe_file_type(st.st_mode) + ")");
  } else if (errno == ENOTDIR) {
    throw InvalidArgument(file.string() + " cannot be read: a component of the path is not a directory");
  }
  const auto format = registry().format_for(file);
  if (!format) {
    std::string known;
    for (const auto& f : registry().formats())
      if (f->read || f->import) known += (known.empty() ? "" : ", ") + f->extension;
    throw Unsupported("cannot import " + file.string() + ": no materializer handles '" + file.extension().string() +
                      "' files (importable: " + (known.empty() ? "none registered" : known) + ")");
  }
  const auto entry = registry().find(format->materializer);
  if (!entry) throw Unsupported("cannot import " + file.string() + ": materializer '" + format->materializer + "' is not registered");
  if (!format->import) {
    const auto value = format->read(file);
    return save_erased(*entry, value.get(), options);
  }
  // The same materializer, saving from the file rather than from a value.
  MaterializerEntry streamed = *entry;
  streamed.save = [&](const void*, ArtifactWriter& out) { format->import(file, out); };
  return save_erased(streamed, &streamed, options);
}

std::shared_ptr<void> Store::load_erased(std::string_view ref, std::string_view expected) const {
  return translated(true, [&] { return load_reader(open_loadable(ref), expected); });
}

std::shared_ptr<void> Store::load_erased(const Digest& digest, std::string_view expected) const {
  return load_erased(std::string_view(digest.str()), expected);
}

std::shared_ptr<void> Store::load_reader(const ArtifactReader& reader, std::string_view expected) const {
  const Manifest& m = reader.manifest();
  auto entry = impl_->registry->find(m.materializer);
  if (!entry) {
    std::string advice = "register it or load the plugin that provides it";
    if (std::string_view(m.materializer).starts_with("amphora.")) {
      advice = "it is one of Amphora's built-ins: link amphora::materializers and include one of its headers, or "
               "call amphora::register_builtins on the store's registry";
    } else if (const char* search_path = std::getenv("AMPHORA_PLUGIN_PATH")) {
      auto providers = plugins_providing(m.materializer, search_path);
      if (!providers.empty())
        advice = "the plugin " + providers.front().string() +
                 " on $AMPHORA_PLUGIN_PATH provides it: load it (Registry::load_plugin or load_env_plugins; "
                 "amphora --plugin PATH)";
    }
    throw Unsupported(reader.label() + " was written by materializer '" + m.materializer + "' (format version " +
                      std::to_string(m.materializer_version) + "), which is not registered; " + advice);
  }
  if (!expected.empty() && entry->name != expected)
    throw TypeMismatch(reader.label() + " holds a '" + m.materializer + "' artifact (" +
                      type_display_name(entry->type) + "), not a '" + std::string(expected) + "'");
  return load_as(reader, *entry);
}

std::shared_ptr<void> Store::load_as(const ArtifactReader& reader, const MaterializerEntry& entry) const {
  return translated(true, [&] {
    const Manifest& m = reader.manifest();
    if (m.materializer != entry.name)
      throw TypeMismatch(reader.label() + " holds a '" + m.materializer + "' artifact, not a '" + entry.name + "' (" +
                        type_display_name(entry.type) + ")");
    reader.require_version(entry.version, entry.origin);
    return entry.load(reader);
  });
}

Digest Store::resolve(std::string_view ref) const {
  return translated(true, [&] { return impl_->resolve(ref); });
}
ArtifactReader Store::open_artifact(std::string_view ref) const {
  return translated(true, [&] {
    try {
      return impl_->open(ref);
    } catch (const NotFound& here) {
      auto through = impl_->read_through_from(*this);
      if (!through.remote) rethrow_missing(through.remotes, here);
      std::string wanted(ref);
      try {
        wanted = impl_->resolve(ref).str();  // a name here for an artifact there (a remote cache hit)
      } catch (const Error&) {
      }
      try {
        return through.remote->open_artifact(wanted);
      } catch (const NotFound& there) {
        throw NotFound(std::string(here.what()) + "; nor on its remote: " + there.what());
      }
    }
  });
}
ArtifactReader Store::open_artifact(const Digest& digest) const { return open_artifact(std::string_view(digest.str())); }

ArtifactReader Store::open_loadable(std::string_view ref) const {
  return translated(true, [&] {
    try {
      return impl_->open(ref);
    } catch (const NotFound& here) {
      auto through = impl_->read_through_from(*this);
      if (!through.remote) rethrow_missing(through.remotes, here);
      // Whole, verified and kept: the next load is local. A NAME@N of the
      // remote's numbering need not exist here: the digest it pulled does.
      // A name this store has for an artifact only the remote holds (a
      // remote cache hit) is pulled by the digest it names here.
      std::string wanted(ref);
      try {
        wanted = impl_->resolve(ref).str();
      } catch (const Error&) {
      }
      Store self(impl_);
      const auto pulled = detail::StoreAccess::pull(self, through.remotes.front().name, *through.remote, {wanted}, {});
      return impl_->open(pulled.roots.front(), "artifact " + pulled.roots.front().short_str());
    }
  });
}

Store::TreeSize Store::tree_size(const Digest& digest, std::uint64_t max_artifacts) const {
  return translated(true, [&] {
    TreeSize size;
    std::set<Digest> seen{digest};
    std::vector<Manifest> pending{impl_->open(digest, "artifact " + digest.short_str()).manifest()};
    while (!pending.empty()) {
      Manifest manifest = std::move(pending.back());
      pending.pop_back();
      size.payload_bytes += manifest.payload_bytes();
      ++size.artifacts;
      for (const auto& child : manifest.children) {
        if (!seen.insert(child.digest).second) continue;
        if (seen.size() > max_artifacts) {
          size.complete = false;
          break;
        }
        try {
          pending.push_back(impl_->open(child.digest, "artifact " + child.digest.short_str()).manifest());
        } catch (const Error&) {
          size.complete = false;
        }
      }
    }
    return size;
  });
}

std::vector<std::string> Store::damage(const ArtifactReader& artifact, bool rehash) const {
  return translated(true, [&] {
    std::vector<std::string> problems;
    std::vector<std::pair<Digest, Manifest>> pending{{artifact.digest(), artifact.manifest()}};
    std::set<Digest> seen;
    while (!pending.empty()) {
      auto [digest, manifest] = std::move(pending.back());
      pending.pop_back();
      if (!seen.insert(digest).second) continue;
      const std::string label = "artifact " + digest.short_str();
      check_files(*impl_->artifacts, digest, manifest, label, rehash, problems);
      for (const auto& child : manifest.children) {
        try {
          pending.emplace_back(child.digest, open_artifact(child.digest).manifest());
        } catch (const Error& e) {
          problems.push_back(label + " child '" + child.role + "': " + e.what());
        }
      }
    }
    return problems;
  });
}

std::vector<std::string> Store::names() const {
  return translated(true, [&] {
    std::vector<std::string> out;
    for (const auto& v : scan_names().versions)
      if (out.empty() || out.back() != v.name) out.push_back(v.name);
    return out;
  });
}

NameScan Store::scan_names(std::optional<std::string_view> name) const {
  return translated(true, [&] { return impl_->scan(name); });
}

std::vector<std::uint64_t> Store::version_numbers(std::string_view name) const {
  return translated(true, [&] {
    validate_name(name);
    return impl_->names->versions(name);
  });
}

std::vector<VersionInfo> Store::versions(std::string_view name) const {
  return translated(true, [&] { return versions_checked(name); });
}

std::vector<VersionInfo> Store::versions_checked(std::string_view name) const {
  validate_name(name);
  auto versions = impl_->names->versions(name);
  if (versions.empty()) throw NotFound("no name '" + std::string(name) + "' in store " + impl_->path.string());
  std::vector<VersionInfo> out;
  for (auto v : versions) {
    VersionInfo info;
    info.name = std::string(name);
    info.version = v;
    info.record = impl_->names->read(name, v);
    info.digest = detail::record_digest(info.record, name, v);
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<VersionInfo> Store::names_of(const Digest& digest, std::vector<std::string>* problems) const {
  return translated(true, [&] {
    auto scan = scan_names();
    std::vector<VersionInfo> out;
    for (auto& info : scan.versions)
      if (info.digest == digest) out.push_back(std::move(info));
    if (problems) problems->insert(problems->end(), scan.problems.begin(), scan.problems.end());
    return out;
  });
}

std::vector<Digest> Store::artifacts() const {
  return translated(true, [&] { return impl_->artifacts->list(); });
}

bool Store::contains(const Digest& digest) const {
  return translated(true, [&] { return impl_->artifacts->has(digest); });
}

std::string Store::location() const { return impl_->path.string(); }

VerifyReport Store::verify(std::optional<std::string_view> ref, const Progress& progress) const {
  return translated(true, [&] { return verify_checked(ref, progress); });
}

VerifyReport Store::verify_checked(std::optional<std::string_view> ref, const Progress& progress) const {
  auto& artifacts = *impl_->artifacts;
  VerifyReport report;
  // A gc may be collecting while the whole store is verified: what it takes
  // away mid-check looks like damage (files gone, a parent's child gone).
  // Before reporting damage, look again holding the lease savers hold
  // (shared with them, exclusive of gc), so a gc running now has finished:
  // an artifact whose folder is gone then was collected, not damaged. Only
  // where damage was seen, and only for that look, so a gc waits little.
  auto gone_after_any_gc = [&](const Digest& d) {
    auto settled = artifacts.publish_lease();
    try {
      artifacts.files(d);  // its folder, manifest or not: a stray folder is damage
      return false;
    } catch (const NotFound&) {
      return true;
    }
  };
  std::set<Digest> named;  // what no gc collects: gone, it is damage
  auto collected = [&](const Digest& d) {
    // REF and what it reaches are asked for by name.
    return !ref && !named.contains(d) && gone_after_any_gc(d);
  };
  std::vector<Digest> digests;
  if (ref) {
    digests.push_back(resolve(*ref));
  } else {
    auto scan = scan_names();
    report.problems = std::move(scan.problems);
    digests = artifacts.list({}, &report.problems);
    std::set<std::string> remote_names;
    for (const auto& r : remotes()) remote_names.insert(r.name);
    for (const auto& info : scan.versions) named.insert(info.digest);
    for (const auto& info : scan.versions) {
      if (artifacts.has(info.digest)) continue;
      // A remote cache hit names its outputs here while they stay on the
      // remote (FORMAT.md §13.4): not damage while that remote is configured.
      const auto on = info.record.find("remote_cache");
      if (on != info.record.end() && on->is_string() && remote_names.contains(on->get<std::string>())) continue;
      // Removed (rm) and then collected (gc) since the names were read?
      if (gone_after_any_gc(info.digest)) {
        try {
          (void)impl_->names->read(info.name, info.version);
        } catch (const NotFound&) {
          continue;
        }
      }
      report.problems.push_back("name " + info.name + "@" + std::to_string(info.version) +
                                " points to missing artifact " + info.digest.str());
    }
  }

  struct Item {
    Digest digest;
    std::optional<Manifest> manifest;
    bool collected = false;  // by a gc since its manifest was read
  };
  std::vector<Item> items;
  std::uint64_t total = 0;
  std::set<Digest> seen(digests.begin(), digests.end());
  std::set<Digest> bad;  // artifacts found damaged, so their parents can say so
  // With a ref, its children (and theirs) join the list as manifests are read.
  for (std::size_t next = 0; next < digests.size(); ++next) {
    const Digest d = digests[next];
    Item item{d, std::nullopt};
    std::string label = "artifact " + d.str();
    const std::size_t problems_before = report.problems.size();
    try {
      std::string bytes;
      try {
        bytes = artifacts.read_manifest(d, Manifest::kMaxBytes);
      } catch (const NotFound&) {
        try {
          artifacts.files(d);
        } catch (const NotFound&) {
          if (!ref) continue;  // collected by a concurrent gc since listed
          throw;
        }
        if (collected(d)) continue;  // its manifest went first
        report.problems.push_back(label + ": directory has no manifest.json (a damaged or stray artifact directory)");
        ++report.artifacts;
        bad.insert(d);
        continue;
      }
      if (Sha256::of(bytes) != d.value()) {
        report.problems.push_back(label + ": manifest.json does not hash to the artifact's digest (found sha256:" +
                                  Sha256::of(bytes).hex() + ")");
      }
      item.manifest = Manifest::parse(bytes, label);
      if (item.manifest->canonical() != bytes) report.problems.push_back(label + ": manifest.json is not in canonical form");
      total += item.manifest->payload_bytes();
      if (ref)
        for (const auto& child : item.manifest->children)
          if (seen.insert(child.digest).second && artifacts.has(child.digest)) digests.push_back(child.digest);
    } catch (const Unsupported& e) {
      report.unsupported.push_back(e.what());
    } catch (const Error& e) {
      report.problems.push_back(e.what());
    }
    if (report.problems.size() != problems_before) bad.insert(d);
    items.push_back(std::move(item));
  }

  std::uint64_t done = 0;
  for (auto& item : items) {
    ++report.artifacts;
    if (!item.manifest) continue;
    const Manifest& m = *item.manifest;
    std::string label = "artifact " + item.digest.str();
    std::size_t before = report.problems.size();
    try {
      check_files(artifacts, item.digest, m, label, true, report.problems, [&](std::uint64_t bytes) {
        done += bytes;
        report.bytes += bytes;
        if (progress) progress(done, total);
      });
    } catch (const Error& e) {
      report.problems.push_back(label + ": " + e.what());
    }
    if (report.problems.size() != before) {
      if (collected(item.digest)) {
        report.problems.resize(before);
        --report.artifacts;
        item.collected = true;
        continue;
      }
      bad.insert(item.digest);
      continue;
    }
    // The bytes are the ones hashed; now whether they mean what the metadata says.
    auto entry = impl_->registry->find(m.materializer);
    if (!entry) {
      ++report.structure_unchecked;
      continue;
    }
    ArtifactReader reader =
        detail::ArtifactAccess::reader(impl_, impl_->artifacts, item.digest, std::make_shared<const Manifest>(m), label);
    try {
      translated(true, [&] {
        reader.require_version(entry->version);
        if (entry->validate)
          entry->validate(reader);
        else
          (void)entry->load(reader);
      });
    } catch (const Unsupported& e) {
      report.unsupported.push_back(e.what());
    } catch (const NotFound& e) {
      if (artifacts.has(item.digest)) {
        report.problems.push_back(e.what());
        bad.insert(item.digest);
      }
    } catch (const Error& e) {
      report.problems.push_back(e.what());
      bad.insert(item.digest);
    }
  }

  // Nesting as loads and exports bound it (FORMAT.md §3.6): the longest
  // chain of children below each artifact, each artifact measured once.
  std::map<Digest, const Manifest*> manifests;
  for (const auto& item : items)
    if (item.manifest && !item.collected) manifests.emplace(item.digest, &*item.manifest);
  std::map<Digest, int> height;
  for (const auto& [root, root_manifest] : manifests) {
    if (height.count(root)) continue;
    // Iterative post-order: a chain ten thousand deep must not exhaust the stack.
    std::vector<std::pair<Digest, std::size_t>> stack{{root, 0}};
    height.emplace(root, -1);  // on the stack
    while (!stack.empty()) {
      auto& [d, next] = stack.back();
      const Manifest* m = manifests.at(d);
      if (next < m->children.size()) {
        const Digest child = m->children[next++].digest;
        if (!manifests.count(child) || height.count(child)) continue;  // missing, measured, or on the stack
        height.emplace(child, -1);
        stack.emplace_back(child, 0);
        continue;
      }
      int h = 0;
      for (const auto& c : m->children)
        if (auto it = height.find(c.digest); it != height.end() && it->second >= 0) h = std::max(h, it->second + 1);
      height[d] = h;
      stack.pop_back();
    }
  }
  for (const auto& [d, h] : height)
    if (h > kMaxChildDepth)
      report.problems.push_back("artifact " + d.str() + ": nests children " + std::to_string(h) +
                                " levels deep, deeper than the " + std::to_string(kMaxChildDepth) +
                                " a reader follows");

  // What `amphora export` writes for a composite must not collide: payload
  // files at their paths, a child with a file format of its own (and no
  // children) as ROLE plus its extension, any other child as directory ROLE.
  for (const auto& [d, m] : manifests) {
    if (m->children.empty()) continue;
    std::map<std::string, std::string> files, folders;  // export path -> what puts it there
    std::vector<std::string> clashes;
    auto folders_above = [&](const std::string& path, const std::string& what) {
      for (auto slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
        const std::string folder = path.substr(0, slash);
        if (auto it = files.find(folder); it != files.end())
          clashes.push_back(what + " needs a directory where " + it->second + " is exported, '" + folder + "'");
        folders.emplace(folder, what);
      }
    };
    auto place = [&](const std::string& path, const std::string& what, bool folder) {
      folders_above(path, what);
      auto& mine = folder ? folders : files;
      auto& other = folder ? files : folders;
      if (auto it = other.find(path); it != other.end())
        clashes.push_back(what + " and " + it->second + " would both be exported as '" + path + "'");
      else if (auto [at, fresh] = mine.emplace(path, what); !fresh && !folder)
        clashes.push_back(what + " and " + at->second + " would both be exported as '" + path + "'");
    };
    for (const auto& f : m->files) place(f.path, "file '" + f.path + "'", false);
    for (const auto& c : m->children) {
      auto child = manifests.find(c.digest);
      std::shared_ptr<const FileFormat> format;
      if (child != manifests.end() && child->second->children.empty())
        format = impl_->registry->format_of(child->second->materializer);
      if (format)
        place(c.role + format->extension, "child '" + c.role + "'", false);
      else
        place(c.role, "child '" + c.role + "'", true);
    }
    for (const auto& clash : clashes) report.problems.push_back("artifact " + d.str() + ": " + clash);
    if (!clashes.empty()) bad.insert(d);
  }

  // A composite is only as whole as its children, and its parents only as
  // whole as it: damage is reported up the tree, one line per parent, in one
  // pass from the damaged and the missing upwards.
  std::map<Digest, std::vector<std::pair<Digest, const std::string*>>> parents;
  std::vector<Digest> upward(bad.begin(), bad.end());
  std::set<Digest> missing;
  for (auto& item : items) {
    if (!item.manifest || item.collected) continue;
    std::vector<Digest> gone;
    for (const auto& child : item.manifest->children)
      if (!artifacts.has(child.digest)) gone.push_back(child.digest);
    if (!gone.empty() && collected(item.digest)) {
      item.collected = true;  // the parent went with its child
      continue;
    }
    for (const auto& child : item.manifest->children) parents[child.digest].emplace_back(item.digest, &child.role);
    for (const auto& child : gone)
      if (missing.insert(child).second) upward.push_back(child);
  }
  std::set<std::pair<Digest, std::string>> reported;
  for (std::size_t next = 0; next < upward.size(); ++next) {
    const Digest child = upward[next];
    auto it = parents.find(child);
    if (it == parents.end()) continue;
    const bool gone = missing.count(child) != 0;
    for (const auto& [parent, role] : it->second) {
      if (!reported.emplace(parent, *role).second) continue;
      report.problems.push_back("artifact " + parent.str() + ": child '" + *role + "' (" + child.str() + ") is " +
                                (gone ? "missing" : "damaged"));
      if (bad.insert(parent).second) upward.push_back(parent);
    }
  }
  return report;
}

GcReport Store::gc(bool dry_run, std::chrono::seconds grace, std::uint64_t keep_last) {
  return translated(true, [&] {
    auto& artifacts = *impl_->artifacts;
    GcReport report;
    auto lease = artifacts.gc_lease();
    auto scan = scan_names();
    if (keep_last > 0 && scan.problems.empty()) {
      std::vector<VersionInfo> kept;
      std::size_t name_end = 0;  // one past the last version of the current name (scan is sorted by name, then version)
      for (std::size_t i = 0; i < scan.versions.size(); ++i) {
        if (i == name_end)
          while (++name_end < scan.versions.size() && scan.versions[name_end].name == scan.versions[i].name) {
          }
        const std::size_t newer = name_end - i - 1;
        if (newer >= keep_last) {
          report.dropped_versions.push_back(scan.versions[i]);  // removed once the kept ones are known sound
        } else {
          kept.push_back(scan.versions[i]);
        }
      }
      scan.versions = std::move(kept);
    }
    if (!scan.problems.empty())
      throw CorruptData("gc refused: the store is inconsistent, and collecting now could delete what an unreadable "
                        "record points at: " + scan.problems.front() +
                        (scan.problems.size() > 1 ? " (and " + std::to_string(scan.problems.size() - 1) + " more)" : "") +
                        "; run `amphora verify`, then repair or remove the bad records");
    const auto all = artifacts.list();
    const auto now = std::chrono::system_clock::now();
    std::set<Digest> live;
    // Everything a root reaches through children stays. From a name, a
    // manifest that cannot be read means unknown children: gc refuses rather
    // than guess. From a young unnamed artifact (a save in progress, say),
    // damage is left for verify to report.
    auto keep_reachable = [&](std::vector<Digest> pending, bool strict) {
      while (!pending.empty()) {
        Digest d = pending.back();
        pending.pop_back();
        if (!live.insert(d).second) continue;
        std::string label = "artifact " + d.str();
        std::optional<Manifest> manifest;
        try {
          auto bytes = artifacts.read_manifest(d, Manifest::kMaxBytes);
          if (Sha256::of(bytes) != d.value()) throw CorruptData(label + ": manifest.json does not hash to the artifact's digest");
          manifest = Manifest::parse(bytes, label);
        } catch (const NotFound&) {
          continue;  // nothing there to delete; verify reports the dangling reference
        } catch (const Error& e) {
          if (!strict) continue;
          throw CorruptData(std::string("gc refused: cannot tell which children a named artifact keeps alive: ") +
                            e.what() + "; run `amphora verify`, then repair it or remove the names that reach it");
        }
        for (const auto& child : manifest->children) pending.push_back(child.digest);
      }
    };
    std::vector<Digest> named;
    for (const auto& info : scan.versions) named.push_back(info.digest);
    keep_reachable(std::move(named), true);
    // Only now, with nothing left to refuse for, do the old versions go: a
    // refusal leaves the store as it found it.
    if (!dry_run)
      for (const auto& v : report.dropped_versions) {
        try {
          impl_->names->remove(v.name, v.version);
        } catch (const NotFound&) {
          // removed meanwhile
        }
      }
    // Cache entries are roots too; after keep_last dropped versions, an
    // entry with an output no kept name reaches is dropped instead.
    std::vector<Digest> cached;
    for (const auto& key : impl_->cache->keys()) {
      std::vector<Digest> outputs;
      try {
        auto entry = impl_->cache->get(key);
        if (!entry) continue;
        for (const auto& [name, digest] : entry->outputs) outputs.push_back(digest);
      } catch (const CorruptData&) {
        continue;  // an unreadable entry is a miss; it keeps nothing alive
      }
      bool reached = std::all_of(outputs.begin(), outputs.end(), [&](const Digest& d) { return live.count(d) > 0; });
      if (keep_last > 0 && !reached) {
        ++report.dropped_cache_entries;
        if (!dry_run) impl_->cache->remove(key);
        continue;
      }
      cached.insert(cached.end(), outputs.begin(), outputs.end());
    }
    keep_reachable(std::move(cached), false);
    std::vector<Digest> young;
    for (const auto& d : all) {
      if (live.count(d)) continue;
      try {
        if (now - artifacts.time(d) < grace) young.push_back(d);
      } catch (const NotFound&) {
      }
    }
    report.young = young.size();
    keep_reachable(std::move(young), false);
    for (const auto& d : all) {
      if (live.count(d)) {
        ++report.kept;
        continue;
      }
      report.removed.push_back(d);
      report.bytes_freed += dry_run ? artifacts.bytes(d) : artifacts.remove(d);
    }
    // A claim older than the grace period protects nothing any more.
    if (!dry_run)
      for (const auto& [d, claimed] : artifacts.claims())
        if (now - claimed >= grace) artifacts.drop_claim(d);
    report.staging = impl_->medium->sweep_staging(dry_run, grace);
    return report;
  });
}

std::vector<VersionInfo> Store::remove(std::string_view name, std::optional<std::uint64_t> version) {
  return translated(true, [&] {
    auto& names = *impl_->names;
    validate_name(name);
    auto versions = names.versions(name);
    if (versions.empty()) throw NotFound("no name '" + std::string(name) + "' in store " + impl_->path.string());
    if (version) {
      if (!std::binary_search(versions.begin(), versions.end(), *version))
        throw NotFound("name '" + std::string(name) + "' has no version " + std::to_string(*version) + " in store " +
                       impl_->path.string() + " (latest is " + std::to_string(versions.back()) + ")");
      versions = {*version};
    }
    std::vector<VersionInfo> removed;
    for (auto v : versions) {
      VersionInfo info;
      info.name = std::string(name);
      info.version = v;
      try {
        info.record = names.read(name, v);
        info.digest = detail::record_digest(info.record, name, v);
      } catch (const CorruptData&) {
        info.record = nullptr;  // removing is how a bad record is got rid of
        info.digest = Digest();
      } catch (const NotFound&) {
        if (version) throw;
        continue;  // removed by someone else since listed
      }
      try {
        names.remove(name, v);
      } catch (const NotFound&) {
        if (version) throw;
        continue;
      }
      removed.push_back(std::move(info));
    }
    return removed;
  });
}

}  // namespace amphora
