// A pipeline program's command line: run configuration (YAML), --set
// overrides, and a line per step as the run goes.

#include <amphora/buffer.hpp>
#include <amphora/manifest.hpp>
#include <amphora/run_main.hpp>

#include "error_boundary.hpp"

#include <CLI/CLI.hpp>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <unistd.h>

namespace amphora {

namespace {

// A run configuration names parameters; megabytes of it are a mistake.
constexpr std::size_t kMaxRunConfigBytes = 1u << 20;

// A plain YAML scalar as YAML 1.2's core schema reads it.
nlohmann::json plain_scalar(const std::string& text) {
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") return nullptr;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  const char* begin = text.data();
  const char* end = begin + text.size();
  const char* digits = begin + (text[0] == '+' ? 1 : 0);
  std::int64_t i = 0;
  if (auto [p, ec] = std::from_chars(digits, end, i); ec == std::errc() && p == end && digits != end) return i;
  std::uint64_t u = 0;
  if (auto [p, ec] = std::from_chars(digits, end, u); ec == std::errc() && p == end && digits != end) return u;
  if (text == ".inf" || text == "+.inf" || text == "-.inf" || text == ".nan" || text == ".NaN")
    throw InvalidArgument("'" + text + "' is not a parameter value Amphora can store (no infinities or NaN)");
  double d = 0;
  if (text.find_first_of("0123456789") != std::string::npos && text.find_first_not_of("0123456789+-.eE") == std::string::npos)
    if (auto [p, ec] = std::from_chars(digits, end, d); ec == std::errc() && p == end) return d;
  return text;
}

// Values one run configuration (or one --set) may hold, counted as written
// out: YAML aliases repeat a node without repeating its text, so 466 bytes
// of nested aliases describe 10^9 values. Far above any real configuration.
constexpr std::size_t kMaxConfigValues = 100'000;
// Bytes of scalars and keys it may hold, counted the same way: an alias
// repeats a whole string, so 1.2 KB naming one 1,000-byte string 81,111
// times (under the value limit) would hold 86 MB. As much as a file holds.
constexpr std::size_t kMaxConfigText = kMaxRunConfigBytes;

// What a configuration expands to, counted as it is converted.
struct Expansion {
  std::size_t values = 0;
  std::size_t text = 0;
};

void count_text(Expansion& seen, std::size_t bytes, const std::string& where) {
  seen.text += bytes;
  if (seen.text > kMaxConfigText)
    throw InvalidArgument(where + ": expands to more than " + std::to_string(kMaxConfigText >> 20) +
                          " MiB of text (YAML aliases repeat what they name)");
}

// Keys of one mapping, refusing a key given twice (YAML forbids it; a
// parser that keeps the last one would hide the mistake).
std::string unique_key(const nlohmann::json& mapping, const YAML::Node& key, const std::string& where) {
  auto text = key.as<std::string>();
  if (mapping.contains(text)) throw InvalidArgument(where + ": the key '" + text + "' is given twice");
  return text;
}

nlohmann::json yaml_to_json(const YAML::Node& node, const std::string& where, Expansion& seen, int depth = 0) {
  if (++seen.values > kMaxConfigValues)
    throw InvalidArgument(where + ": expands to more than " + std::to_string(kMaxConfigValues) +
                          " values (YAML aliases repeat what they name)");
  if (depth > 64) throw InvalidArgument(where + ": nests deeper than 64 levels");
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Scalar:
      count_text(seen, node.Scalar().size(), where);
      // Quoted scalars have the tag "!": they stay strings.
      return node.Tag() == "!" ? nlohmann::json(node.Scalar()) : plain_scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(yaml_to_json(item, where, seen, depth + 1));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) {
        auto key = unique_key(out, kv.first, where);
        count_text(seen, key.size(), where);
        out[key] = yaml_to_json(kv.second, where, seen, depth + 1);
      }
      return out;
    }
    default:
      throw InvalidArgument(where + ": a value YAML cannot describe");
  }
}

std::string where_in(const std::filesystem::path& file, const YAML::Mark& mark) {
  return file.string() + ":" + std::to_string(mark.line + 1);
}

}  // namespace

static void apply_checked(nlohmann::json& params, std::string_view assignment) {
  auto eq = assignment.find('=');
  auto dot = assignment.substr(0, eq).find('.');
  if (eq == std::string_view::npos || dot == std::string_view::npos || dot == 0 || dot + 1 == eq)
    throw InvalidArgument("--set '" + std::string(assignment) + "': expected STEP.PARAM=VALUE");
  std::string step(assignment.substr(0, dot));
  std::string key(assignment.substr(dot + 1, eq - dot - 1));
  std::string text(assignment.substr(eq + 1));
  nlohmann::json value;
  try {
    Expansion seen;
    value = yaml_to_json(YAML::Load(text), "--set " + std::string(assignment), seen);
  } catch (const YAML::Exception& e) {
    throw InvalidArgument("--set '" + std::string(assignment) + "': the value is not valid YAML: " + e.msg);
  }
  if (!params.is_object()) params = nlohmann::json::object();
  params[step][key] = std::move(value);
}

