// The `amphora` command line: inspect and move artifacts without writing code.

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/version.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using amphora::Store;

constexpr const char* kUsage = R"(usage: amphora [--store DIR] COMMAND [ARGS]

Commands:
  init                                   create the store
  ls [NAME] [--json]                     list names (latest versions), or every version of NAME
  show REF [--json]                      show an artifact's manifest, files and metadata
  import FILE --name NAME [--compress none|lz4|auto]
                                         store a file (.npy) as the next version of NAME
  export REF FILE [--force]              write an artifact to a file (.npy); an existing regular
                                         file is replaced, a symbolic link only with --force
  verify [REF]                           re-hash payloads and check them against manifests
  gc [--dry-run]                         remove artifacts no name reaches, and stale staging

REF is NAME (latest version), NAME@N, sha256:HEX or a hex prefix of 8+ digits.
The store is --store DIR, else $AMPHORA_STORE, else ./.amphora.
Exit status: 0 success, 1 failure, 2 usage error, 3 not found, 4 damaged data.
)";

// Text that came from a store (records, metadata, file names, messages that
// quote them) is shown with control characters escaped, so a crafted store
// cannot send escape sequences to the user's terminal.
std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char buf[12];
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t i = 0, n = text.size();
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) {
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence is kept unless it encodes a C1 control;
    // any other byte (a stray 8-bit C1 byte included) is shown as \xNN.
    std::size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || i + len > n || !amphora::is_valid_utf8(text.substr(i, len))) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
      continue;
    }
    if (len == 2 && c == 0xc2 && p[i + 1] <= 0x9f) {  // U+0080..U+009F
      std::snprintf(buf, sizeof buf, "\\u%04x", p[i + 1]);
      out += buf;
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return printable(text);
}

// --json output is ASCII: everything else, C1 controls included, is escaped
// as \uXXXX, which every JSON reader turns back into the same text.
std::string json_text(const nlohmann::json& value) { return value.dump(2, ' ', true); }

void warn(const std::string& text) { std::cerr << "amphora: warning: " << one_line(text) << "\n"; }

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::optional<std::string> store;
  std::string command;
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // --flag value
  std::vector<std::string> flags;              // --flag
};

bool has_flag(const Args& a, const std::string& f) {
  return std::find(a.flags.begin(), a.flags.end(), f) != a.flags.end();
}

Args parse_args(int argc, char** argv) {
  static const std::vector<std::string> kValued = {"--store", "--name", "--compress"};
  static const std::vector<std::string> kFlags = {"--json", "--dry-run", "--force", "--help", "-h", "--version"};
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() > 1 && arg[0] == '-') {
      std::string key = arg, value;
      bool inline_value = false;
      if (auto eq = arg.find('='); eq != std::string::npos && arg.starts_with("--")) {
        key = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        inline_value = true;
      }
      if (std::find(kValued.begin(), kValued.end(), key) != kValued.end()) {
        if (!inline_value) {
          if (i + 1 >= argc) throw UsageError(key + " needs a value");
          value = argv[++i];
        }
        if (key == "--store")
          a.store = value;
        else
          a.options[key] = value;
      } else if (std::find(kFlags.begin(), kFlags.end(), key) != kFlags.end() && !inline_value) {
        a.flags.push_back(key);
      } else {
        throw UsageError("unknown option " + arg);
      }
    } else if (a.command.empty()) {
      a.command = arg;
    } else {
      a.positional.push_back(arg);
    }
  }
  return a;
}

void expect_positional(const Args& a, std::size_t min, std::size_t max) {
  if (a.positional.size() < min || a.positional.size() > max)
    throw UsageError("wrong number of arguments for '" + a.command + "'");
}

void allow_only(const Args& a, std::initializer_list<const char*> allowed) {
  auto ok = [&](const std::string& k) {
    return std::any_of(allowed.begin(), allowed.end(), [&](const char* x) { return k == x; });
  };
  for (const auto& [k, v] : a.options)
    if (!ok(k)) throw UsageError(k + " does not apply to '" + a.command + "'");
  for (const auto& f : a.flags)
    if (!ok(f)) throw UsageError(f + " does not apply to '" + a.command + "'");
}

