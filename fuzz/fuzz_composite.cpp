// Composite trees in a crafted store: the input is a small program that
// builds artifacts of the everyday composite materializers (amphora.list,
// amphora.map, amphora.optional, a declared struct) and leaves (tensors,
// strings, JSON, string lists) in an in-memory store, each composite listing
// earlier artifacts as children, so that children are shared, chains run
// deep (past the 64 levels a reader follows), metadata lies about its
// children, roles collide where `amphora export` would write them, and then
// some artifacts are removed or have a payload byte flipped. Then:
//   verify of the last artifact (the root) and of the whole store,
//   `amphora export` of the root (the command line program's own code) into
//   a scratch directory, removed afterwards,
//   typed loads of the root as several C++ types.
// Each must finish with work bounded by what the store holds, counted as
// calls on the store's medium (every object read, looked at, listed or
// mapped):
//   verify            <= kPerArtifact x (artifacts + child entries) + kFixed
//   a typed load      <= kPerArtifact x (the artifacts it can reach: the
//                        tree below the root, unfolded, as deep as the type
//                        nests) + kFixed
//   export            <= verify's bound + kPerArtifact x (the tree it writes:
//                        a child listed twice is written twice, by design)
// so a shared child is never walked once per path where a walk need not
// unfold the tree. Exports whose tree would be beyond kMaxExportTree (up to
// the program's million members) are not run: writing them is the
// documented cost; past a million members export must refuse, and cheaply.
// Every failure must be an exception of the documented types: CorruptData,
// NotFound or Unsupported from loads and export (verify reports problems
// instead of throwing), never std::bad_alloc, std::length_error, another
// std::exception, OutOfResources (memory is not short here), IoError (the
// store is in memory) or InvalidArgument (nothing here is the caller's
// argument). Also: verify of the root reports damage whenever an artifact
// the root reaches was removed or damaged, and an export of a root verify
// finds whole succeeds.

#include <amphora/amphora.hpp>
#include <amphora/describe.hpp>
#include <amphora/error.hpp>
#include <amphora/everyday.hpp>

#include "commands.hpp"
#include "memory_medium.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace fuzz {

struct Node {
  std::string label;
  std::vector<std::vector<float>> rows;
  std::optional<std::map<std::string, std::string>> tags;
};
AMPHORA_MATERIALIZE(Node, "fuzz.node", 1, label, rows, tags)

}  // namespace fuzz

namespace {

namespace fs = std::filesystem;
using amphora::Digest;

constexpr std::uint64_t kPerArtifact = 24;
constexpr std::uint64_t kFixed = 64;
constexpr std::uint64_t kMaxExportTree = 128;
constexpr std::uint64_t kSaturated = std::uint64_t{1} << 40;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_composite: %s\n", what);
  __builtin_trap();
}

// ---------------------------------------------------------------- the medium

// Counts every call on a store's medium; passes each to the in-memory one.
class CountingMedium : public amphora::Medium {
 public:
  explicit CountingMedium(std::shared_ptr<amphora::Medium> inner) : inner_(std::move(inner)) {}
  std::atomic<std::uint64_t> calls{0};
  amphora::Medium& inner() { return *inner_; }