static nlohmann::json read_checked(const std::filesystem::path& file) {
  // Read only if it is a regular file of reasonable size: a FIFO or a
  // device given by mistake is refused, not waited on or read forever.
  std::string text;
  try {
    text = read_text_file(file, kMaxRunConfigBytes);
  } catch (const NotFound&) {
    throw NotFound("run configuration " + file.string() + " does not exist");
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("run configuration ") + e.what());
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InvalidArgument("run configuration " + where_in(file, e.mark) + ": " + e.msg);
  }
  nlohmann::json params = nlohmann::json::object();
  if (root.IsNull()) return params;
  if (!root.IsMap())
    throw InvalidArgument("run configuration " + where_in(file, root.Mark()) +
                          ": expected a mapping of step names to their parameters");
  Expansion seen;
  for (const auto& step : root) {
    auto name = unique_key(params, step.first, "run configuration " + where_in(file, step.first.Mark()));
    if (!step.second.IsMap() && !step.second.IsNull())
      throw InvalidArgument("run configuration " + where_in(file, step.second.Mark()) + ": the parameters of step '" +
                            name + "' must be a mapping of names to values");
    auto& step_params = params[name] = nlohmann::json::object();
    for (const auto& kv : step.second) {
      const std::string where = "run configuration " + where_in(file, kv.first.Mark());
      auto key = unique_key(step_params, kv.first, where);
      count_text(seen, key.size(), where);
      step_params[key] = yaml_to_json(kv.second, where, seen);
    }
  }
  return params;
}

