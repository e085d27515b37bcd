// The `amphora` commands: what each does once its arguments are parsed.

#include "commands.hpp"
#include "output.hpp"

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/table.hpp>
#include <amphora/tensor.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace amphora::cli {

std::shared_ptr<Registry> make_registry(const Args& a) {
  auto registry = Registry::with_defaults();
  registry->load_env_plugins();
  for (const auto& plugin : a.plugins) registry->load_plugin(plugin);
  return registry;
}

Store open_store(const Args& a, bool create) {
  std::filesystem::path dir = a.store ? std::filesystem::path(*a.store) : Store::default_path();
  return Store::open(dir, {.create = create, .registry = make_registry(a), .read_through = !a.no_remote});
}

namespace {

namespace fs = std::filesystem;

// Progress on a terminal only: piped output stays clean.
amphora::Progress terminal_progress(const char* what) {
  if (!::isatty(STDERR_FILENO)) return {};
  return [what](std::uint64_t done, std::uint64_t total) {
    std::fprintf(stderr, "\r%s %s / %s (%3.0f%%)", what, human_bytes(done).c_str(), human_bytes(total).c_str(),
                 total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0);
    if (done >= total) std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  };
}

// Name records are provenance written by any version of any writer: read
// their informational fields leniently (text_field, output.hpp).
std::uint64_t count_field(const nlohmann::json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

nlohmann::json version_json(const amphora::VersionInfo& v) {
  nlohmann::json out = {{"name", v.name},
                        {"version", v.version},
                        {"digest", v.digest.str()},
                        {"materializer", text_field(v.record, "materializer")},
                        {"payload_bytes", count_field(v.record, "payload_bytes")},
                        {"created_at", text_field(v.record, "created_at")}};
  if (auto from = v.record.find("migrated_from"); from != v.record.end() && from->is_object())
    if (auto digest = text_field(*from, "digest"); !digest.empty()) out["migrated_from"] = digest;
  return out;
}

// What `ls` shows as SIZE: the bytes of the whole tree a version names (a
// composite's own payload is often nothing), each shared child once. Falls
// back to the record's own figure when the tree cannot be read (verify
// reports why); `complete` says whether every child was counted.
struct ShownSize {
  std::uint64_t bytes = 0, artifacts = 1;
  bool complete = true;
};
// Manifests `ls` reads to size trees, in all: a store of many names over one
// huge shared tree lists in bounded time (the rest show '>' and their own size).
constexpr std::uint64_t kLsTreeBudget = 200000;

ShownSize shown_size(const Store& store, const amphora::VersionInfo& v, std::uint64_t& budget) {
  try {
    if (budget == 0) return {count_field(v.record, "payload_bytes"), 1, false};
    auto tree = store.tree_size(v.digest, budget);
    budget -= std::min<std::uint64_t>(budget, tree.artifacts);
    return {tree.payload_bytes, tree.artifacts, tree.complete};
  } catch (const amphora::Error&) {
    return {count_field(v.record, "payload_bytes"), 1, false};
  }
}

}  // namespace

int cmd_init(const Args& a) {
  try {
    Store existing = open_store(a, false);
    std::cout << "store " << existing.path().string() << " already exists; nothing changed\n";
    return 0;
  } catch (const amphora::NotFound&) {
  }
  Store store = open_store(a, true);
  std::cout << "initialised store " << store.path().string() << "\n";
  return 0;
}

int cmd_ls(const Args& a) {
  Store store = open_store(a);
  // One unreadable record is reported, not allowed to hide the healthy ones.
  std::optional<std::string_view> only;
  if (a.ref) only = *a.ref;
  auto scan = store.scan_names(only);
  for (const auto& p : scan.problems) warn(p);
  std::vector<amphora::VersionInfo> rows;
  std::map<std::string, std::size_t> version_counts;
  if (!only) {
    for (auto& v : scan.versions) {
      if (!rows.empty() && rows.back().name == v.name) rows.pop_back();
      ++version_counts[v.name];
      rows.push_back(std::move(v));
    }
  } else {
    rows = std::move(scan.versions);
    if (rows.empty() && scan.problems.empty())
      throw amphora::NotFound("no name '" + *a.ref + "' in store " + store.path().string());
  }
  std::uint64_t budget = kLsTreeBudget;
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
      auto j = version_json(r);
      const ShownSize size = shown_size(store, r, budget);
      j["tree_bytes"] = size.bytes;
      j["tree_artifacts"] = size.artifacts;
      j["tree_complete"] = size.complete;
      if (!only) j["versions"] = version_counts[r.name];
      out.push_back(std::move(j));
    }
    std::cout << json_text(out) << "\n";
    return 0;
  }
  if (rows.empty()) {
    if (only)
      std::cout << "(no readable versions of " << *a.ref << ")\n";
    else
      std::cout << "(no names in " << printable(store.path().string()) << ")\n";
    return 0;
  }
  struct Line {
    std::string name, version, digest, materializer, size, created;
  };
  std::vector<Line> lines;
  // Columns as wide as their longest cell, so long names never push the
  // cells after them out of line.
  std::size_t name_width = 4, materializer_width = 12;
  for (const auto& r : rows) {
    const ShownSize size = shown_size(store, r, budget);
    Line l{printable(r.name), std::to_string(r.version), r.digest.short_str(),
           printable(text_field(r.record, "materializer")), (size.complete ? "" : ">") + human_bytes(size.bytes),
           printable(text_field(r.record, "created_at"))};
    if (!only && version_counts[r.name] > 1) l.version.append(1, '/').append(std::to_string(version_counts[r.name]));
    name_width = std::max(name_width, l.name.size());
    materializer_width = std::max(materializer_width, l.materializer.size());
    lines.push_back(std::move(l));
  }
  auto print = [&](const Line& l) {
    std::printf("%-*s  %-8s %-20s %-*s %10s  %s\n", static_cast<int>(name_width), l.name.c_str(), l.version.c_str(),
                l.digest.c_str(), static_cast<int>(materializer_width), l.materializer.c_str(), l.size.c_str(),
                l.created.c_str());
  };
  print({"NAME", "VERSION", "DIGEST", "MATERIALIZER", "SIZE", "CREATED"});
  for (const auto& l : lines) print(l);
  return 0;
}

