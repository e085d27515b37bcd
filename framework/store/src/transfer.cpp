// Push and pull: copying artifacts, with every artifact they reach, from one
// store's medium to another's, then their names. The same copier serves both
// directions, so both keep the same promises:
//  - an artifact found at the destination is trusted with its whole tree (a
//    manifest is only ever published after its files and its children), so
//    the walk stops there;
//  - every byte copied is checked against the source manifest's piece
//    digests before it is written, and nothing of an artifact is published
//    unless all of it matched;
//  - children are published before their parents, each artifact's manifest
//    after its files.
// Work is cut into chunks of whole pieces (at least 8 MiB) copied by `jobs`
// threads, so one large file and many small artifacts both keep every
// connection busy while memory stays at a few chunks per thread.

#include <amphora/store.hpp>
#include <amphora/storage/s3.hpp>

#include "error_boundary.hpp"
#include "io_parallel.hpp"
#include "piece_hash.hpp"
#include "store_access.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <unistd.h>

namespace amphora {

using detail::run_parallel;

namespace {

constexpr std::uint64_t kMinChunk = 8u << 20;
constexpr const char* kRemotesKey = "remotes.json";
constexpr std::size_t kMaxRemotesBytes = 1u << 20;


// One artifact to copy, its source manifest checked against its digest.
struct Item {
  Digest digest;
  std::string manifest_text;
  Manifest manifest;
  std::size_t wave = 0;  // 0 for artifacts with no child to copy; a parent waits for its children's waves
};

// One range of one file: whole pieces, read, checked and written together.
struct Chunk {
  std::size_t item;
  std::size_t file;
  std::uint64_t offset;
  std::uint64_t size;
};

class Copier {
 public:
  Copier(const detail::ArtifactArea& from, const detail::ArtifactArea& to, std::size_t jobs,
         std::function<void(const TransferStatus&)> progress)
      : from_(from), to_(to), jobs_(std::max<std::size_t>(1, jobs)), progress_(std::move(progress)) {}

  // Copies what `roots` reach and the destination lacks; returns how many
  // artifacts were found there already.
  void copy(const std::vector<Digest>& roots, TransferReport& report) {
    plan(roots, report);
    run(report);
  }

 private:
  // Which of `digests` the destination has published. Where several fall in
  // one fan-out folder, one listing of it answers for all (only those it
  // lists need their manifest confirmed); a lone one is one look.
  std::vector<bool> present(const std::vector<Digest>& digests) const {
    std::map<std::string, std::vector<std::size_t>> by_fanout;
    for (std::size_t k = 0; k < digests.size(); ++k) by_fanout[digests[k].hex().substr(0, 2)].push_back(k);
    std::vector<const std::vector<std::size_t>*> groups;
    for (const auto& [fanout, members] : by_fanout) groups.push_back(&members);
    std::vector<char> out(digests.size(), 0);  // not vector<bool>: written from several threads
    run_parallel(groups.size(), jobs_, [&](std::size_t g) {
      const auto& members = *groups[g];
      if (members.size() == 1) {
        out[members[0]] = to_.has(digests[members[0]]);
        return;
      }
      auto listed = to_.list(digests[members[0]].hex().substr(0, 2));
      std::set<Digest> folders(listed.begin(), listed.end());
      for (std::size_t k : members)
        if (folders.count(digests[k])) out[k] = to_.has(digests[k]);
    });
    return std::vector<bool>(out.begin(), out.end());
  }

  Item read_item(const Digest& digest) const {
    Item item;
    item.digest = digest;
    try {
      item.manifest_text = from_.read_manifest(digest, Manifest::kMaxBytes);
    } catch (const NotFound&) {
      throw NotFound("no artifact " + digest.str() + " in store " + from_.location());
    }
    if (Sha256::of(item.manifest_text) != digest.value())
      throw CorruptData(from_.location() + ": the manifest of artifact " + digest.str() +
                        " does not match its digest; nothing of it was copied");
    item.manifest = Manifest::parse(item.manifest_text, from_.location() + ": artifact " + digest.short_str());
    return item;
  }