namespace {

// The steps and their parameters with defaults, for --help.
std::string steps_help(const Pipeline& pipeline) {
  std::string text = "Steps (set a parameter with --set STEP.PARAM=VALUE; defaults shown):";
  for (const auto& step : pipeline.step_names()) {
    text += "\n  " + printable(step);
    for (const auto& [param, value] : pipeline.step_params(step).items())
      text += "  " + printable(param) + "=" + printable(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return text;
}

int run_pipeline_program(const Pipeline& pipeline, int argc, char** argv,
                         const std::function<void(Store& store, const RunReport& report)>& after) {
  CLI::App app("Runs the " + pipeline.name() + " pipeline; steps whose code, parameters and inputs are "
               "unchanged come from the store's cache.",
               argc > 0 ? std::filesystem::path(argv[0]).filename().string() : pipeline.name());
  std::string store_dir;
  std::string config;
  std::vector<std::string> sets;
  std::vector<std::string> print;
  RunOptions options;
  bool quiet = false;
  bool init = false;
  app.add_option("--store", store_dir,
                 "store directory (default $AMPHORA_STORE, else ./.amphora); it must exist unless --init is given "
                 "or it is the default");
  app.add_flag("--init", init, "create the --store directory's store if there is none yet");
  app.add_option("--config", config, "YAML run configuration: STEP: {PARAM: VALUE}")->check(CLI::ExistingFile);
  app.add_option("--set", sets, "override a parameter, STEP.PARAM=VALUE (repeatable; after --config)");
  app.add_option("--force", options.force, "run STEP even if cached ('*' = every step; repeatable)");
  app.add_option("--jobs", options.jobs, "steps run at once (default: one per core)");
  app.add_flag("--verify-hits", options.verify_hits, "re-hash the outputs of every cache hit");
  std::string remote_cache = "read-write";
  bool no_remote_cache = false;
  app.add_option("--remote-cache", remote_cache,
                 "the store's remote as a shared cache: read-write (default: look up there, push what runs here), "
                 "read (look up only, for machines that must not write to it) or off")
      ->check(CLI::IsMember({"read-write", "read", "off"}));
  app.add_flag("--no-remote-cache", no_remote_cache, "the same as --remote-cache=off");
  app.add_flag("-q,--quiet", quiet, "print only failures");
  app.add_option("--print", print, "after the run, print STEP's outputs (repeatable; also with --quiet)");
  app.footer(steps_help(pipeline));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  options.remote_cache = no_remote_cache           ? RemoteCache::off
                         : remote_cache == "read"    ? RemoteCache::read
                         : remote_cache == "off"     ? RemoteCache::off
                                                     : RemoteCache::read_write;
  try {
    if (!config.empty()) options.params = read_run_config(config);
    for (const auto& s : sets) apply_override(options.params, s);
    for (const auto& step : print) (void)pipeline.step_params(step);  // NotFound names an unknown step now
    // A mistyped --store must not quietly start an empty store (and rerun
    // everything into it): only the default place, or --init, creates one.
    const bool given = !store_dir.empty();
    const std::filesystem::path where = given ? std::filesystem::path(store_dir) : Store::default_path();
    std::optional<Store> opened;
    try {
      opened = Store::open(where, {.create = init || !given});
    } catch (const NotFound& e) {
      throw NotFound(std::string(e.what()) + " (give --init to create a store there)");
    }
    Store& store = *opened;
    if (!quiet) {
      options.on_wait = [&](std::string_view step) {
        std::cout << "  " << printable(step) << ": waiting for another run computing the same result" << std::endl;
      };
      options.on_step = [&](const StepReport& s) {
        char time[32];
        std::snprintf(time, sizeof time, "%8.3f s", s.seconds);
        std::cout << "  " << s.status << std::string(8 - std::min<std::size_t>(8, s.status.size()), ' ') << time
                  << "  " << printable(s.name);
        if (!s.reason.empty()) std::cout << "  (" << printable(s.reason) << ")";
        if (s.status == "cached" && !s.cache.empty() && s.cache != "local")
          std::cout << "  [remote '" << printable(s.cache) << "']";
        if (!s.error.empty()) std::cout << "\n      error: " << printable(s.error);
        std::cout << std::endl;
      };
    }
    if (!quiet) std::cout << pipeline.name() << ": running against " << printable(store.path().string()) << std::endl;
    if (auto coarse = pipeline.steps_keyed_by_program(); !coarse.empty()) {
      std::string names;
      for (const auto& name : coarse) names += (names.empty() ? "" : ", ") + printable(name);
      std::cerr << pipeline.name() << ": steps without source fingerprints (" << names
                << "): rerunning after any rebuild; build with amphora_add_pipeline for per-file fingerprints"
                << std::endl;
    }
    auto report = pipeline.run(store, options);
    if (!quiet)
      std::cout << pipeline.name() << ": run " << report.run_id << " " << (report.ok ? "succeeded" : "failed") << " ("
                << report.count("ran") << " ran, " << report.count("cached") << " cached"
                << (report.count("failed") ? ", " + std::to_string(report.count("failed")) + " failed" : "")
                << (report.count("skipped") ? ", " + std::to_string(report.count("skipped")) + " skipped" : "")
                << ")" << std::endl;
    if (!report.ok) {
      std::cerr << pipeline.name() << ": " << printable(report.error) << std::endl;
      return 1;
    }
    for (const auto& step : print)
      for (const auto& [output, text] : pipeline.output_texts(store, report, step))
        std::cout << printable(step) << "." << printable(output) << " = " << printable(text) << std::endl;
    if (after && !quiet) {
      try {
        after(store, report);
      } catch (const std::exception& e) {
        std::cerr << pipeline.name() << ": after the run: " << printable(e.what()) << std::endl;
        return 1;
      } catch (...) {
        std::cerr << pipeline.name() << ": after the run: unknown exception" << std::endl;
        return 1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << pipeline.name() << ": " << printable(e.what()) << std::endl;
    return 2;
  }
}

}  // namespace

int finish_output(int status, std::string_view prefix) {
  errno = 0;
  std::cout.flush();
  bool lost = !std::cout.good();
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) lost = true;
  if (!lost) return status;
  // The failing write may lie far back, its errno long gone: a write of
  // nothing asks the destination again without adding to what it holds.
  int err = errno;
  if (err == 0 && ::write(STDOUT_FILENO, "", 0) < 0) err = errno;
  std::cerr << prefix << ": cannot write to standard output" << (err ? std::string(": ") + std::strerror(err) : "")
            << std::endl;
  return status == 0 ? 1 : status;
}

int run_main(const Pipeline& pipeline, int argc, char** argv) { return run_main(pipeline, argc, argv, {}); }

int run_main(const Pipeline& pipeline, int argc, char** argv,
             const std::function<void(Store& store, const RunReport& report)>& after) {
  return finish_output(run_pipeline_program(pipeline, argc, argv, after), pipeline.name());
}

void apply_override(nlohmann::json& params, std::string_view assignment) {
  detail::translate_errors(detail::Blame::input, [&] { apply_checked(params, assignment); });
}

nlohmann::json read_run_config(const std::filesystem::path& file) {
  return detail::translate_errors(detail::Blame::input, [&] { return read_checked(file); });
}

}  // namespace amphora