namespace {

// Each child by role, with its materializer (null when the child is missing
// or unreadable: verify says why).
nlohmann::json children_json(const Store& store, const amphora::Manifest& m) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : m.children) {
    nlohmann::json materializer = nullptr;
    try {
      materializer = store.open_artifact(c.digest).manifest().materializer;
    } catch (const amphora::Error&) {
    }
    out.push_back({{"role", c.role}, {"digest", c.digest.str()}, {"materializer", materializer}});
  }
  return out;
}

}  // namespace

namespace {

// The metadata as `show` prints it for reading: a table's timestamp
// statistics as ISO 8601 rather than nanoseconds (--json keeps the numbers).
nlohmann::json shown_meta(const amphora::Manifest& m) {
  nlohmann::json meta = m.meta;
  if (m.materializer != amphora::materializer<amphora::Table>::name || !meta.contains("columns") ||
      !meta["columns"].is_array())
    return meta;
  for (auto& column : meta["columns"]) {
    const auto type = column.is_object() ? column.value("type", nlohmann::json()) : nlohmann::json();
    if (type != "timestamp[ns]" && type != "naive_timestamp[ns]") continue;
    for (const char* key : {"min", "max"})
      if (column.contains(key) && column[key].is_number_integer())
        column[key] = amphora::timestamp_text(column[key].get<std::int64_t>(), type == "timestamp[ns]");
  }
  return meta;
}

// For a tensor, its payload encoding in words, and for `auto` what the
// sample showed; nullopt for anything else or metadata of another shape.
std::optional<std::string> tensor_encoding_line(const amphora::Manifest& m) {
  if (m.materializer != amphora::materializer<amphora::Tensor>::name || !m.meta.is_object()) return std::nullopt;
  const auto encoding = m.meta.value("encoding", nlohmann::json());
  if (!encoding.is_string()) return std::nullopt;
  std::string name = encoding.get<std::string>();
  std::string words;
  auto take = [&](std::string_view prefix, std::string_view said) {
    if (!name.starts_with(prefix)) return;
    name.erase(0, prefix.size());
    words += std::string(said);
  };
  take("encoded.", "transforms of its recipe, then ");
  take("delta.", "differences of integers chunk by chunk, ");
  take("shuffled.", "byte planes chunk by chunk, ");
  // The chunk size the writer chose (1 MiB for LZ4, 256 KiB for zstd today).
  const auto chunk = m.meta.value("chunk_bytes", nlohmann::json());
  std::string in_chunks;
  if (chunk.is_number_unsigned() && chunk.get<std::uint64_t>() >= 1024) {
    const std::uint64_t bytes = chunk.get<std::uint64_t>();
    in_chunks = bytes % (1u << 20) == 0 ? " in " + std::to_string(bytes >> 20) + " MiB chunks"
                                        : " in " + std::to_string(bytes >> 10) + " KiB chunks";
  }
  words += name == "npy.lz4"   ? "LZ4" + in_chunks
           : name == "npy.zst" ? "zstd" + in_chunks +
                                     (m.meta.contains("zstd_level") ? " at level " + m.meta["zstd_level"].dump() : "")
           : name == "npy"     ? "uncompressed"
                               : printable(name);
  std::string line = printable(encoding.get<std::string>()) + " (" + words + ")";
  const auto sample = m.meta.value("auto", nlohmann::json());
  if (sample.is_object() && sample.value("sample_bytes", 0.0) > 0 && sample.value("lz4", -1.0) >= 0) {
    const double raw = sample["sample_bytes"].get<double>();
    char buf[160];
    std::snprintf(buf, sizeof buf, "; chosen by auto: LZ4 took a %.0f KiB sample to %.0f%%", raw / 1024,
                  100 * sample["lz4"].get<double>() / raw);
    line += buf;
    if (sample.contains("shuffled_lz4") && sample["shuffled_lz4"].is_number()) {
      std::snprintf(buf, sizeof buf, ", its byte planes to %.0f%%", 100 * sample["shuffled_lz4"].get<double>() / raw);
      line += buf;
    }
    if (sample.contains("delta_lz4") && sample["delta_lz4"].is_number()) {
      std::snprintf(buf, sizeof buf, ", its differences to %.0f%%", 100 * sample["delta_lz4"].get<double>() / raw);
      line += buf;
    }
  }
  return line;
}

}  // namespace