std::string human_bytes(std::uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::shared_ptr<amphora::Registry> builtin_registry() {
  auto registry = std::make_shared<amphora::Registry>();
  amphora::register_builtins(*registry);
  return registry;
}

Store open_store(const Args& a, bool create = false) {
  fs::path dir = a.store ? fs::path(*a.store) : Store::default_path();
  return Store::open(dir, {.create = create, .registry = builtin_registry()});
}

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
// their informational fields leniently.
std::string text_field(const nlohmann::json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}
std::uint64_t count_field(const nlohmann::json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

nlohmann::json version_json(const amphora::VersionInfo& v) {
  return {{"name", v.name},
          {"version", v.version},
          {"digest", v.digest.str()},
          {"materializer", text_field(v.record, "materializer")},
          {"payload_bytes", count_field(v.record, "payload_bytes")},
          {"created_at", text_field(v.record, "created_at")}};
}

int cmd_init(const Args& a) {
  expect_positional(a, 0, 0);
  allow_only(a, {});
  Store store = open_store(a, true);
  std::cout << "initialised store " << store.path().string() << "\n";
  return 0;
}

int cmd_ls(const Args& a) {
  expect_positional(a, 0, 1);
  allow_only(a, {"--json"});
  Store store = open_store(a);
  // One unreadable record is reported, not allowed to hide the healthy ones.
  std::optional<std::string_view> only;
  if (!a.positional.empty()) only = a.positional[0];
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
      throw amphora::NotFound("no name '" + a.positional[0] + "' in store " + store.path().string());
  }
  if (has_flag(a, "--json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
      auto j = version_json(r);
      if (!only) j["versions"] = version_counts[r.name];
      out.push_back(std::move(j));
    }
    std::cout << json_text(out) << "\n";
    return 0;
  }
  if (rows.empty()) {
    if (only)
      std::cout << "(no readable versions of " << a.positional[0] << ")\n";
    else
      std::cout << "(no names in " << printable(store.path().string()) << ")\n";
    return 0;
  }
  std::printf("%-32s %-8s %-20s %-18s %10s  %s\n", "NAME", "VERSION", "DIGEST", "MATERIALIZER", "SIZE", "CREATED");
  for (const auto& r : rows) {
    std::string version = std::to_string(r.version);
    if (!only && version_counts[r.name] > 1) version += "/" + std::to_string(version_counts[r.name]);
    std::printf("%-32s %-8s %-20s %-18s %10s  %s\n", r.name.c_str(), version.c_str(), r.digest.short_str().c_str(),
                printable(text_field(r.record, "materializer")).c_str(),
                human_bytes(count_field(r.record, "payload_bytes")).c_str(),
                printable(text_field(r.record, "created_at")).c_str());
  }
  return 0;
}

int cmd_show(const Args& a) {
  expect_positional(a, 1, 1);
  allow_only(a, {"--json"});
  Store store = open_store(a);
  amphora::ArtifactReader reader = store.open_artifact(a.positional[0]);
  const auto& m = reader.manifest();
  std::vector<std::string> names, problems;
  for (const auto& v : store.names_of(reader.digest(), &problems)) names.push_back(v.name + "@" + std::to_string(v.version));
  for (const auto& p : problems) warn(p);
  auto registered = store.registry().find(m.materializer);
  if (has_flag(a, "--json")) {
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
                          {"meta", m.meta}};
    std::cout << json_text(out) << "\n";
    return 0;
  }
  std::cout << "digest        " << reader.digest().str() << "\n";
  std::cout << "materializer  " << printable(m.materializer) << " (format " << m.materializer_version << ")"
            << (registered ? "" : "  [not registered: cannot be loaded by this build]") << "\n";
  std::cout << "names         ";
  for (std::size_t i = 0; i < names.size(); ++i) std::cout << (i ? ", " : "") << names[i];
  std::cout << (names.empty() ? "(none)" : "") << "\n";
  std::cout << "payload       " << human_bytes(m.payload_bytes()) << " in " << m.files.size() << " file"
            << (m.files.size() == 1 ? "" : "s") << "\n";
  for (const auto& f : m.files)
    std::printf("  %-28s %14llu bytes  %zu piece%s\n", printable(f.path).c_str(), static_cast<unsigned long long>(f.size),
                f.pieces.size(), f.pieces.size() == 1 ? "" : "s");
  std::cout << "meta\n";
  std::string meta = m.meta.dump(2);
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
  expect_positional(a, 1, 1);
  allow_only(a, {"--name", "--compress"});
  if (!a.options.count("--name")) throw UsageError("import needs --name NAME");
  amphora::SaveOptions options;
  options.name = a.options.at("--name");
  amphora::validate_name(options.name);
  if (a.options.count("--compress")) options.compression = amphora::parse_compression(a.options.at("--compress"));
  Store store = open_store(a);
  fs::path file = a.positional[0];
  auto format = store.registry().format_for(file);
  if (!format)
    throw amphora::Unsupported("cannot import " + file.string() + ": no materializer handles '" +
                               file.extension().string() + "' files");
  auto entry = store.registry().find(format->materializer);
  // A path need not be UTF-8; provenance must be, so odd bytes become U+FFFD.
  options.provenance = {{"imported_from", nlohmann::json::parse(nlohmann::json(fs::absolute(file).string())
                                                                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))}};
  auto value = format->read(file);
  if (auto show = terminal_progress("importing")) {
    std::uint64_t total = fs::file_size(file);
    options.progress = [show, total](std::uint64_t done) { show(std::min(done, total), total); };
  }
  auto result = store.save_erased(*entry, value.get(), options);
  if (options.progress) options.progress(~std::uint64_t{0});  // clears the progress line
  std::cout << "imported " << file.string() << " as " << result.name << "@" << result.version << " ("
            << result.digest.str() << ")" << (result.created ? "" : " [identical content was already stored]")
            << "\n";
  return 0;
}