  std::string location() const override { return inner_->location(); }
  std::optional<amphora::ObjectInfo> head(std::string_view key) override { return ++calls, inner_->head(key); }
  std::string get(std::string_view key, std::size_t max_bytes) override { return ++calls, inner_->get(key, max_bytes); }
  std::unique_ptr<amphora::RandomAccessFile> open(std::string_view key) override { return ++calls, inner_->open(key); }
  std::shared_ptr<const amphora::Buffer> map(std::string_view key) override { return ++calls, inner_->map(key); }
  std::optional<amphora::ObjectInfo> put(std::string_view key, std::string_view bytes,
                                         const amphora::PutCondition& condition) override {
    return ++calls, inner_->put(key, bytes, condition);
  }
  bool remove(std::string_view key) override { return ++calls, inner_->remove(key); }
  amphora::ListPage list(std::string_view prefix, std::string_view start_after, bool shallow, std::size_t limit) override {
    return ++calls, inner_->list(prefix, start_after, shallow, limit);
  }
  std::vector<amphora::HeadAnswer> head_each(std::string_view prefix, std::span<const std::string> names) override {
    calls += 1 + names.size();
    return inner_->head_each(prefix, names);
  }
  void make_folder(std::string_view prefix) override { inner_->make_folder(prefix); }
  std::unique_ptr<amphora::Staging> begin_staging() override { return inner_->begin_staging(); }
  std::uint64_t remove_folder(std::string_view prefix, std::string_view marker) override {
    return ++calls, inner_->remove_folder(prefix, marker);
  }
  std::unique_ptr<amphora::Lease> lease(std::string_view name, amphora::LeaseMode mode, bool wait) override {
    return inner_->lease(name, mode, wait);
  }
  amphora::StagingSweep sweep_staging(bool dry_run, std::chrono::seconds grace) override {
    return inner_->sweep_staging(dry_run, grace);
  }

 private:
  std::shared_ptr<amphora::Medium> inner_;
};

// FUZZ_VERBOSE=1: say what each step threw and how much work it took.
const bool verbose = [] {
  const char* v = std::getenv("FUZZ_VERBOSE");
  return v && *v && *v != '0';
}();

// The medium of the input being run, which `amphora export` opens by URI.
std::shared_ptr<CountingMedium> current;

const bool registered = [] {
  amphora::register_medium_scheme("fuzzcomposite", [](const amphora::MediumRequest&) -> std::shared_ptr<amphora::Medium> {
    return current;
  });
  amphora::register_defaults("fuzz.composite", [](amphora::Registry& r) { r.add<fuzz::Node>("fuzz"); });
  return true;
}();

std::string object_prefix(const Digest& d) {
  const std::string hex = d.hex();
  return "objects/sha256/" + hex.substr(0, 2) + "/" + hex + "/";
}