int cmd_show(const Args& a) {
  Store store = open_store(a);
  amphora::ArtifactReader reader = store.open_artifact(*a.ref);
  const auto& m = reader.manifest();
  std::vector<std::string> names, problems;
  for (const auto& v : store.names_of(reader.digest(), &problems)) names.push_back(v.name + "@" + std::to_string(v.version));
  for (const auto& p : problems) warn(p);
  auto registered = store.registry().find(m.materializer);
  if (a.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : m.files) {
      nlohmann::json pieces = nlohmann::json::array();
      for (const auto& p : f.pieces) pieces.push_back(p.hex());
      files.push_back({{"path", f.path}, {"size", f.size}, {"piece_size", f.piece_size}, {"sha256", pieces}});
    }
    nlohmann::json out = {{"digest", reader.digest().str()},
                          {"materializer", {{"name", m.materializer}, {"version", m.materializer_version}}},
                          {"registered", registered != nullptr},
                          {"names", names},
                          {"payload_bytes", m.payload_bytes()},
                          {"files", files},
                          {"children", children_json(store, m)},
                          {"meta", m.meta}};
    std::cout << json_text(out) << "\n";
    return 0;
  }
  std::cout << "digest        " << reader.digest().str() << "\n";
  std::cout << "materializer  " << printable(m.materializer) << " (format " << m.materializer_version << ")"
            << (registered ? "" : "  [not registered: loading it needs the plugin that provides it (--plugin PATH)]") << "\n";
  std::cout << "names         ";
  for (std::size_t i = 0; i < names.size(); ++i) std::cout << (i ? ", " : "") << names[i];
  std::cout << (names.empty() ? "(none)" : "") << "\n";
  std::cout << "payload       " << human_bytes(m.payload_bytes()) << " in " << m.files.size() << " file"
            << (m.files.size() == 1 ? "" : "s") << "\n";
  for (const auto& f : m.files)
    std::printf("  %-28s %14llu bytes  %zu piece%s\n", printable(f.path).c_str(), static_cast<unsigned long long>(f.size),
                f.pieces.size(), f.pieces.size() == 1 ? "" : "s");
  if (!m.children.empty()) {
    std::cout << "children      " << m.children.size() << "\n";
    for (const auto& c : children_json(store, m))
      std::printf("  %-28s %s  %s\n", printable(c["role"].get<std::string>()).c_str(),
                  c["digest"].get<std::string>().c_str(),
                  c["materializer"].is_string() ? printable(c["materializer"].get<std::string>()).c_str() : "(missing)");
  }
  if (auto line = tensor_encoding_line(m)) std::cout << "encoding      " << *line << "\n";
  std::cout << "meta\n";
  std::string meta = shown_meta(m).dump(2);
  std::size_t start = 0;
  while (start < meta.size()) {
    auto end = meta.find('\n', start);
    if (end == std::string::npos) end = meta.size();
    std::cout << "  " << printable(meta.substr(start, end - start)) << "\n";
    start = end + 1;
  }
  return 0;
}

int cmd_import(const Args& a) {
  amphora::SaveOptions options;
  options.name = a.name;
  amphora::validate_name(options.name);
  amphora::TensorOptions tensor{.compression = amphora::parse_compression(a.compress), .level = a.level};
  for (const auto& transform : a.encode) {
    (transform == "decimal" ? tensor.encoding.decimal
     : transform == "delta" ? tensor.encoding.delta
     : transform == "squeeze" ? tensor.encoding.squeeze
                              : tensor.encoding.shuffle) = true;
  }
  options.options = tensor;
  Store store = open_store(a);
  fs::path file = a.file;
  // A path need not be UTF-8; provenance must be, so odd bytes become U+FFFD.
  options.provenance = {{"imported_from", nlohmann::json::parse(nlohmann::json(fs::absolute(file).string())
                                                                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))}};
  if (auto show = terminal_progress("importing")) {
    std::error_code error;
    const std::uint64_t total = fs::file_size(file, error);
    if (!error) options.progress = [show, total](std::uint64_t done) { show(std::min(done, total), total); };
  }
  auto result = store.import_file(file, options);
  if (options.progress) options.progress(~std::uint64_t{0});  // clears the progress line
  std::cout << "imported " << file.string() << " as " << result.name << "@" << result.version << " ("
            << result.digest.str() << ")" << (result.created ? "" : " [identical content was already stored]")
            << "\n";
  return 0;
}