// The destination may be replaced only if it is a regular file, or, with
// --force, a symbolic link (the link is replaced; its target is untouched).
// A FIFO, device, socket or directory is never replaced.
void check_destination(const fs::path& file, bool force) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) return;
  if (S_ISREG(st.st_mode)) return;
  if (S_ISLNK(st.st_mode)) {
    if (force) return;
    throw amphora::Error(file.string() + " is a symbolic link; refusing to replace it (pass --force to replace the "
                                         "link itself; its target is left alone)");
  }
  const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  throw amphora::Error(file.string() + " exists and is " + kind + "; export replaces only a regular file" +
                       (force ? " (or, with --force, a symbolic link)" : ""));
}

int cmd_export(const Args& a) {
  expect_positional(a, 2, 2);
  allow_only(a, {"--force"});
  Store store = open_store(a);
  fs::path file = a.positional[1];
  check_destination(file, has_flag(a, "--force"));
  amphora::ArtifactReader reader = store.open_artifact(a.positional[0]);
  auto format = store.registry().format_for(file);
  if (!format || format->materializer != reader.manifest().materializer) {
    auto native = store.registry().format_of(reader.manifest().materializer);
    throw amphora::Unsupported("cannot export " + reader.label() + " (" + reader.manifest().materializer + ") to " +
                               file.string() +
                               (native ? ": use a '" + native->extension + "' file" : ": no exporter for it"));
  }
  // Loading validates structure only; a damaged payload must not leave here as a good file.
  auto report = store.verify(reader.digest().str());
  if (!report.ok()) throw amphora::CorruptData(report.problems.front());
  auto value = store.load_erased(reader.digest().str(), format->materializer);
  check_destination(file, has_flag(a, "--force"));  // again: it may have appeared meanwhile
  format->write(value.get(), file);
  std::cout << "exported " << reader.label() << " to " << file.string() << "\n";
  return 0;
}

int cmd_verify(const Args& a) {
  expect_positional(a, 0, 1);
  allow_only(a, {});
  Store store = open_store(a);
  std::optional<std::string_view> ref;
  if (!a.positional.empty()) ref = a.positional[0];
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
  expect_positional(a, 0, 0);
  allow_only(a, {"--dry-run"});
  Store store = open_store(a);
  bool dry = has_flag(a, "--dry-run");
  auto report = store.gc(dry);
  std::cout << (dry ? "would remove " : "removed ") << report.removed.size() << " artifact"
            << (report.removed.size() == 1 ? "" : "s") << " (" << human_bytes(report.bytes_freed) << ") and "
            << report.staging.removed << " stale staging area" << (report.staging.removed == 1 ? "" : "s")
            << "; kept " << report.kept << "\n";
  if (dry)
    for (const auto& d : report.removed) std::cout << "  " << d.str() << "\n";
  return 0;
}

// The documented exit statuses: 2 bad argument, 3 not found, 4 damaged data, 1 anything else.
int exit_status(const std::exception& e) {
  if (dynamic_cast<const amphora::InvalidArgument*>(&e)) return 2;
  if (dynamic_cast<const amphora::NotFound*>(&e)) return 3;
  if (dynamic_cast<const amphora::CorruptData*>(&e)) return 4;
  return 1;
}

int dispatch(int argc, char** argv) {
  try {
    Args a = parse_args(argc, argv);
    if (has_flag(a, "--help") || has_flag(a, "-h") || a.command == "help") {
      std::cout << kUsage;
      return 0;
    }
    if (has_flag(a, "--version")) {
      std::cout << "amphora " AMPHORA_VERSION_STRING "\n";
      return 0;
    }
    if (a.command.empty()) throw UsageError("no command given");
    if (a.command == "init") return cmd_init(a);
    if (a.command == "ls") return cmd_ls(a);
    if (a.command == "show") return cmd_show(a);
    if (a.command == "import") return cmd_import(a);
    if (a.command == "export") return cmd_export(a);
    if (a.command == "verify") return cmd_verify(a);
    if (a.command == "gc") return cmd_gc(a);
    throw UsageError("unknown command '" + a.command + "'");
  } catch (const UsageError& e) {
    std::cerr << "amphora: " << one_line(e.what()) << " (see amphora --help)\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "amphora: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "amphora: error: " << one_line(e.what()) << "\n";
    return exit_status(e);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int status = dispatch(argc, argv);
  // Output that never arrived (a full disk, a closed pipe) is a failure, not
  // a silent success.
  errno = 0;
  std::cout.flush();
  bool failed = !std::cout.good();
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) failed = true;
  if (failed) {
    int err = errno;
    std::cerr << "amphora: error: cannot write to standard output" << (err ? std::string(": ") + std::strerror(err) : "")
              << "\n";
    return status == 0 ? 1 : status;
  }
  return status;
}