  void plan(const std::vector<Digest>& roots, TransferReport& report) {
    std::set<Digest> seen(roots.begin(), roots.end());
    std::vector<Digest> frontier;
    for (const auto& d : roots)
      if (std::find(frontier.begin(), frontier.end(), d) == frontier.end()) frontier.push_back(d);
    while (!frontier.empty()) {
      const auto there = present(frontier);
      std::vector<Digest> missing;
      for (std::size_t k = 0; k < frontier.size(); ++k) {
        if (there[k]) ++report.artifacts_present;
        else missing.push_back(frontier[k]);
      }
      std::vector<Item> read(missing.size());
      run_parallel(missing.size(), jobs_, [&](std::size_t k) { read[k] = read_item(missing[k]); });
      std::vector<Digest> next;
      for (auto& item : read) {
        index_[item.digest] = items_.size();
        for (const auto& child : item.manifest.children)
          if (seen.insert(child.digest).second) next.push_back(child.digest);
        items_.push_back(std::move(item));
      }
      frontier = std::move(next);
    }
    place_in_waves();
    for (const auto& item : items_) {
      status_.bytes_total += item.manifest_text.size();
      for (const auto& f : item.manifest.files) status_.bytes_total += f.size;
    }
    status_.artifacts_total = items_.size();
  }

  // A parent goes in the wave after the last of its children's, so children
  // are published before the manifests that name them. Iterative (a hostile
  // source may serve a chain of any length); a cycle is refused.
  void place_in_waves() {
    std::vector<int> state(items_.size(), 0);  // 0 new, 1 on the path, 2 placed
    for (std::size_t root = 0; root < items_.size(); ++root) {
      if (state[root] != 0) continue;
      std::vector<std::pair<std::size_t, std::size_t>> path{{root, 0}};  // (item, next child to look at)
      state[root] = 1;
      while (!path.empty()) {
        const std::size_t k = path.back().first;
        const auto& children = items_[k].manifest.children;
        if (path.back().second < children.size()) {
          auto it = index_.find(children[path.back().second++].digest);
          if (it == index_.end() || state[it->second] == 2) continue;
          if (state[it->second] == 1)
            throw CorruptData(from_.location() + ": artifact " + items_[k].digest.str() +
                              " reaches itself through its children");
          state[it->second] = 1;
          path.emplace_back(it->second, 0);
          continue;
        }
        std::size_t wave = 0;
        for (const auto& child : children)
          if (auto it = index_.find(child.digest); it != index_.end()) wave = std::max(wave, items_[it->second].wave + 1);
        items_[k].wave = wave;
        state[k] = 2;
        path.pop_back();
      }
    }
  }

  // Each artifact being written: its staging area, its files, and how many
  // chunks and files are left before it can be published.
  struct Open {
    std::unique_ptr<Staging> staging;
    std::vector<std::unique_ptr<StagedFile>> files;
    std::vector<std::shared_ptr<RandomAccessFile>> sources;
    std::vector<std::atomic<std::uint64_t>> chunks_left;
    std::atomic<std::size_t> files_left{0};
    std::mutex open_mutex;
  };

  // Artifacts of one wave staged at once: each holds a staging area (a
  // folder and a lock on a local medium) until it is published.
  static constexpr std::size_t kBatch = 64;

  void run(TransferReport& report) {
    std::size_t waves = 0;
    for (const auto& item : items_) waves = std::max(waves, item.wave + 1);
    for (std::size_t wave = 0; wave < waves; ++wave) {
      std::vector<std::size_t> members;
      for (std::size_t k = 0; k < items_.size(); ++k)
        if (items_[k].wave == wave) members.push_back(k);
      for (std::size_t at = 0; at < members.size(); at += kBatch)
        run_batch(std::vector<std::size_t>(members.begin() + static_cast<std::ptrdiff_t>(at),
                                           members.begin() + static_cast<std::ptrdiff_t>(std::min(members.size(), at + kBatch))));
    }
    report.artifacts_copied += items_.size();
    report.bytes_copied += status_.bytes_done;
  }