namespace {

// What is at an export destination, or nothing. A path through a file can
// never be written: an invalid argument, as for import.
std::optional<struct stat> destination_status(const fs::path& file) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0) return st;
  if (errno == ENOTDIR)
    throw amphora::InvalidArgument(file.string() + " cannot be written: a component of the path is not a directory");
  return std::nullopt;
}

// The destination may be replaced only if it is a regular file, or, with
// --force, a symbolic link (the link is replaced; its target is untouched).
// A FIFO, device, socket or directory is never replaced.
void check_destination(const fs::path& file, bool force) {
  const auto status = destination_status(file);
  if (!status) return;
  const struct stat& st = *status;
  if (S_ISREG(st.st_mode)) return;
  if (S_ISLNK(st.st_mode)) {
    if (force) return;
    throw amphora::InvalidArgument(file.string() + " is a symbolic link; refusing to replace it (pass --force to "
                                   "replace the link itself; its target is left alone)");
  }
  const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  throw amphora::InvalidArgument(file.string() + " exists and is " + kind + "; export replaces only a regular file" +
                                 (force ? " (or, with --force, a symbolic link)" : ""));
}

}  // namespace

namespace {

// A composite is exported as a tree: a child listed under several parents is
// written once per place. The tree's size is counted first, once per distinct
// artifact, and refused past this many members (files and directories).
constexpr std::uint64_t kMaxExportMembers = 1'000'000;

// Members the export of `reader` would write, counted once per distinct
// artifact and capped just past the limit.
std::uint64_t export_members(const amphora::ArtifactReader& reader, std::map<amphora::Digest, std::uint64_t>& counted) {
  if (auto it = counted.find(reader.digest()); it != counted.end()) return it->second;
  std::uint64_t n = 2 + reader.manifest().files.size();  // its directory, manifest.json and payload files
  for (const auto& c : reader.children()) {
    n += export_members(reader.open_child(c.role), counted);
    if (n > kMaxExportMembers) break;
  }
  n = std::min(n, kMaxExportMembers + 1);
  counted.emplace(reader.digest(), n);
  return n;
}

// Set by SIGINT, SIGTERM or SIGHUP while an export is written: it stops at
// the next member and removes what it wrote.
volatile std::sig_atomic_t export_interrupted = 0;
extern "C" void stop_export(int signal) { export_interrupted = signal; }

void write_bytes(const fs::path& to, ConstBytes bytes) {
  fs::create_directories(to.parent_path());
  amphora::write_file_atomically(to, std::span<const ConstBytes>(&bytes, 1));
}

// Writes `reader` into directory `dir` (created): its manifest.json, its
// payload files, and each child at its role, in the child's own file format
// when it has one and no children of its own, else as a directory the same way.
void export_tree(const Store& store, const amphora::ArtifactReader& reader, const fs::path& dir) {
  if (export_interrupted) throw amphora::Error("export interrupted by signal " + std::to_string(export_interrupted));
  fs::create_directories(dir);
  const std::string manifest = reader.manifest().canonical();
  write_bytes(dir / "manifest.json", std::as_bytes(std::span<const char>(manifest)));
  // Mapped, not read into memory: the artifact was verified just before, and
  // a payload may be as large as the disk.
  for (const auto& f : reader.manifest().files) write_bytes(dir / f.path, reader.map(f.path)->bytes());
  for (const auto& c : reader.children()) {
    amphora::ArtifactReader child = reader.open_child(c.role);
    auto format = store.registry().format_of(child.manifest().materializer);
    if (format && child.children().empty()) {
      fs::path to = dir / (c.role + format->extension);
      fs::create_directories(to.parent_path());
      if (fs::exists(fs::symlink_status(to))) throw amphora::CorruptData(reader.label() + ": child '" + c.role + "' would overwrite " + to.string());
      auto value = store.load_erased(child.digest(), child.manifest().materializer);
      format->write(value.get(), to);
    } else {
      // Two members at one path (a child `a` written as a.txt beside a child
      // `a.txt`) are damage verify reports; never an error from the file system.
      if (fs::exists(fs::symlink_status(dir / c.role)))
        throw amphora::CorruptData(reader.label() + ": child '" + c.role + "' would overwrite " + (dir / c.role).string());
      export_tree(store, child, dir / c.role);
    }
  }
}

}  // namespace