// ---------------------------------------------------------------- the input

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  unsigned byte() { return at_ < size_ ? data_[at_++] : 0; }
  bool done() const { return at_ >= size_; }
  std::string text(std::size_t most) {
    std::size_t n = std::min<std::size_t>(byte() % (most + 1), size_ - std::min(at_, size_));
    std::string s(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return s;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_, at_ = 0;
};

// An artifact as the input describes it, saved through a materializer entry
// that writes exactly these files, metadata and children.
struct Forged {
  std::string materializer;
  int version = 1;
  std::map<std::string, std::string> files{};
  std::map<std::string, std::vector<std::string>> strings{};  // merged strings under each path
  nlohmann::json meta = nlohmann::json::object();
  std::vector<std::pair<std::string, Digest>> children{};
};

std::optional<Digest> save_forged(amphora::Store& store, const Forged& forged) {
  amphora::MaterializerEntry entry;
  entry.name = forged.materializer;
  entry.version = forged.version;
  entry.save = [](const void* v, amphora::ArtifactWriter& out) {
    const auto& f = *static_cast<const Forged*>(v);
    for (const auto& [path, bytes] : f.files) out.write_file(path, std::as_bytes(std::span<const char>(bytes)));
    for (const auto& [path, values] : f.strings) out.write_strings(path, std::span<const std::string>(values));
    for (const auto& [role, digest] : f.children) out.add_child(role, digest);
    out.meta() = f.meta;
  };
  entry.load = [](const amphora::ArtifactReader&) { return std::shared_ptr<void>(); };
  try {
    return store.save_erased(entry, &forged, {}).digest;
  } catch (const amphora::InvalidArgument&) {
    return std::nullopt;  // a path, role or metadata the writer refuses
  }
}

// What the store holds, as the input built it.
struct Built {
  std::vector<Digest> nodes;                       // in the order made (equal ones repeat)
  std::map<Digest, std::vector<Digest>> children;  // as listed, a child once per role
  std::set<Digest> removed, damaged;
  // Payload files whose bytes were flipped, with what they held before:
  // damaged is what still differs once everything is built (a byte flipped
  // twice the same way is whole again; a save of the same value repairs).
  std::map<std::string, std::pair<Digest, std::string>> flipped;
};

void add(Built& b, const Digest& d, std::vector<Digest> children) {
  b.removed.erase(d);  // saved again: published again
  b.nodes.push_back(d);
  b.children.emplace(d, std::move(children));
}

// Artifacts of `b` the tree below `d` holds, unfolded (a child listed twice
// counts twice), `depth` levels of children deep, saturating.
std::uint64_t tree(const Built& b, const Digest& d, int depth, std::map<std::pair<Digest, int>, std::uint64_t>& memo) {
  if (auto it = memo.find({d, depth}); it != memo.end()) return it->second;
  std::uint64_t n = 1;
  auto kids = b.children.find(d);
  if (depth > 0 && kids != b.children.end())
    for (const auto& c : kids->second) n = std::min(kSaturated, n + tree(b, c, depth - 1, memo));
  memo.emplace(std::make_pair(d, depth), n);
  return n;
}

std::set<Digest> reachable(const Built& b, const Digest& root) {
  std::set<Digest> seen{root};
  std::vector<Digest> pending{root};
  while (!pending.empty()) {
    Digest d = pending.back();
    pending.pop_back();
    if (auto it = b.children.find(d); it != b.children.end())
      for (const auto& c : it->second)
        if (seen.insert(c).second) pending.push_back(c);
  }
  return seen;
}

const char* const kRoles[] = {"a", "a.txt", "a.txt/b", "items/0", "items/1", "items/2", "value", "values",
                              "values/0", "values/1", "label", "rows", "tags", "x/y", "a.npy"};
const char* const kMaterializers[] = {"amphora.list", "amphora.map", "amphora.optional", "fuzz.node",
                                      "amphora.tensor", "amphora.string", "amphora.strings", "fuzz.unknown",
                                      "amphora.record_list", "amphora.json"};

Built build(amphora::Store& store, amphora::Medium& medium, Input& in) {
  Built b;
  auto pick = [&]() -> std::optional<Digest> {
    if (b.nodes.empty()) return std::nullopt;
    return b.nodes[in.byte() % b.nodes.size()];
  };
  auto forged = [&](const Forged& f) {
    std::vector<Digest> kids;
    for (const auto& c : f.children) kids.push_back(c.second);
    if (auto d = save_forged(store, f)) add(b, *d, std::move(kids));
  };
  // Children of a list, a map or a struct: `count` picks, most often under
  // the roles the materializer reads, sometimes another.
  // `prefix` alone is the role when not `numbered` (a struct's member).
  auto pick_children = [&](Forged& f, const std::string& prefix, std::size_t count, bool numbered = true) {
    for (std::size_t i = 0; i < count; ++i) {
      auto child = pick();
      if (!child) return;
      const unsigned how = in.byte();
      std::string role = how % 8 == 7 ? kRoles[how / 8 % std::size(kRoles)]
                         : numbered   ? prefix + std::to_string(how % 8 == 6 ? i + 1 : i)
                                      : prefix;
      if (how % 16 == 15) continue;  // a role left out
      f.children.emplace_back(std::move(role), *child);
    }
  };

  for (int ops = 0; ops < 24 && !in.done(); ++ops) {
    const unsigned op = in.byte() % 11;
    try {
      switch (op) {
        case 0: {  // a float32 vector
          std::vector<float> v(in.byte() % 5);
          for (auto& x : v) x = static_cast<float>(static_cast<int>(in.byte()) - 128) / 4;
          add(b, store.save(v).digest, {});
          break;
        }
        case 1:
          add(b, store.save(in.text(12)).digest, {});
          break;
        case 2: {
          const unsigned k = in.byte();
          nlohmann::json j = k % 3 == 0 ? nlohmann::json(k) : k % 3 == 1 ? nlohmann::json("j" + std::to_string(k)) : nlohmann::json::array({k, "x"});
          add(b, store.save(j).digest, {});
          break;
        }
        case 3: {
          std::vector<std::string> v(in.byte() % 4);
          for (auto& s : v) s = in.text(6);
          add(b, store.save(v).digest, {});
          break;
        }
        case 4: {  // amphora.list
          Forged f{"amphora.list"};
          const unsigned n = in.byte() % 7;
          pick_children(f, "items/", n);
          const unsigned lie = in.byte();
          f.meta["count"] = lie % 8 == 7 ? n + 1 : lie % 8 == 6 ? (n ? n - 1 : 0) : n;
          forged(f);
          break;
        }
        case 5: {  // amphora.map of children: keys merged, values/I
          Forged f{"amphora.map"};
          const unsigned n = in.byte() % 6;
          std::vector<std::string> keys;
          for (unsigned i = 0; i < n; ++i) keys.push_back(in.byte() % 8 == 7 ? in.text(3) : "k" + std::to_string(i));
          f.strings["keys"] = keys;
          pick_children(f, "values/", n);
          const unsigned lie = in.byte();
          f.meta["count"] = lie % 8 == 7 ? n + 1 : n;
          f.meta["values"] = lie % 16 == 14 ? "strings" : lie % 16 == 13 ? "array" : "children";
          forged(f);
          break;
        }
        case 6: {  // amphora.optional
          Forged f{"amphora.optional"};
          const unsigned how = in.byte();
          f.meta["engaged"] = how % 4 != 0;
          if (how % 4 != 1)
            if (auto child = pick()) f.children.emplace_back(how % 16 == 15 ? "other" : "value", *child);
          forged(f);
          break;
        }
        case 7: {  // the declared struct: label inline or a child, rows a child, tags maybe
          Forged f{"fuzz.node"};
          const unsigned how = in.byte();
          f.meta["fields"] = nlohmann::json::object();
          if (how & 1) f.meta["fields"]["label"] = "n" + std::to_string(how);
          if (how & 2) pick_children(f, "label", 1, false);
          if (!(how & 4)) pick_children(f, "rows", 1, false);
          if (how & 8) pick_children(f, "tags", 1, false);
          forged(f);
          break;
        }
        case 8: {  // anything: a materializer name and children under any roles
          const unsigned how = in.byte();
          Forged f{kMaterializers[how % std::size(kMaterializers)]};
          f.version = how / 16 % 8 == 7 ? 2 : 1;
          const unsigned n = in.byte() % 5;
          for (unsigned i = 0; i < n; ++i)
            if (auto child = pick()) f.children.emplace_back(kRoles[in.byte() % std::size(kRoles)], *child);
          if (in.byte() % 2) f.meta["count"] = n;
          if (in.byte() % 4 == 0) f.files["a.txt"] = in.text(4);
          forged(f);
          break;
        }
        case 9: {  // a chain of optionals, up to 100 deep, on a picked artifact
          auto below = pick();
          if (!below) break;
          const unsigned length = in.byte() % 101;
          for (unsigned i = 0; i < length; ++i) {
            Forged f{"amphora.optional"};
            f.meta["engaged"] = true;
            f.children.emplace_back("value", *below);
            auto d = save_forged(store, f);
            if (!d) break;
            add(b, *d, {*below});
            below = d;
          }
          break;
        }
        default: {  // damage: remove an artifact, or flip a byte of one of its payload files
          auto victim = pick();
          if (!victim) break;
          const std::string prefix = object_prefix(*victim);
          if (in.byte() % 2 == 0) {
            medium.remove_folder(prefix, "manifest.json");
            b.removed.insert(*victim);
          } else {
            auto page = medium.list(prefix, {}, false);
            std::vector<std::string> files;
            for (const auto& e : page.entries)
              if (!e.key.ends_with("/manifest.json")) files.push_back(e.key);
            if (files.empty()) break;
            const std::string& key = files[in.byte() % files.size()];
            std::string bytes = medium.get(key, 1u << 20);
            if (bytes.empty()) break;
            b.flipped.emplace(key, std::make_pair(*victim, bytes));
            const std::size_t at = in.byte() % bytes.size();
            bytes[at] = static_cast<char>(bytes[at] ^ (1 + in.byte() % 255));
            medium.put(key, bytes, {});
            if (verbose) std::fprintf(stderr, "flipped byte %zu of %s\n", at, key.c_str());
          }
          break;
        }
      }
    } catch (const amphora::NotFound&) {
      // a save that lists a child removed before it: refused, as it should be
    }
  }
  for (const auto& [key, was] : b.flipped)
    if (!b.removed.count(was.first) && medium.head(key) && medium.get(key, 1u << 20) != was.second)
      b.damaged.insert(was.first);
  return b;
}

// ---------------------------------------------------------------- the checks

// Runs `f`, counting the medium's calls, and requires them within `bound`;
// exceptions must be of the types `allowed` lets through.
template <class F>
void bounded(const char* what, std::uint64_t bound, bool allow_invalid_argument, F&& f) {
  const std::uint64_t before = current->calls.load();
  try {
    f();
  } catch (const amphora::OutOfResources& e) {
    std::fprintf(stderr, "%s: %s\n", what, e.what());
    finding("OutOfResources (a bad_alloc or length_error inside, translated)");
  } catch (const amphora::IoError& e) {
    std::fprintf(stderr, "%s: %s\n", what, e.what());
    finding("IoError (the store is in memory: only export's own files touch a disk)");
  } catch (const amphora::InvalidArgument& e) {
    if (!allow_invalid_argument) {
      std::fprintf(stderr, "%s: %s\n", what, e.what());
      finding("InvalidArgument from reading a store");
    }
  } catch (const amphora::CorruptData& e) {
    if (verbose) std::fprintf(stderr, "%s: CorruptData: %s\n", what, e.what());
  } catch (const amphora::NotFound& e) {
    if (verbose) std::fprintf(stderr, "%s: NotFound: %s\n", what, e.what());
  } catch (const amphora::Unsupported& e) {
    if (verbose) std::fprintf(stderr, "%s: Unsupported: %s\n", what, e.what());
  } catch (const amphora::Error& e) {
    std::fprintf(stderr, "%s: %s\n", what, e.what());
    finding("an amphora::Error of no documented subclass");
  }
  const std::uint64_t used = current->calls.load() - before;
  if (verbose) std::fprintf(stderr, "%s: %llu calls on the medium (bound %llu)\n", what, static_cast<unsigned long long>(used),
                            static_cast<unsigned long long>(bound));
  if (used > bound) {
    std::fprintf(stderr, "%s: %llu calls on the medium, more than the bound %llu\n", what,
                 static_cast<unsigned long long>(used), static_cast<unsigned long long>(bound));
    finding("work beyond the bound (a shared child walked once per path?)");
  }
}

fs::path scratch_dir() {
  static const fs::path dir = [] {
    // Under $TMPDIR when set (fuzz/run.sh points it into the build directory).
    std::string tmpl = (fs::temp_directory_path() / "amphora-fuzz-composite-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    return fs::path(tmpl);
  }();
  return dir;
}

template <class T>
void typed_load(amphora::Store& store, const Digest& root, const char* what, std::uint64_t bound) {
  bounded(what, bound, false, [&] {
    T value = store.load<T>(root);
    (void)value;
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)registered;
  auto memory = amphora::testing::make_memory_medium("fuzz composite");
  current = std::make_shared<CountingMedium>(memory);
  amphora::Store store = amphora::Store::open({.create = true, .medium = current});
  Input in(data, size);
  Built b = build(store, *memory, in);
  if (b.nodes.empty()) {
    current.reset();
    return 0;
  }
  const Digest root = b.nodes.back();

  std::uint64_t edges = 0;
  for (const auto& [d, kids] : b.children) edges += kids.size();
  const std::uint64_t artifacts = b.children.size();
  const std::uint64_t verify_bound = kPerArtifact * (artifacts + edges) + kFixed;

  bool whole = false;  // verify of the root ran, found no damage and nothing this build cannot read
  bounded("verify ROOT", verify_bound, false, [&] {
    auto report = store.verify(root.str());
    whole = report.ok() && report.unsupported.empty();
    if (verbose) {
      for (const auto& p : report.problems) std::fprintf(stderr, "  problem: %s\n", p.c_str());
      for (const auto& u : report.unsupported) std::fprintf(stderr, "  unsupported: %s\n", u.c_str());
    }
  });
  if (verbose) {
    std::fprintf(stderr, "root %s; %zu artifacts\n", root.short_str().c_str(), b.children.size());
    for (const auto& d : b.removed) std::fprintf(stderr, "  removed %s\n", d.short_str().c_str());
    for (const auto& d : b.damaged) std::fprintf(stderr, "  damaged %s\n", d.short_str().c_str());
  }
  const bool root_missing = b.removed.count(root) > 0;
  if (root_missing && whole) finding("verify of a removed artifact finds it whole");
  bool harmed = false;
  for (const auto& d : reachable(b, root)) harmed = harmed || b.removed.count(d) || b.damaged.count(d);
  if (harmed && whole) finding("verify of the root misses a removed or damaged artifact below it");
  bounded("verify", verify_bound, false, [&] { (void)store.verify(); });

  std::map<std::pair<Digest, int>, std::uint64_t> memo;
  const std::uint64_t load_bound = kPerArtifact * tree(b, root, 3, memo) + kFixed;
  typed_load<std::vector<std::vector<float>>>(store, root, "load vector<vector<float>>", load_bound);
  typed_load<std::map<std::string, std::optional<std::string>>>(store, root, "load map<string, optional<string>>", load_bound);
  typed_load<std::map<std::string, fuzz::Node>>(store, root, "load map<string, Node>", load_bound);
  typed_load<std::optional<std::vector<std::vector<std::string>>>>(store, root, "load optional<vector<vector<string>>>", load_bound);
  typed_load<fuzz::Node>(store, root, "load Node", load_bound);
  typed_load<std::vector<std::map<std::string, std::vector<float>>>>(store, root, "load vector<map<string, vector<float>>>", load_bound);
  typed_load<nlohmann::json>(store, root, "load json", load_bound);
  typed_load<std::string>(store, root, "load string", load_bound);

  // Export, as `amphora export ROOT DIR` runs it.
  const std::uint64_t export_tree = tree(b, root, amphora::kMaxChildDepth + 1, memo);
  if (export_tree <= kMaxExportTree || export_tree >= kSaturated || export_tree > 2'000'000) {
    amphora::cli::Args args;
    args.store = "fuzzcomposite://fuzz";
    args.ref = root.str();
    // A composite becomes a directory; a value with a file format of its
    // own, that file (its extension says which).
    fs::path out = scratch_dir() / "export";
    if (!root_missing && b.children[root].empty())
      try {
        if (auto format = store.registry().format_of(store.open_artifact(root).manifest().materializer))
          out += format->extension;
      } catch (const amphora::Error&) {
      }
    args.file = out.string();
    std::ostringstream quiet;
    std::streambuf* was = std::cout.rdbuf(quiet.rdbuf());
    bool exported = false;
    bounded("export", verify_bound + kPerArtifact * std::min(export_tree, kMaxExportTree), false,
            [&] { exported = amphora::cli::cmd_export(args) == 0; });
    std::cout.rdbuf(was);
    if (whole && export_tree <= kMaxExportTree && !exported) finding("a root verify finds whole does not export");
    std::error_code ec;
    fs::remove_all(out, ec);
    for (const auto& e : fs::directory_iterator(scratch_dir(), ec)) fs::remove_all(e.path(), ec);
  }
  current.reset();
  return 0;
}