  void run_batch(const std::vector<std::size_t>& members) {
    std::map<std::size_t, std::unique_ptr<Open>> open;
    std::vector<Chunk> chunks;
    std::vector<std::size_t> bare;  // artifacts without files: published at once
    for (std::size_t k : members) {
      const Item& item = items_[k];
      auto o = std::make_unique<Open>();
      o->staging = to_.medium().begin_staging_at(detail::ArtifactArea::prefix(item.digest));
      o->chunks_left = std::vector<std::atomic<std::uint64_t>>(item.manifest.files.size());
      o->files_left = item.manifest.files.size();
      o->sources.resize(item.manifest.files.size());
      for (std::size_t f = 0; f < item.manifest.files.size(); ++f) {
        const FileEntry& entry = item.manifest.files[f];
        o->files.push_back(o->staging->create_file(entry.path));
        o->files.back()->reserve(entry.size);
        // Whole pieces, at least 8 MiB of them, each read and written in
        // blocks of at most 8 MiB whatever the piece size.
        const std::uint64_t step = std::max<std::uint64_t>(entry.piece_size,
                                                           (kMinChunk + entry.piece_size - 1) / entry.piece_size * entry.piece_size);
        std::uint64_t n = 0;
        for (std::uint64_t at = 0; at < entry.size; at += step, ++n)
          chunks.push_back({k, f, at, std::min(step, entry.size - at)});
        if (entry.size == 0) {
          chunks.push_back({k, f, 0, 0});
          n = 1;
        }
        o->chunks_left[f] = n;
      }
      if (item.manifest.files.empty()) bare.push_back(k);
      open.emplace(k, std::move(o));
    }
    for (std::size_t k : bare) publish(k, *open.at(k));

    // One buffer per thread, reused for every chunk it copies.
    std::mutex buffers_mutex;
    std::vector<std::unique_ptr<std::vector<std::byte>>> spare;
    run_parallel(chunks.size(), jobs_, [&](std::size_t c) {
      std::unique_ptr<std::vector<std::byte>> buffer;
      {
        std::lock_guard lock(buffers_mutex);
        if (!spare.empty()) {
          buffer = std::move(spare.back());
          spare.pop_back();
        }
      }
      if (!buffer) buffer = std::make_unique<std::vector<std::byte>>();
      const Chunk& chunk = chunks[c];
      Open& o = *open.at(chunk.item);
      copy_chunk(chunk, o, *buffer);
      {
        std::lock_guard lock(buffers_mutex);
        spare.push_back(std::move(buffer));
      }
      if (--o.chunks_left[chunk.file] > 0) return;
      o.files[chunk.file]->close();
      {
        std::lock_guard lock(o.open_mutex);
        o.sources[chunk.file].reset();  // a descriptor (or none) only per file being copied
      }
      if (--o.files_left == 0) publish(chunk.item, o);
    });
  }