int cmd_export(const Args& a) {
  Store store = open_store(a);
  fs::path file = a.file;
  amphora::ArtifactReader reader = store.open_artifact(*a.ref);
  auto native = store.registry().format_of(reader.manifest().materializer);
  if (!reader.children().empty() || !native) {
    // A composite (or a value without a file format of its own) becomes a
    // directory, built beside FILE and renamed into place whole; never one
    // named like a file of a format that does not apply (out.jsonl).
    if (auto claimed = store.registry().format_for(file))
      throw amphora::Unsupported("cannot export " + reader.label() + " (" + reader.manifest().materializer + ") to " +
                                 file.string() + ": that names a " + claimed->extension + " file, and " +
                                 (native ? "it has children, so it is exported as a directory"
                                         : "it has no single-file form, only a directory") +
                                 "; give a path without that extension");
    auto refuse_existing = [&] {
      return amphora::InvalidArgument(file.string() + " exists; " + reader.label() + " is exported as a new directory");
    };
    if (destination_status(file)) throw refuse_existing();
    auto report = store.verify(reader.digest().str());
    if (!report.ok()) throw amphora::CorruptData(report.problems.front());
    std::map<amphora::Digest, std::uint64_t> counted;
    if (export_members(reader, counted) > kMaxExportMembers)
      throw amphora::Unsupported("exporting " + reader.label() + " would write more than " +
                                 std::to_string(kMaxExportMembers) + " files and directories (a child listed under "
                                 "several parents is written at each place; " + std::to_string(counted.size()) +
                                 " distinct artifacts)");
    fs::path staging = file;
    staging += ".amphora-export-" + std::to_string(::getpid());
    fs::remove_all(staging);
    struct sigaction stop {}, before[3];
    stop.sa_handler = stop_export;
    ::sigemptyset(&stop.sa_mask);
    const int signals[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int k = 0; k < 3; ++k) ::sigaction(signals[k], &stop, &before[k]);
    auto restore = [&] {
      for (int k = 0; k < 3; ++k) ::sigaction(signals[k], &before[k], nullptr);
    };
    try {
      // Beside FILE, whose directory must exist, as for a single file.
      if (std::error_code ec; !fs::create_directory(staging, ec) && ec)
        throw amphora::IoError("cannot export to " + file.string() + ": " + ec.message());
      export_tree(store, reader, staging);
      // Never over what appeared at FILE meanwhile, not even an empty directory.
      if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, file.c_str(), RENAME_NOREPLACE) != 0) {
        const int err = errno;
        if (err == EEXIST) throw refuse_existing();
        if (err != EINVAL && err != ENOSYS && err != EOPNOTSUPP)
          throw amphora::IoError("cannot export to " + file.string() + ": " + std::strerror(err));
        // A file system without RENAME_NOREPLACE: checked, then renamed.
        if (destination_status(file)) throw refuse_existing();
        fs::rename(staging, file);
      }
      restore();
    } catch (...) {
      std::error_code ec;
      fs::remove_all(staging, ec);
      restore();
      // Ended by a signal: cleaned up, the process ends as the signal says.
      if (export_interrupted) ::raise(export_interrupted);
      throw;
    }
    std::cout << "exported " << reader.label() << " to directory " << file.string() << " (" << reader.children().size()
              << " member" << (reader.children().size() == 1 ? "" : "s") << ")\n";
    return 0;
  }
  check_destination(file, a.force);
  auto format = store.registry().format_for(file);
  if (!format || format->materializer != reader.manifest().materializer) {
    throw amphora::Unsupported("cannot export " + reader.label() + " (" + reader.manifest().materializer + ") to " +
                               file.string() +
                               (native ? ": use a '" + native->extension + "' file" : ": no exporter for it"));
  }
  // Loading validates structure only; a damaged payload must not leave here as a good file.
  auto report = store.verify(reader.digest().str());
  if (!report.ok()) throw amphora::CorruptData(report.problems.front());
  auto value = store.load_erased(reader.digest().str(), format->materializer);
  check_destination(file, a.force);  // again: it may have appeared meanwhile
  format->write(value.get(), file);
  std::cout << "exported " << reader.label() << " to " << file.string() << "\n";
  return 0;
}