  // Reads the chunk in blocks, hashing each piece as its bytes pass and
  // writing them to the staged file; a piece that does not match fails the
  // artifact before its file is closed, so nothing of it is published.
  void copy_chunk(const Chunk& chunk, Open& o, std::vector<std::byte>& buffer) {
    const Item& item = items_[chunk.item];
    const FileEntry& entry = item.manifest.files[chunk.file];
    if (chunk.size == 0) {
      if (entry.pieces.front() != Sha256::of(std::string_view()))
        throw CorruptData(mismatch(item, entry, 0));
      return;
    }
    // A file of one chunk is read whole: one request where a medium charges
    // one per call (an object store), rather than a look at its size first.
    if (chunk.offset == 0 && chunk.size == entry.size && entry.size <= kMinChunk) {
      std::string bytes;
      try {
        bytes = from_.medium().get(detail::ArtifactArea::prefix(item.digest) + entry.path, static_cast<std::size_t>(entry.size));
      } catch (const NotFound&) {
        throw CorruptData(from_.location() + ": artifact " + item.digest.str() + " lacks its file '" + entry.path +
                          "'; nothing of it was copied");
      } catch (const CorruptData&) {
        throw CorruptData(from_.location() + ": artifact " + item.digest.str() + ": file '" + entry.path +
                          "' is larger than the " + std::to_string(entry.size) + " bytes its manifest says; nothing of it was copied");
      }
      if (bytes.size() != entry.size)
        throw CorruptData(from_.location() + ": artifact " + item.digest.str() + ": file '" + entry.path + "' is " +
                          std::to_string(bytes.size()) + " bytes, its manifest says " + std::to_string(entry.size) +
                          "; nothing of it was copied");
      for (std::uint64_t piece = 0, at = 0; at < entry.size; ++piece, at += entry.piece_size) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(entry.piece_size, entry.size - at));
        if (piece >= entry.pieces.size() || Sha256::of(bytes.data() + at, n) != entry.pieces[piece])
          throw CorruptData(mismatch(item, entry, piece));
      }
      o.files[chunk.file]->write_at(0, ConstBytes(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
      count_bytes(bytes.size());
      return;
    }
    std::shared_ptr<RandomAccessFile> source;
    {
      std::lock_guard lock(o.open_mutex);
      if (!o.sources[chunk.file]) {
        try {
          o.sources[chunk.file] = from_.open(item.digest, entry.path);
        } catch (const NotFound&) {
          throw CorruptData(from_.location() + ": artifact " + item.digest.str() + " lacks its file '" + entry.path +
                            "'; nothing of it was copied");
        }
        if (o.sources[chunk.file]->size() != entry.size)
          throw CorruptData(from_.location() + ": artifact " + item.digest.str() + ": file '" + entry.path + "' is " +
                            std::to_string(o.sources[chunk.file]->size()) + " bytes, its manifest says " +
                            std::to_string(entry.size) + "; nothing of it was copied");
      }
      source = o.sources[chunk.file];
    }
    buffer.resize(static_cast<std::size_t>(std::min<std::uint64_t>(kMinChunk, chunk.size)));
    StagedFile& to = *o.files[chunk.file];
    // A destination that signs what it sends with its SHA-256 (an object
    // store's parts, when they are these blocks) gets each block's hash from
    // the pass that checks the pieces (two lanes at once where the CPU can).
    const std::uint64_t part = to.hashed_write_size();
    const bool signs_blocks = part != 0 && part == buffer.size() && chunk.offset % part == 0;
    detail::PieceAndBlockHasher hasher(entry.piece_size, entry.size, chunk.offset, signs_blocks);
    const auto check = [&](std::uint64_t piece, const Sha256Value& value) {
      if (piece >= entry.pieces.size() || value != entry.pieces[piece]) throw CorruptData(mismatch(item, entry, piece));
    };
    // Whole blocks, across pieces (128 KiB at the least): one request of up to
    // 8 MiB each from an object store, not one per piece. Each piece is
    // checked before the block that ends it is written.
    for (std::uint64_t at = chunk.offset; at < chunk.offset + chunk.size;) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), chunk.offset + chunk.size - at));
      source->read_at(at, n, buffer.data());
      const ConstBytes block(buffer.data(), n);
      const std::optional<Sha256Value> whole = hasher.update(block, check);
      if (whole && n == part) to.write_hashed_at(at, block, *whole);
      else to.write_at(at, block);
      at += n;
      count_bytes(n);
    }
  }

  void count_bytes(std::uint64_t n) {
    std::lock_guard lock(status_mutex_);
    status_.bytes_done += n;
    if (progress_) progress_(status_);
  }

  std::string mismatch(const Item& item, const FileEntry& entry, std::uint64_t piece) const {
    const std::uint64_t begin = piece * entry.piece_size;
    const std::uint64_t end = std::min(entry.size, begin + entry.piece_size);
    return from_.location() + ": artifact " + item.digest.str() + ": file '" + entry.path + "' piece " +
           std::to_string(piece) + " (bytes " + std::to_string(begin) + " to " +
           std::to_string(end == 0 ? 0 : end - 1) + ") does not match its SHA-256; nothing of the artifact was copied";
  }

  // Publishes the staged artifact. Where the folder is taken: by a complete
  // copy (another writer's), nothing to do; by a damaged or partial one (a
  // manifest-less leftover), it is replaced under the digest's repair lease.
  void publish(std::size_t k, Open& o) {
    const Item& item = items_[k];
    const std::string prefix = detail::ArtifactArea::prefix(item.digest);
    if (!o.staging->publish(prefix, detail::ArtifactArea::kManifest, item.manifest_text) && !to_.has(item.digest)) {
      auto repair = to_.repair_lease(item.digest);
      if (!to_.has(item.digest)) o.staging->replace(prefix, detail::ArtifactArea::kManifest, item.manifest_text);
      if (!to_.has(item.digest))
        throw IoError(to_.location() + ": artifact " + item.digest.str() + " is not there after being published");
    }
    std::lock_guard lock(status_mutex_);
    status_.bytes_done += item.manifest_text.size();
    ++status_.artifacts_done;
    if (progress_) progress_(status_);
  }

  const detail::ArtifactArea& from_;
  const detail::ArtifactArea& to_;
  std::size_t jobs_;
  std::function<void(const TransferStatus&)> progress_;
  std::vector<Item> items_;
  std::map<Digest, std::size_t> index_;
  std::mutex status_mutex_;
  TransferStatus status_;
};