int cmd_verify(const Args& a) {
  Store store = open_store(a);
  std::optional<std::string_view> ref;
  if (a.ref) ref = *a.ref;
  auto report = store.verify(ref, terminal_progress("verifying"));
  for (const auto& p : report.problems) std::cout << "problem: " << one_line(p) << "\n";
  for (const auto& u : report.unsupported) std::cout << "unsupported: " << one_line(u) << "\n";
  if (!report.ok()) {
    std::size_t more = report.problems.size() - 1;
    std::cerr << "amphora: verify failed: " << one_line(report.problems.front());
    if (more) std::cerr << " (and " << more << " more problem" << (more == 1 ? "" : "s") << ", listed on standard output)";
    std::cerr << "\n";
    return 4;
  }
  if (!report.unsupported.empty()) {
    std::cerr << "amphora: error: cannot verify " << report.unsupported.size() << " artifact"
              << (report.unsupported.size() == 1 ? "" : "s") << " this build does not understand: "
              << one_line(report.unsupported.front()) << "\n";
    return 1;
  }
  std::cout << "verified " << report.artifacts << " artifact" << (report.artifacts == 1 ? "" : "s") << " ("
            << human_bytes(report.bytes) << "): all intact";
  if (report.structure_unchecked)
    std::cout << " (" << report.structure_unchecked << " of unregistered materializers: hashes checked, structure not)";
  std::cout << "\n";
  return 0;
}

int cmd_gc(const Args& a) {
  Store local = open_store(a);
  const bool remote = !a.remote.empty();
  Store store = remote ? local.remote_store(a.remote) : local;
  bool dry = a.dry_run;
  const std::chrono::seconds grace =
      a.grace.empty() ? (remote ? std::chrono::seconds(7 * 86400) : Store::kDefaultGcGrace) : parse_duration(a.grace);
  auto report = store.gc(dry, grace, a.keep_last);
  if (remote) std::cout << "remote " << printable(a.remote) << " (" << printable(store.location()) << "): ";
  if (a.keep_last > 0) {
    std::cout << (dry ? "would drop " : "dropped ") << count_of(report.dropped_versions.size(), "name version", "name versions")
              << " older than the last " << a.keep_last << " and "
              << count_of(report.dropped_cache_entries, "cache entry", "cache entries") << " only they reached\n";
    if (dry)
      for (const auto& v : report.dropped_versions) std::cout << "  " << printable(v.name) << "@" << v.version << "\n";
  }
  std::cout << (dry ? "would remove " : "removed ") << report.removed.size() << " artifact"
            << (report.removed.size() == 1 ? "" : "s") << " (" << human_bytes(report.bytes_freed) << ") and "
            << report.staging.removed << (remote ? " unfinished upload" : " stale staging area")
            << (report.staging.removed == 1 ? "" : "s") << "; kept " << report.kept;
  if (report.young > 0)
    std::cout << " (" << report.young << " unnamed, saved less than " << duration_text(grace)
              << " ago: --grace 0 collects them when no save is running)";
  std::cout << "\n";
  if (dry)
    for (const auto& d : report.removed) std::cout << "  " << d.str() << "\n";
  return 0;
}

namespace {

// "NAME" or "NAME@N", as rm takes it.
std::pair<std::string, std::optional<std::uint64_t>> name_and_version(const std::string& ref) {
  auto at = ref.find('@');
  std::string name = ref.substr(0, at);
  if (at == std::string::npos) {
    amphora::validate_name(name);
    return {name, std::nullopt};
  }
  try {
    amphora::validate_name(name);
  } catch (const amphora::InvalidArgument& e) {
    throw amphora::InvalidArgument("invalid ref '" + ref + "': " + e.what());
  }
  std::string text = ref.substr(at + 1);
  std::uint64_t version = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (err != std::errc() || end != text.data() + text.size() || version == 0)
    throw amphora::InvalidArgument("invalid version in '" + ref + "': expected NAME or NAME@N with N >= 1");
  return {name, version};
}

// On a terminal, asks on standard error; anything but y or yes is a no.
bool confirmed(const std::string& question) {
  std::cerr << question << " [y/N] " << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) {
    std::cerr << "\n";
    return false;
  }
  std::transform(answer.begin(), answer.end(), answer.begin(), [](unsigned char c) { return std::tolower(c); });
  return answer == "y" || answer == "yes";
}

}  // namespace

int cmd_rm(const Args& a) {
  auto [name, version] = name_and_version(*a.ref);
  Store store = open_store(a);
  if (!a.yes && ::isatty(STDIN_FILENO)) {
    // Ask only about what exists; otherwise remove() below says what is missing.
    auto versions = store.version_numbers(name);
    bool exists = version ? std::binary_search(versions.begin(), versions.end(), *version) : !versions.empty();
    if (exists) {
      std::string question = version ? "remove " + name + "@" + std::to_string(*version) + "?"
                                     : "remove name " + name + " (" + count_of(versions.size(), "version", "versions") + ")?";
      if (!confirmed(question)) {
        std::cerr << "amphora: nothing removed\n";
        return 1;
      }
    }
  }
  for (const auto& v : store.remove(name, version))
    std::cout << "removed " << v.name << "@" << v.version << " ("
              << (v.record.is_null() ? std::string("unreadable record") : v.digest.str()) << ")\n";
  return 0;
}