// The remotes record: {"remotes": {NAME: {"url", "endpoint"?, "region"?}}}.
nlohmann::json read_remotes(Medium& medium, std::string* tag) {
  auto info = medium.head(kRemotesKey);
  if (!info) {
    if (tag) tag->clear();
    return nlohmann::json{{"remotes", nlohmann::json::object()}};
  }
  auto doc = detail::read_record(medium, kRemotesKey, kMaxRemotesBytes, "remotes record");
  if (tag) *tag = info->tag;
  if (!doc.contains("remotes") || !doc["remotes"].is_object())
    throw CorruptData(medium.location() + "/" + kRemotesKey + " has no \"remotes\" object");
  return doc;
}

RemoteSpec spec_of(const std::string& name, const nlohmann::json& entry, const std::string& where) {
  if (!entry.is_object() || !entry.contains("url") || !entry["url"].is_string())
    throw CorruptData(where + ": remote '" + name + "' has no \"url\" string");
  RemoteSpec spec;
  spec.name = name;
  spec.url = entry["url"].get<std::string>();
  if (entry.contains("endpoint") && entry["endpoint"].is_string()) spec.endpoint = entry["endpoint"].get<std::string>();
  if (entry.contains("region") && entry["region"].is_string()) spec.region = entry["region"].get<std::string>();
  return spec;
}

// Changes the remotes record with a compare-and-swap, so two changes at
// once are both kept.
void update_remotes(Medium& medium, const std::function<void(nlohmann::json&)>& change) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string tag;
    auto doc = read_remotes(medium, &tag);
    change(doc);
    const std::string text = doc.dump(2) + "\n";
    auto written = medium.put(kRemotesKey, text, tag.empty() ? PutCondition::absent() : PutCondition::matching(tag));
    if (written) return;
  }
  throw IoError(medium.location() + "/" + kRemotesKey + " kept changing while being updated; try again");
}

// The standard fields of a name record, which the destination writes anew.
bool standard_field(const std::string& key) {
  static const std::set<std::string> fields = {"name", "digest", "materializer", "materializer_version",
                                                "payload_bytes", "created_at", "host", "pid", "version"};
  return fields.count(key) > 0;
}

// What the source's record says, for the destination's new record: its
// caller provenance as it was, and where and when the version was made.
nlohmann::json carried_provenance(const VersionInfo& version, const std::string& direction) {
  nlohmann::json provenance = nlohmann::json::object();
  if (version.record.is_object())
    for (const auto& [key, value] : version.record.items())
      if (!standard_field(key) && key != "pushed_from" && key != "pulled_from") provenance[key] = value;
  nlohmann::json origin = {{"version", version.version}};
  if (version.record.is_object()) {
    for (const char* key : {"created_at", "host"})
      if (version.record.contains(key) && version.record[key].is_string()) origin[key] = version.record[key];
  }
  provenance[direction] = origin;
  return provenance;
}

struct NamedRef {
  std::string name;
  std::optional<std::uint64_t> version;  // NAME@N; nullopt for NAME (the latest)
};

// NAME or NAME@N, when `ref` reads as one and the store resolves it so.
std::optional<NamedRef> as_named(const Store& store, std::string_view ref) {
  auto at = ref.find('@');
  std::string name(ref.substr(0, at));
  try {
    validate_name(name);
  } catch (const InvalidArgument&) {
    return std::nullopt;
  }
  if (at != std::string_view::npos) return NamedRef{name, std::stoull(std::string(ref.substr(at + 1)))};
  if (store.version_numbers(name).empty()) return std::nullopt;  // a digest prefix
  return NamedRef{name, std::nullopt};
}

// Records `version` (of the source) at the destination as `to` wants it:
// the latest must end at its digest, or any version must have it.
// Records `versions` (of the source; each with whether it stands for its
// name's latest) at the destination as `to` wants them: a latest must end
// as the destination's latest, any other must be among its versions. Names
// go in parallel, each name's versions in order; the destination's "names"
// lease is held throughout, so every record shares one. Manifests come from
// `near` (the source, when it is the local store) rather than the destination.
void record_names(Store& to, const std::vector<std::pair<VersionInfo, bool>>& versions, const std::string& direction,
                  std::size_t jobs, TransferReport& report, const Store* near) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const std::pair<VersionInfo, bool>*>> by_name;
  for (const auto& v : versions) {
    auto& group = by_name[v.first.name];
    if (group.empty()) order.push_back(v.first.name);
    group.push_back(&v);
  }
  auto numbering = detail::StoreAccess::artifacts(to).medium().lease("names", LeaseMode::shared, true);
  std::mutex report_mutex;
  run_parallel(order.size(), jobs, [&](std::size_t g) {
    const std::string& name = order[g];
    std::vector<Digest> there;  // the destination's versions' digests, oldest first
    for (const auto& v : to.scan_names(name).versions) there.push_back(v.digest);
    for (const auto* entry : by_name[name]) {
      const auto& [version, as_latest] = *entry;
      if (as_latest ? (!there.empty() && there.back() == version.digest)
                    : std::find(there.begin(), there.end(), version.digest) != there.end())
        continue;
      std::optional<Manifest> manifest;
      if (near) manifest = near->open_artifact(version.digest).manifest();
      auto result = detail::StoreAccess::name_artifact(to, version.digest, version.name,
                                                       carried_provenance(version, direction), manifest ? &*manifest : nullptr);
      there.push_back(result.digest);
      VersionInfo added;
      added.name = result.name;
      added.version = result.version;
      added.digest = result.digest;
      std::lock_guard lock(report_mutex);
      report.named.push_back(std::move(added));
    }
  });
  std::sort(report.named.begin(), report.named.end(),
            [](const VersionInfo& a, const VersionInfo& b) { return std::tie(a.name, a.version) < std::tie(b.name, b.version); });
}

}  // namespace

std::vector<RemoteSpec> Store::remotes() const {
  return detail::translate_errors(detail::Blame::stored_data, [&] {
    auto& medium = detail::StoreAccess::artifacts(*this).medium();
    auto doc = read_remotes(medium, nullptr);
    std::vector<RemoteSpec> out;
    for (const auto& [name, entry] : doc["remotes"].items())
      out.push_back(spec_of(name, entry, medium.location() + "/" + kRemotesKey));
    return out;
  });
}

void Store::add_remote(const RemoteSpec& remote) {
  return detail::translate_errors(detail::Blame::stored_data, [&] {
    validate_name(remote.name);
    if (remote.url.starts_with("s3://")) {
      check_s3_url(remote.url);
      if (!remote.endpoint.empty()) check_s3_endpoint(remote.endpoint);
    } else if (remote.url.starts_with("file://")) {
      if (remote.url.size() <= 7 || remote.url[7] != '/')
        throw InvalidArgument("'" + remote.url + "' is not a file URL of an absolute path: write file:///PATH");
      if (!remote.endpoint.empty() || !remote.region.empty())
        throw InvalidArgument("remote '" + remote.name + "' is a file:// remote: --endpoint and --region are for s3:// only");
    } else {
      throw InvalidArgument("remote URL '" + remote.url + "' must be s3://BUCKET/PREFIX or file:///PATH");
    }
    auto& medium = detail::StoreAccess::artifacts(*this).medium();
    update_remotes(medium, [&](nlohmann::json& doc) {
      if (doc["remotes"].contains(remote.name))
        throw InvalidArgument("store " + location() + " has a remote named '" + remote.name +
                              "' already (" + doc["remotes"][remote.name].value("url", "") +
                              "); remove it first with `amphora remote remove " + remote.name + "`");
      nlohmann::json entry = {{"url", remote.url}};
      if (!remote.endpoint.empty()) entry["endpoint"] = remote.endpoint;
      if (!remote.region.empty()) entry["region"] = remote.region;
      doc["remotes"][remote.name] = entry;
    });
  });
}