int cmd_migrate(const Args& a) {
  Store store = open_store(a);
  const auto result = store.migrate(*a.ref, a.name);
  if (a.json) {
    nlohmann::json out = {{"from", result.from.str()},
                          {"to", result.to.str()},
                          {"rewritten", result.rewritten},
                          {"name", result.name},
                          {"version", result.version},
                          {"unchecked", result.unchecked},
                          {"upgrades", nlohmann::json::array()}};
    for (const auto& u : result.upgrades)
      out["upgrades"].push_back({{"materializer", u.materializer}, {"from", u.from}, {"to", u.to}, {"artifacts", u.artifacts}});
    std::cout << json_text(out) << "\n";
    return 0;
  }
  std::string upgrades;
  for (const auto& u : result.upgrades)
    upgrades += (upgrades.empty() ? "" : ", ") + u.materializer + " format " + std::to_string(u.from) + " -> " +
                std::to_string(u.to) + " (" + count_of(u.artifacts, "artifact", "artifacts") + ")";
  if (!result.rewritten) {
    std::cout << printable(*a.ref) << " (" << result.from.short_str() << ") "
              << (result.unchecked ? "saves to the same bytes with this build" : "is already at the format versions this build writes")
              << "; nothing written\n";
    return 0;
  }
  std::cout << "migrated " << printable(*a.ref) << " (" << result.from.short_str() << ") to " << printable(result.name) << "@"
            << result.version << " (" << result.to.short_str() << ")"
            << (upgrades.empty() ? "" : ": " + printable(upgrades)) << "\n";
  return 0;
}

int cmd_plugins(const Args& a) {
  auto registry = make_registry(a);
  const auto entries = registry->entries();
  const auto formats = registry->formats();
  const auto plugins = registry->plugins();
  if (a.json) {
    nlohmann::json out = {{"materializers", nlohmann::json::array()},
                          {"formats", nlohmann::json::array()},
                          {"plugins", nlohmann::json::array()}};
    for (const auto& e : entries)
      out["materializers"].push_back(
          {{"name", e->name}, {"version", e->version}, {"type", type_display_name(e->type)}, {"origin", e->origin}});
    for (const auto& f : formats)
      out["formats"].push_back({{"extension", f->extension},
                                {"materializer", f->materializer},
                                {"description", f->description},
                                {"origin", f->origin}});
    for (const auto& p : plugins)
      out["plugins"].push_back({{"name", p.name},
                                {"version", p.version},
                                {"path", p.path.string()},
                                {"materializers", p.materializers},
                                {"formats", p.formats}});
    std::cout << json_text(out) << "\n";
    return 0;
  }
  // Columns as wide as their longest cell.
  auto width = [](std::size_t least, const auto& rows, auto cell) {
    for (const auto& r : rows) least = std::max(least, cell(r).size());
    return static_cast<int>(least);
  };
  const int name_w = width(12, entries, [](const auto& e) { return e->name; });
  const int type_w = width(4, entries, [](const auto& e) { return type_display_name(e->type); });
  std::printf("%-*s  %7s  %-*s  %s\n", name_w, "MATERIALIZER", "VERSION", type_w, "TYPE", "ORIGIN");
  for (const auto& e : entries)
    std::printf("%-*s  %7d  %-*s  %s\n", name_w, e->name.c_str(), e->version, type_w,
                type_display_name(e->type).c_str(), printable(e->origin).c_str());
  const int ext_w = width(9, formats, [](const auto& f) { return f->extension; });
  const int mat_w = width(12, formats, [](const auto& f) { return f->materializer; });
  std::printf("\n%-*s  %-*s  %s\n", ext_w, "EXTENSION", mat_w, "MATERIALIZER", "ORIGIN");
  for (const auto& f : formats)
    std::printf("%-*s  %-*s  %s\n", ext_w, f->extension.c_str(), mat_w, f->materializer.c_str(),
                printable(f->origin).c_str());
  if (plugins.empty()) {
    std::printf("\n(no plugins loaded: give --plugin PATH, or directories in $AMPHORA_PLUGIN_PATH)\n");
  } else {
    std::printf("\n%s:\n", count_of(plugins.size(), "plugin", "plugins").c_str());
    for (const auto& p : plugins)
      std::printf("  %s %s  %s\n", printable(p.name).c_str(), printable(p.version).c_str(),
                  printable(p.path.string()).c_str());
  }
  return 0;
}