void Store::remove_remote(std::string_view name) {
  return detail::translate_errors(detail::Blame::stored_data, [&] {
    auto& medium = detail::StoreAccess::artifacts(*this).medium();
    update_remotes(medium, [&](nlohmann::json& doc) {
      if (!doc["remotes"].contains(std::string(name)))
        throw NotFound("store " + location() + " has no remote named '" + std::string(name) + "'");
      doc["remotes"].erase(std::string(name));
    });
  });
}

namespace {

// The remote `name` names among `all` (one reading of remotes.json), or the
// only one when `name` is empty.
const RemoteSpec& chosen_remote(const std::vector<RemoteSpec>& all, std::string_view name, const std::string& location) {
  if (name.empty()) {
    if (all.empty()) throw NotFound("store " + location + " has no remote; add one with `amphora remote add NAME URL`");
    if (all.size() > 1)
      throw InvalidArgument("store " + location + " has " + std::to_string(all.size()) + " remotes (" +
                            detail::remote_names(all) + "): say which with --remote NAME");
    return all.front();
  }
  for (const auto& r : all)
    if (r.name == name) return r;
  throw NotFound("store " + location + " has no remote named '" + std::string(name) + "'");
}

Store open_remote(const Store& self, const RemoteSpec& spec, bool create, std::size_t jobs) {
  Store::OpenOptions options;
  options.create = create;
  options.read_through = false;  // a remote's own remotes are not followed
  options.registry = detail::StoreAccess::registry(self);
  if (spec.url.starts_with("s3://")) {
    S3Options s3;
    s3.endpoint = spec.endpoint;
    s3.region = spec.region;
    s3.max_in_flight = std::max<std::size_t>(1, jobs);
    options.medium = open_s3_medium(spec.url, s3);
  } else {
    options.uri = spec.url;
  }
  try {
    return Store::open(std::move(options));
  } catch (const NotFound& e) {
    throw NotFound("remote '" + spec.name + "' (" + spec.url + ") holds no store yet: push to it first (" + e.what() + ")");
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("remote '" + spec.name + "' (" + spec.url + ") cannot hold a store: " + e.what());
  }
}

}  // namespace

std::string detail::remote_names(const std::vector<RemoteSpec>& remotes) {
  std::string names;
  for (const auto& r : remotes) names += (names.empty() ? "" : ", ") + r.name;
  return names;
}

Store detail::StoreAccess::remote(const Store& store, const RemoteSpec& spec, bool create, std::size_t jobs) {
  return detail::translate_errors(detail::Blame::stored_data, [&] { return open_remote(store, spec, create, jobs); });
}

Store Store::remote_store(std::string_view name, bool create, std::size_t jobs) const {
  return detail::translate_errors(detail::Blame::stored_data, [&] {
    const auto all = remotes();
    return open_remote(*this, chosen_remote(all, name, location()), create, jobs);
  });
}

namespace {

// A push to `remote`, the remote named `remote_name` (opened by the caller
// from the reading of the remotes it chose it in).
TransferReport push_to(const Store& local, const std::string& remote_name, Store& remote,
                       const std::vector<std::string>& refs, const TransferOptions& options) {
  TransferReport report;
  report.remote = remote_name;
  report.location = remote.location();

  // What to send, and the names to record afterwards.
  std::vector<std::pair<VersionInfo, bool>> names;  // (version, as latest)
  if (refs.empty()) {
    auto scan = local.scan_names();
    if (!scan.problems.empty()) throw CorruptData(scan.problems.front());
    std::map<std::string, const VersionInfo*> latest;
    for (const auto& v : scan.versions) latest[v.name] = &v;
    for (const auto& v : scan.versions) names.emplace_back(v, latest[v.name] == &v);
  } else {
    for (const auto& ref : refs) {
      const Digest digest = local.resolve(ref);
      if (auto named = as_named(local, ref)) {
        auto versions = local.versions(named->name);
        for (const auto& v : versions)
          if (named->version ? v.version == *named->version : &v == &versions.back())
            names.emplace_back(v, !named->version.has_value());
      }
      if (std::find(report.roots.begin(), report.roots.end(), digest) == report.roots.end())
        report.roots.push_back(digest);
    }
  }
  for (const auto& [v, latest] : names)
    if (std::find(report.roots.begin(), report.roots.end(), v.digest) == report.roots.end()) report.roots.push_back(v.digest);

  // Held from the first look at the remote until the names exist there, as
  // pull holds the local one: a gc of the remote waits rather than take what
  // this push found there or put there and has not named yet.
  auto lease = detail::StoreAccess::artifacts(remote).publish_lease();
  Copier copier(detail::StoreAccess::artifacts(local), detail::StoreAccess::artifacts(remote), options.jobs,
                options.progress);
  copier.copy(report.roots, report);
  record_names(remote, names, "pushed_from", options.jobs, report, &local);
  return report;
}

// A pull from `remote`, the remote named `remote_name`, as push_to.
TransferReport pull_from(Store& local, const std::string& remote_name, const Store& remote,
                         const std::vector<std::string>& refs, const TransferOptions& options) {
  if (refs.empty()) throw InvalidArgument("pull needs at least one ref: NAME, NAME@N or a digest");
  TransferReport report;
  report.remote = remote_name;
  report.location = remote.location();
  std::vector<std::pair<VersionInfo, bool>> names;
  for (const auto& ref : refs) {
    Digest digest;
    try {
      // A whole digest needs no look: the walk reads its manifest anyway,
      // and says so when it is not there.
      digest = Digest::is_digest(ref) ? Digest::parse(ref) : remote.resolve(ref);
    } catch (const NotFound& e) {
      throw NotFound("remote '" + report.remote + "': " + e.what());
    }
    if (auto named = as_named(remote, ref)) {
      auto versions = remote.versions(named->name);
      for (const auto& v : versions)
        if (named->version ? v.version == *named->version : &v == &versions.back())
          names.emplace_back(v, !named->version.has_value());
    }
    if (std::find(report.roots.begin(), report.roots.end(), digest) == report.roots.end()) report.roots.push_back(digest);
  }
  // Held from the first publish until the names exist: an artifact pulled
  // early in a long pull is not yet named, and gc must not take it.
  auto lease = detail::StoreAccess::artifacts(local).publish_lease();
  Copier copier(detail::StoreAccess::artifacts(remote), detail::StoreAccess::artifacts(local), options.jobs,
                options.progress);
  copier.copy(report.roots, report);
  record_names(local, names, "pulled_from", options.jobs, report, nullptr);
  return report;
}

}  // namespace

// One reading of the remotes both opens the remote and names it in the
// report: another process may add or remove remotes meanwhile.
TransferReport Store::push(const std::vector<std::string>& refs, const TransferOptions& options) {
  return detail::translate_errors(detail::Blame::stored_data, [&] {
    const auto all = remotes();
    const RemoteSpec& spec = chosen_remote(all, options.remote, location());
    Store remote = open_remote(*this, spec, true, options.jobs);
    return push_to(*this, spec.name, remote, refs, options);
  });
}

TransferReport Store::pull(const std::vector<std::string>& refs, const TransferOptions& options) {
  return detail::translate_errors(detail::Blame::stored_data, [&] {
    if (refs.empty()) throw InvalidArgument("pull needs at least one ref: NAME, NAME@N or a digest");
    const auto all = remotes();
    const RemoteSpec& spec = chosen_remote(all, options.remote, location());
    return pull_from(*this, spec.name, open_remote(*this, spec, false, options.jobs), refs, options);
  });
}

TransferReport detail::StoreAccess::push(Store& local, const std::string& remote_name, Store& remote,
                                         const std::vector<std::string>& refs, const TransferOptions& options) {
  return detail::translate_errors(detail::Blame::stored_data,
                                  [&] { return push_to(local, remote_name, remote, refs, options); });
}

TransferReport detail::StoreAccess::pull(Store& local, const std::string& remote_name, const Store& remote,
                                         const std::vector<std::string>& refs, const TransferOptions& options) {
  return detail::translate_errors(detail::Blame::stored_data,
                                  [&] { return pull_from(local, remote_name, remote, refs, options); });
}

}  // namespace amphora