int cmd_remote(const Args& a) {
  Store store = open_store(a);
  if (a.action == "list") {
    if (!a.remote_name.empty()) throw InvalidArgument("remote list takes no NAME");
    const auto remotes = store.remotes();
    if (a.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : remotes)
        out.push_back({{"name", r.name}, {"url", r.url}, {"endpoint", r.endpoint}, {"region", r.region}});
      std::cout << json_text(out) << "\n";
      return 0;
    }
    for (const auto& r : remotes)
      std::cout << printable(r.name) << "\t" << printable(r.url)
                << (r.endpoint.empty() ? "" : "  (endpoint " + printable(r.endpoint) + ")")
                << (r.region.empty() ? "" : "  (region " + printable(r.region) + ")") << "\n";
    if (remotes.empty()) std::cerr << "amphora: no remotes; add one with `amphora remote add NAME URL`\n";
    return 0;
  }
  if (a.remote_name.empty()) throw InvalidArgument("remote " + a.action + " needs the remote's NAME");
  if (a.action == "remove") {
    if (!a.url.empty()) throw InvalidArgument("remote remove takes only NAME");
    store.remove_remote(a.remote_name);
    std::cout << "removed remote " << printable(a.remote_name) << " (nothing on it was touched)\n";
    return 0;
  }
  if (a.url.empty()) throw InvalidArgument("remote add needs NAME and URL (s3://BUCKET/PREFIX or file:///PATH)");
  store.add_remote({a.remote_name, a.url, a.endpoint, a.region});
  std::cout << "added remote " << printable(a.remote_name) << " " << printable(a.url) << "\n";
  return 0;
}

namespace {

// Bytes, rate and time left, redrawn at most ten times a second, on a
// terminal only.
std::function<void(const TransferStatus&)> transfer_progress(const char* what) {
  if (!::isatty(STDERR_FILENO)) return {};
  const auto start = std::chrono::steady_clock::now();
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  return [what, start, last](const TransferStatus& s) {
    const auto now = std::chrono::steady_clock::now();
    const bool done = s.bytes_done >= s.bytes_total && s.artifacts_done >= s.artifacts_total;
    if (!done && now - *last < std::chrono::milliseconds(100)) return;
    *last = now;
    const double seconds = std::chrono::duration<double>(now - start).count();
    const double rate = seconds > 0 ? static_cast<double>(s.bytes_done) / seconds : 0;
    std::string eta = "";
    if (rate > 0 && s.bytes_total > s.bytes_done)
      eta = ", " + std::to_string(static_cast<long long>(static_cast<double>(s.bytes_total - s.bytes_done) / rate + 0.5)) + " s left";
    std::fprintf(stderr, "\r\033[K%s %s / %s (%3.0f%%), %s/s%s, %zu/%zu artifacts", what,
                 human_bytes(s.bytes_done).c_str(), human_bytes(s.bytes_total).c_str(),
                 s.bytes_total ? 100.0 * static_cast<double>(s.bytes_done) / static_cast<double>(s.bytes_total) : 100.0,
                 human_bytes(static_cast<std::uint64_t>(rate)).c_str(), eta.c_str(), s.artifacts_done, s.artifacts_total);
    if (done) std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  };
}

int report_transfer(const Args& a, const TransferReport& r, const char* verb, const char* direction, double seconds) {
  if (a.json) {
    nlohmann::json out = {{"remote", r.remote},
                          {"location", r.location},
                          {"roots", nlohmann::json::array()},
                          {"artifacts_copied", r.artifacts_copied},
                          {"artifacts_present", r.artifacts_present},
                          {"bytes_copied", r.bytes_copied},
                          {"named", nlohmann::json::array()},
                          {"seconds", std::round(seconds * 1000) / 1000}};
    for (const auto& d : r.roots) out["roots"].push_back(d.str());
    for (const auto& v : r.named) out["named"].push_back({{"name", v.name}, {"version", v.version}, {"digest", v.digest.str()}});
    std::cout << json_text(out) << "\n";
    return 0;
  }
  std::cout << verb << " " << count_of(r.artifacts_copied, "artifact", "artifacts") << " ("
            << human_bytes(r.bytes_copied) << ") " << direction << " " << printable(r.remote) << " ("
            << printable(r.location) << ") in " << std::fixed << std::setprecision(1) << seconds << " s";
  if (r.artifacts_present) std::cout << "; " << r.artifacts_present << " already there";
  std::cout << "\n";
  for (const auto& v : r.named)
    std::cout << "  " << printable(v.name) << "@" << v.version << " -> " << v.digest.short_str() << "\n";
  return 0;
}

int transfer(const Args& a, bool push) {
  Store store = open_store(a);
  TransferOptions options;
  options.remote = a.remote;
  options.jobs = static_cast<std::size_t>(a.jobs);
  options.progress = transfer_progress(push ? "pushing" : "pulling");
  const auto start = std::chrono::steady_clock::now();
  const auto report = push ? store.push(a.refs, options) : store.pull(a.refs, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report_transfer(a, report, push ? "pushed" : "pulled", push ? "to" : "from", seconds);
}

}  // namespace

int cmd_push(const Args& a) { return transfer(a, true); }
int cmd_pull(const Args& a) { return transfer(a, false); }

}  // namespace amphora::cli
