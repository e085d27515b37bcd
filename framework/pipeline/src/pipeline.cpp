// Running a pipeline: cache keys, the action cache, leases, explained
// misses and run records (docs/FORMAT.md §1.7, §1.8, §3.8).

#include <amphora/buffer.hpp>
#include <amphora/json.hpp>
#include <amphora/manifest.hpp>
#include <amphora/pipeline.hpp>

#include "error_boundary.hpp"
#include "io_parallel.hpp"
#include "run_record_scan.hpp"
#include "store_access.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unistd.h>

namespace amphora {

namespace {

bool valid_step_name(std::string_view name) {
  auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  };
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), ok);
}

void require_step_name(std::string_view name, std::string_view what) {
  if (!valid_step_name(name))
    throw InvalidArgument("invalid " + std::string(what) + " '" + std::string(name) +
                          "': use 1-64 letters, digits, '_' or '-' (no '.', which separates PIPELINE.STEP.OUTPUT)");
}

std::string utc_timestamp(std::chrono::system_clock::time_point t, bool compact) {
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(micros / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  std::strftime(buf, sizeof buf, compact ? "%Y%m%dT%H%M%S" : "%Y-%m-%dT%H:%M:%S", &tm);
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%06lldZ", static_cast<long long>(micros % 1'000'000));
  return std::string(buf) + frac;
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "";
  return valid_utf8(host);
}

std::string new_run_id(std::chrono::system_clock::time_point start) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 20));
  char tail[8];
  std::snprintf(tail, sizeof tail, "%06llx", static_cast<unsigned long long>(rng() & 0xffffff));
  return utc_timestamp(start, true) + "-" + tail;
}

// A parameter value for a reason line: short JSON text.
std::string shown_value(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

constexpr std::size_t kMaxChangesListed = 5;
constexpr std::size_t kMaxExternalInProvenance = 64u << 10;

// Why a step whose ingredients differ from those `previous` recorded missed.
std::string explain_change(const nlohmann::json& now, const nlohmann::json& previous) {
  std::vector<std::string> why;
  // JSON compared with JSON, as GCC 12 read the std::string against the JSON
  // value; clang (C++20's rewritten comparisons, P2468) finds no operator for
  // the mixed pair.
  if (nlohmann::json(previous.value("version", "")) != now["version"])
    why.push_back("version changed from " + shown_value(previous.value("version", nlohmann::json())) + " to " +
                  shown_value(now["version"]));
  if (nlohmann::json(previous.value("code", "")) != now["code"]) {
    if (previous.value("code", "").empty())
      why.push_back("code fingerprint added");
    else if (now["code"].get<std::string>().empty())
      why.push_back("code fingerprint removed");
    else if (now["code"].get<std::string>().starts_with(detail::kProgramFingerprintPrefix))
      why.push_back("program changed");
    else
      why.push_back("code changed");
  }
  const nlohmann::json none;
  const nlohmann::json empty = nlohmann::json::object();
  auto field = [](const nlohmann::json& ingredients, const char* name, const nlohmann::json& otherwise) -> const nlohmann::json& {
    auto it = ingredients.find(name);
    return it != ingredients.end() ? *it : otherwise;
  };
  // Compared as the key compares them: 1 and 1.0 differ, and a number read
  // back from a record as unsigned is the same integer.
  auto same = [](const nlohmann::json& a, const nlohmann::json& b) { return typed_encoding(a) == typed_encoding(b); };
  auto diff = [&](const nlohmann::json& a, const nlohmann::json& b, const char* noun, bool show_values) {
    std::set<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
    std::size_t listed = 0, more = 0;
    for (const auto& k : keys) {
      bool in_a = a.contains(k), in_b = b.contains(k);
      if (in_a && in_b && same(a[k], b[k])) continue;
      if (listed == kMaxChangesListed) {  // a reason stays a line, even when a thousand files changed
        ++more;
        continue;
      }
      ++listed;
      std::string line = std::string(noun) + " `" + k + "` ";
      if (!in_a)
        line += show_values ? "added (" + shown_value(b[k]) + ")" : "added";
      else if (!in_b)
        line += "removed";
      else
        line += show_values ? "changed from " + shown_value(a[k]) + " to " + shown_value(b[k]) : "changed";
      why.push_back(std::move(line));
    }
    if (more > 0) why.push_back(std::to_string(more) + " more " + noun + (more == 1 ? "" : "s") + " changed");
  };
  auto earlier_object = [&](const char* name) -> const nlohmann::json& {
    const auto& v = field(previous, name, empty);
    return v.is_object() ? v : empty;
  };
  diff(earlier_object("params"), now["params"], "parameter", true);
  diff(earlier_object("inputs"), now["inputs"], "input", false);
  // What the step reads outside the store: by member when it is an object
  // (file_digests names each file), else as a whole.
  const auto& was = field(previous, "external", none);
  const auto& is = field(now, "external", none);
  if (!same(was, is)) {
    if (was.is_object() && is.is_object())
      diff(was, is, "external input", false);
    else
      why.push_back(was.is_null() ? "external input added" : is.is_null() ? "external input removed" : "external input changed");
  }
  if (previous.value("outputs", nlohmann::json()) != now["outputs"]) why.push_back("output materializers changed");
  if (previous.value("schema", nlohmann::json()) != now["schema"]) why.push_back("cache key schema changed");
  std::string text;
  for (const auto& w : why) text += (text.empty() ? "" : "; ") + w;
  return text;
}

// Empty when the artifact `digest` is there, was made by `entry`'s
// materializer, is whole (Store::damage) and holds the entry's C++ type (its
// accept check; with `full`, a load as that type when it has none), else
// what is wrong.
std::string artifact_problem(const Store& store, const Digest& digest, const MaterializerEntry& entry, bool full) {
  try {
    if (!full) {
      std::optional<ArtifactReader> intact;
      if (auto quick = detail::StoreAccess::quick_problem(store, digest, entry.name, entry.accept ? &intact : nullptr)) {
        if (!quick->empty() || !entry.accept) return *quick;
        entry.accept(*intact);
        return "";
      }
    }
    auto reader = store.open_artifact(digest);
    if (reader.manifest().materializer != entry.name)
      return "artifact " + digest.short_str() + " was made by " + reader.manifest().materializer + ", not " + entry.name;
    auto problems = store.damage(reader, full);
    if (!problems.empty()) return problems.front();
    if (entry.accept)
      entry.accept(reader);
    else if (full)
      (void)entry.load(reader);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// Ingredients as an earlier run record holds them, when they have the form
// explain_change reads: records come from the store, so anything else is
// skipped (the miss is then explained from an older run, or not at all).
bool well_formed_ingredients(const nlohmann::json& i) {
  auto holds = [&](const char* key, bool (nlohmann::json::*is)() const noexcept) {
    auto it = i.find(key);
    return it != i.end() && ((*it).*is)();
  };
  return i.is_object() && holds("version", &nlohmann::json::is_string) && holds("code", &nlohmann::json::is_string) &&
         holds("params", &nlohmann::json::is_object) && holds("inputs", &nlohmann::json::is_object);
}

// Earlier run records of one pipeline, newest first, read only when a step
// misses: a fully cached run never lists them.
class History {
 public:
  // `steps`: the names of the pipeline's steps, the only ones asked about.
  History(const Store& store, std::string pipeline, std::string current, std::set<std::string> steps)
      : store_(store), pipeline_(std::move(pipeline)), current_(std::move(current)), steps_(std::move(steps)) {}
  // The ingredients `step` was last keyed with (in a run where it ran or was
  // cached), or null.
  nlohmann::json last_ingredients(const std::string& step) {
    std::lock_guard lock(mutex_);
    if (!listed_) {
      for (auto& [p, id] : detail::StoreAccess::runs(store_).list())
        if (p == pipeline_ && id != current_) ids_.push_back(id);
      std::sort(ids_.rbegin(), ids_.rend());
      listed_ = true;
    }
    for (std::size_t i = 0; i < ids_.size() && i < kLookBack; ++i) {
      if (i == keyed_.size()) keyed_.push_back(load(ids_[i]));
      auto it = keyed_[i].find(step);
      if (it != keyed_[i].end()) return it->second;
    }
    return nullptr;
  }

 private:
  static constexpr std::size_t kLookBack = 20;
  // One record's usable ingredients by step: those of steps that ran or were
  // cached, in the form explain_change reads. Indexed once, so a run whose
  // every step misses does not scan every record for each step.
  // The record is scanned, not built: only the ingredients of steps that ran
  // or were cached are parsed, so memory stays near the record's text.
  std::map<std::string, nlohmann::json> load(const std::string& id) const {
    std::map<std::string, nlohmann::json> by_step;
    try {
      detail::scan_run_record(
          detail::StoreAccess::runs(store_).read_text(pipeline_, id), "run record " + pipeline_ + "/" + id,
          [](std::string_view, std::string_view) {},
          [&](const detail::ScannedStep& s) {
            if (s.ingredients.empty() || (s.status != "ran" && s.status != "cached")) return;
            if (!steps_.contains(std::string(s.name))) return;  // a step this pipeline no longer has
            nlohmann::json ingredients = parse_untrusted_json(s.ingredients);
            if (well_formed_ingredients(ingredients)) by_step.emplace(std::string(s.name), std::move(ingredients));
          });
    } catch (const Error&) {
      by_step.clear();  // unreadable: explained from older runs
    }
    return by_step;
  }
  const Store& store_;
  std::string pipeline_;
  std::string current_;
  std::set<std::string> steps_;
  bool listed_ = false;
  std::vector<std::string> ids_;
  std::vector<std::map<std::string, nlohmann::json>> keyed_;
  std::mutex mutex_;
};

// The digest recorded by the newest version of `name`, if any.

}  // namespace

// ---------------------------------------------------------------- building

namespace {
std::uint64_t new_pipeline_id() {
  static std::atomic<std::uint64_t> pipelines{0};
  return ++pipelines;
}
}  // namespace

Pipeline::Pipeline(std::string name) : name_(std::move(name)), id_(new_pipeline_id()) {
  require_step_name(name_, "pipeline name");
}

Pipeline::Pipeline(const Pipeline& other)
    : name_(other.name_), id_(new_pipeline_id()), copied_from_(other.copied_from_), nodes_(other.nodes_) {
  copied_from_.emplace_back(other.id_, other.nodes_.size());
}

Pipeline& Pipeline::operator=(const Pipeline& other) {
  if (this != &other) *this = Pipeline(other);
  return *this;
}

// The moved-from pipeline, if used again, is another: its later handles
// must not reach the steps moved away.
Pipeline::Pipeline(Pipeline&& other) noexcept
    : name_(std::move(other.name_)),
      id_(std::exchange(other.id_, new_pipeline_id())),
      copied_from_(std::move(other.copied_from_)),
      nodes_(std::move(other.nodes_)) {
  other.copied_from_.clear();
  other.nodes_.clear();
}

Pipeline& Pipeline::operator=(Pipeline&& other) noexcept {
  if (this != &other) {
    name_ = std::move(other.name_);
    id_ = std::exchange(other.id_, new_pipeline_id());
    copied_from_ = std::move(other.copied_from_);
    nodes_ = std::move(other.nodes_);
    other.copied_from_.clear();
    other.nodes_.clear();
  }
  return *this;
}

void Pipeline::check_handle(const std::string& step, std::uint64_t pipeline, std::size_t node, std::size_t slot,
                            const std::type_index& type) const {
  const bool ours = pipeline == id_ || std::any_of(copied_from_.begin(), copied_from_.end(), [&](const auto& c) {
                      return c.first == pipeline && node < c.second;
                    });
  if (!ours || node >= nodes_.size() || slot >= nodes_[node].outputs.size())
    throw InvalidArgument("step '" + step + "' of pipeline '" + name_ +
                          "' is given an input handle from another pipeline; pass the handles this pipeline's "
                          "step() and input() returned");
  const auto& out = nodes_[node].outputs[slot];
  if (out.type != type)
    throw InvalidArgument("step '" + step + "' reads " + type_display_name(type) + " where '" +
                          (nodes_[node].is_input ? nodes_[node].spec.name : nodes_[node].spec.name + "." + out.name) +
                          "' holds " + type_display_name(out.type));
}

std::vector<std::string> Pipeline::output_names(const StepSpec& spec, std::size_t count) {
  if (spec.outputs.empty()) {
    if (count == 1) return {"out"};
    std::vector<std::string> names;
    for (std::size_t i = 0; i < count; ++i) names.push_back("out" + std::to_string(i));
    return names;
  }
  if (spec.outputs.size() != count)
    throw InvalidArgument("step '" + spec.name + "' names " + std::to_string(spec.outputs.size()) +
                          " outputs but returns " + std::to_string(count));
  return spec.outputs;
}

std::size_t Pipeline::add_node(detail::StepNode node) {
  auto& spec = node.spec;
  if (node.is_input) {
    if (spec.name.empty()) throw InvalidArgument("pipeline '" + name_ + "': an input needs a ref");
    nodes_.push_back(std::move(node));
    return nodes_.size() - 1;
  }
  require_step_name(spec.name, "step name");
  for (const auto& other : nodes_)
    if (!other.is_input && other.spec.name == spec.name)
      throw InvalidArgument("pipeline '" + name_ + "' already has a step named '" + spec.name + "'");
  if (!spec.params.is_object())
    throw InvalidArgument("step '" + spec.name + "': params must be a JSON object of defaults, not " +
                          shown_value(spec.params));
  validate_storable_json(spec.params, "step '" + spec.name + "' params");
  for (const auto& [producer, slot] : node.inputs)
    if (producer >= nodes_.size() || slot >= nodes_[producer].outputs.size())
      throw InvalidArgument("step '" + spec.name + "' is given an input handle from another pipeline");
  if (spec.inputs.empty()) {
    for (const auto& [producer, slot] : node.inputs) {
      const auto& p = nodes_[producer];
      spec.inputs.push_back(p.is_input ? p.spec.name : p.outputs[slot].name);
    }
  } else if (spec.inputs.size() != node.inputs.size()) {
    throw InvalidArgument("step '" + spec.name + "' names " + std::to_string(spec.inputs.size()) +
                          " inputs but is given " + std::to_string(node.inputs.size()));
  }
  std::set<std::string> seen;
  for (const auto& input : spec.inputs)
    if (!seen.insert(input).second)
      throw InvalidArgument("step '" + spec.name + "' has two inputs named '" + input +
                            "'; name them with StepSpec::inputs");
  seen.clear();
  for (const auto& out : node.outputs) {
    require_step_name(out.name, "output name of step '" + spec.name + "'");
    if (!seen.insert(out.name).second)
      throw InvalidArgument("step '" + spec.name + "' has two outputs named '" + out.name + "'");
    // The name the output is saved under, checked now rather than after the
    // step has run (a pipeline named "-x", parts that add up past 128).
    validate_name(name_ + "." + spec.name + "." + out.name);
  }
  if (spec.code.empty()) spec.code = detail::code_fingerprint_of(spec.where.file_name());
  if (spec.code.empty()) {
    spec.code = detail::program_fingerprint(node.code_anchor);
    node.program_code = true;
  }
  nodes_.push_back(std::move(node));
  return nodes_.size() - 1;
}

std::vector<std::string> Pipeline::steps_keyed_by_program() const {
  std::vector<std::string> names;
  for (const auto& node : nodes_)
    if (!node.is_input && node.program_code) names.push_back(node.spec.name);
  return names;
}

std::vector<std::string> Pipeline::step_names() const {
  std::vector<std::string> names;
  for (const auto& node : nodes_)
    if (!node.is_input) names.push_back(node.spec.name);
  return names;
}

const nlohmann::json& Pipeline::step_params(std::string_view step) const {
  for (const auto& node : nodes_)
    if (!node.is_input && node.spec.name == step) return node.spec.params;
  throw NotFound("pipeline '" + name_ + "' has no step '" + std::string(step) + "'");
}

std::vector<std::pair<std::string, std::string>> Pipeline::output_texts(const Store& store, const RunReport& report,
                                                                        std::string_view step) const {
  const detail::StepNode* node = nullptr;
  for (const auto& n : nodes_)
    if (!n.is_input && n.spec.name == step) node = &n;
  if (!node) throw NotFound("pipeline '" + name_ + "' has no step '" + std::string(step) + "'");
  const StepReport& ran = report.step(step);
  if (ran.outputs.size() != node->outputs.size())
    throw NotFound("step '" + std::string(step) + "' has no outputs in run " + report.run_id + " (it " + ran.status + ")");
  std::vector<std::pair<std::string, std::string>> texts;
  for (std::size_t k = 0; k < ran.outputs.size(); ++k) {
    const auto& slot = node->outputs[k];
    auto value = slot.load(store, ran.outputs[k].digest);
    auto text = slot.text(value.get());
    texts.emplace_back(ran.outputs[k].name,
                       text ? *text
                            : "(a " + slot.entry(store)->name + "; amphora show " + ran.outputs[k].ref + ")");
  }
  return texts;
}

// ---------------------------------------------------------------- keys

nlohmann::json Pipeline::cache_key_ingredients(std::string_view pipeline, std::string_view step,
                                               std::string_view version, std::string_view code,
                                               const nlohmann::json& params,
                                               const std::vector<std::pair<std::string, Digest>>& inputs,
                                               const std::vector<std::pair<std::string, const MaterializerEntry*>>& outputs,
                                               const nlohmann::json& external) {
  nlohmann::json in = nlohmann::json::object();
  for (const auto& [name, digest] : inputs) in[name] = digest.str();
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, entry] : outputs)
    out[name] = {{"materializer", entry->name}, {"format_version", entry->version}};
  nlohmann::json ingredients = {{"schema", kCacheSchemaVersion}, {"pipeline", pipeline}, {"step", step},
                                {"version", version},            {"code", code},         {"params", params},
                                {"inputs", in},                  {"outputs", out}};
  if (!external.is_null()) ingredients["external"] = external;
  return ingredients;
}

Digest Pipeline::cache_key(const nlohmann::json& ingredients) { return typed_digest(ingredients); }

namespace {
nlohmann::json digests_of_files(const std::filesystem::path& path, std::string_view suffix, std::size_t max_files);
}  // namespace

nlohmann::json file_digests(const std::filesystem::path& path, std::string_view suffix, std::size_t max_files) {
  return detail::translate_errors(detail::Blame::input, [&] { return digests_of_files(path, suffix, max_files); });
}

namespace {
nlohmann::json digests_of_files(const std::filesystem::path& path, std::string_view suffix, std::size_t max_files) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) {
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
      throw IoError("cannot read " + path.string() + ": " + ec.message());
    throw NotFound("no file or directory " + path.string());
  }
  std::vector<std::pair<std::string, fs::path>> files;  // (key, file)
  auto add = [&](std::string key, fs::path file) {
    if (files.size() == max_files)
      throw InvalidArgument(path.string() + " holds more than " + std::to_string(max_files) + " files" +
                            (suffix.empty() ? "" : " ending with '" + std::string(suffix) + "'") +
                            " to digest; narrow it down or raise the limit");
    if (!is_valid_utf8(key)) throw InvalidArgument("file name " + file.string() + " is not UTF-8");
    files.emplace_back(std::move(key), std::move(file));
  };
  if (fs::is_directory(status)) {
    try {
      for (const auto& e : fs::recursive_directory_iterator(path)) {
        if (e.is_directory()) continue;
        const std::string name = e.path().filename().string();
        if (!name.ends_with(suffix)) continue;
        add(e.path().lexically_relative(path).generic_string(), e.path());
      }
    } catch (const fs::filesystem_error& e) {
      throw IoError("listing " + (e.path1().empty() ? path : e.path1()).string() + ": " + e.code().message());
    }
  } else {
    add(path.filename().string(), path);
  }
  nlohmann::json digests = nlohmann::json::object();
  std::vector<std::byte> block(std::size_t{1} << 20);
  for (const auto& [key, file] : files) {
    auto in = InputFile::open(file);  // a FIFO is refused, not waited on
    Sha256 hash;
    while (std::size_t n = in.read(block)) hash.update(block.data(), n);
    digests[key] = Digest(hash.finish()).str();
  }
  return digests;
}
}  // namespace

std::size_t RunReport::count(std::string_view status) const {
  return static_cast<std::size_t>(
      std::count_if(steps.begin(), steps.end(), [&](const StepReport& s) { return s.status == status; }));
}

const StepReport& RunReport::step(std::string_view name) const {
  for (const auto& s : steps)
    if (s.name == name) return s;
  throw NotFound("run " + run_id + " has no step '" + std::string(name) + "'");
}

// ---------------------------------------------------------------- running

namespace {

nlohmann::json step_json(const StepReport& s, nlohmann::json ingredients) {
  nlohmann::json outputs = nlohmann::json::object(), digests = nlohmann::json::object();
  for (const auto& o : s.outputs) {
    outputs[o.name] = o.ref;
    digests[o.name] = o.digest.str();
  }
  nlohmann::json j = {{"name", s.name}, {"status", s.status}, {"reason", s.reason}, {"duration", s.seconds},
                      {"outputs", outputs}, {"output_digests", digests}};
  if (!s.error.empty()) j["error"] = s.error;
  if (!s.cache.empty()) j["cache"] = s.cache;
  if (s.key != Digest()) j["key"] = s.key.str();
  if (!ingredients.is_null()) j["ingredients"] = std::move(ingredients);
  return j;
}

class Run {
 public:
  Run(const Pipeline& pipeline, const std::vector<detail::StepNode>& nodes, Store& store, const RunOptions& options)
      : pipeline_(pipeline), nodes_(nodes), store_(store), options_(options) {}

  RunReport execute() {
    prepare();
    auto start = std::chrono::system_clock::now();
    report_.run_id = new_run_id(start);
    report_.pipeline = pipeline_.name();
    record_ = {{"run", report_.run_id},
               {"pipeline", pipeline_.name()},
               {"started_at", utc_timestamp(start, false)},
               {"status", "running"},
               {"host", host_name()},
               {"host_pid", ::getpid()},
               {"remote_cache", remote_description()},
               {"jobs", jobs_},
               {"overrides", options_.params},
               {"inputs", store_inputs_},
               {"steps", nlohmann::json::array()}};
    detail::StoreAccess::runs(store_).write(pipeline_.name(), report_.run_id, record_);
    std::set<std::string> steps;
    for (const auto& node : nodes_) steps.insert(node.spec.name);
    history_.emplace(store_, pipeline_.name(), report_.run_id, std::move(steps));
    // Whatever stops the schedule, the record is finished: failed, with why.
    std::string stopped;
    try {
      prefetch();
      schedule();
    } catch (const std::exception& e) {
      stopped = valid_utf8(e.what());
    } catch (...) {
      stopped = "an exception that is not a std::exception";
    }
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (!nodes_[i].is_input) {
        report_.steps.push_back(reports_[i]);
        record_["steps"].push_back(step_json(reports_[i], std::move(ingredients_[i])));
        if (reports_[i].status == "failed" && report_.error.empty())
          report_.error = "step '" + reports_[i].name + "' failed: " + reports_[i].error;
      }
    if (report_.error.empty() && !callback_error_.empty()) report_.error = callback_error_;
    if (!stopped.empty()) report_.error = "the run stopped: " + stopped;
    report_.ok = report_.error.empty();
    record_["status"] = report_.ok ? "succeeded" : "failed";
    record_["remote_cache"] = remote_description();
    if (!report_.ok) record_["error"] = report_.error;
    record_["ended_at"] = utc_timestamp(std::chrono::system_clock::now(), false);
    if (remote_ && options_.remote_cache == RemoteCache::read_write) {
      // Shared with the outputs, so `amphora runs` and `why` on another
      // machine see this run; a remote that fails here fails the run.
      try {
        detail::StoreAccess::runs(*remote_).write(pipeline_.name(), report_.run_id, record_);
      } catch (const std::exception& e) {
        report_.error = "the run record could not be written to remote '" + remote_name_ + "': " + valid_utf8(e.what());
        report_.ok = false;
        record_["status"] = "failed";
        record_["error"] = report_.error;
      }
    }
    detail::StoreAccess::runs(store_).write(pipeline_.name(), report_.run_id, record_);
    report_.record = std::move(record_);
    return std::move(report_);
  }

 private:
  // Effective parameters, forced steps, store inputs; all checked before
  // anything runs.
  void prepare() {
    const auto n = nodes_.size();
    params_.assign(n, nlohmann::json());
    forced_.assign(n, false);
    reports_.assign(n, StepReport{});
    ingredients_.assign(n, nlohmann::json());
    keyed_.assign(n, Keyed{});
    found_.assign(n, std::nullopt);
    digests_.assign(n, {});
    values_.assign(n, {});
    value_mutex_ = std::vector<std::mutex>(n);
    consumers_.assign(n, 0);
    store_inputs_ = nlohmann::json::object();
    if (!options_.params.is_object())
      throw InvalidArgument("run parameters must be an object of {\"STEP\": {\"PARAM\": value}}");
    for (auto it = options_.params.begin(); it != options_.params.end(); ++it) {
      const auto& defaults = pipeline_.step_params(it.key());  // NotFound names the step
      if (!it->is_object())
        throw InvalidArgument("parameters for step '" + it.key() + "' must be a mapping, not " + shown_value(*it));
      for (auto p = it->begin(); p != it->end(); ++p)
        if (!defaults.contains(p.key())) {
          std::string known;
          for (auto d = defaults.begin(); d != defaults.end(); ++d) known += (known.empty() ? "" : ", ") + d.key();
          throw InvalidArgument("step '" + it.key() + "' has no parameter '" + p.key() + "' (it has " +
                                (known.empty() ? std::string("none") : known) + ")");
        }
    }
    for (const auto& f : options_.force)
      if (f != "*") pipeline_.step_params(f);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& node = nodes_[i];
      if (node.is_input) {
        Digest d = store_.resolve(node.spec.name);
        digests_[i] = {d};
        store_inputs_[node.spec.name] = d.str();
        continue;
      }
      auto params = node.spec.params;
      if (auto it = options_.params.find(node.spec.name); it != options_.params.end())
        for (auto p = it->begin(); p != it->end(); ++p) params[p.key()] = *p;
      validate_storable_json(params, "parameters of step '" + node.spec.name + "'");
      params_[i] = std::move(params);
      forced_[i] = std::find_if(options_.force.begin(), options_.force.end(), [&](const std::string& f) {
                     return f == "*" || f == node.spec.name;
                   }) != options_.force.end();
      for (const auto& [producer, slot] : node.inputs) ++consumers_[producer];
    }
    if (options_.remote_cache != RemoteCache::off) {
      const auto remotes = store_.remotes();
      if (remotes.size() == 1) {
        remote_name_ = remotes.front().name;
        // A fresh remote becomes a store when this run first writes to it;
        // one that is none yet has nothing to read.
        try {
          remote_.emplace(
              detail::StoreAccess::remote(store_, remotes.front(), options_.remote_cache == RemoteCache::read_write));
        } catch (const NotFound& e) {
          if (options_.remote_cache == RemoteCache::read_write)  // no credentials, say
            throw NotFound(std::string(e.what()) + "; the run uses remote '" + remote_name_ +
                           "' as its cache: give --no-remote-cache (RemoteCache::off) to run on the local cache alone");
          remote_note_ = "off: remote '" + remote_name_ + "' holds no store yet";
        } catch (const InvalidArgument& e) {  // its location cannot hold a store
          if (options_.remote_cache == RemoteCache::read_write)
            throw InvalidArgument(std::string(e.what()) +
                                  "; give --no-remote-cache (RemoteCache::off) to run on the local cache alone");
          remote_note_ = std::string("off: ") + e.what();
        }
      } else if (remotes.size() > 1) {
        remote_note_ = "off: the store has " + std::to_string(remotes.size()) + " remotes";
      }
    }
    std::size_t steps = std::count_if(nodes_.begin(), nodes_.end(), [](const auto& x) { return !x.is_input; });
    jobs_ = options_.jobs ? options_.jobs : std::max(1u, std::thread::hardware_concurrency());
    jobs_ = std::max<std::size_t>(1, std::min(jobs_, steps));
  }

  void schedule() {
    const auto n = nodes_.size();
    std::vector<std::vector<std::size_t>> dependents(n);
    std::vector<std::size_t> waiting(n, 0);
    std::deque<std::size_t> ready;
    std::size_t remaining = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (nodes_[i].is_input) continue;
      ++remaining;
      std::set<std::size_t> producers;
      for (const auto& [producer, slot] : nodes_[i].inputs)
        if (!nodes_[producer].is_input) producers.insert(producer);
      for (auto p : producers) dependents[p].push_back(i);
      waiting[i] = producers.size();
      if (waiting[i] == 0) ready.push_back(i);
    }
    std::mutex mutex;
    std::condition_variable cv;
    // Threads start when there is work for them: when more steps are ready
    // than threads run, up to `jobs`. A chain never starts one. A machine
    // that cannot start a thread (a process limit) runs the steps on the
    // threads that did start, this one at least.
    std::vector<std::thread> threads;
    std::size_t busy = 1;
    bool cannot_start = false;
    std::function<void()> worker;
    auto start_threads = [&] {  // with `mutex` held
      while (!cannot_start && threads.size() + 1 < jobs_ && ready.size() > threads.size() + 1 - busy) {
        try {
          threads.emplace_back(worker);
          ++busy;
        } catch (const std::system_error&) {
          cannot_start = true;
        }
      }
    };
    worker = [&] {
      std::unique_lock lock(mutex);
      for (;;) {
        --busy;
        cv.wait(lock, [&] { return remaining == 0 || !ready.empty(); });
        ++busy;
        if (ready.empty()) return;
        std::size_t i = ready.front();
        ready.pop_front();
        start_threads();
        lock.unlock();
        process(i);
        lock.lock();
        std::size_t woken = 0;
        for (auto d : dependents[i])
          if (--waiting[d] == 0) {
            ready.push_back(d);
            ++woken;
          }
        --remaining;
        // This thread takes the next step itself: another is woken only for
        // each step beyond that, so a chain runs without a wake-up per step.
        if (remaining == 0)
          cv.notify_all();
        else
          for (std::size_t k = 1; k < woken; ++k) cv.notify_one();
      }
    };
    worker();
    for (auto& t : threads) t.join();
  }

  // The value of (node, slot): the one in memory, or loaded from the store
  // the first time a running step needs it.
  std::shared_ptr<void> input_value(std::size_t node, std::size_t slot) {
    std::lock_guard lock(value_mutex_[node]);
    auto& values = values_[node];
    if (values.size() <= slot) values.resize(nodes_[node].outputs.size());
    if (!values[slot]) {
      const Digest& digest = digests_[node][slot];
      // An output found on the remote's cache is copied here when first read.
      if (remote_ && !store_.contains(digest)) detail::StoreAccess::pull(store_, remote_name_, *remote_, {digest.str()}, {});
      values[slot] = nodes_[node].outputs[slot].load(store_, digest);
    }
    return values[slot];
  }

  void release_inputs(std::size_t i) {
    for (const auto& [producer, slot] : nodes_[i].inputs) {
      std::lock_guard lock(value_mutex_[producer]);
      if (--consumers_[producer] == 0) values_[producer].clear();
    }
  }

  void finish(std::size_t i, std::chrono::steady_clock::time_point started) {
    reports_[i].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    release_inputs(i);
    if (options_.on_step) call_back("on_step", [&] { options_.on_step(reports_[i]); });
  }

  // Runs the caller's callback `which`, one call at a time. On a worker
  // thread: what it throws fails the run (its report's error), neither the
  // step nor the process.
  template <class F>
  void call_back(std::string_view which, F&& callback) {
    std::lock_guard lock(callback_mutex_);
    std::string failure;
    try {
      callback();
      return;
    } catch (const std::exception& e) {
      failure = valid_utf8(e.what());
    } catch (...) {
      failure = "an exception that is not a std::exception";
    }
    if (callback_error_.empty()) callback_error_ = "the " + std::string(which) + " callback failed: " + failure;
  }

  std::string output_name(const detail::StepNode& node, std::size_t slot) const {
    return pipeline_.name() + "." + node.spec.name + "." + node.outputs[slot].name;
  }

  // Output digests from a cache entry that is intact for `node`, or nullopt
  // with `problem` saying what is wrong (empty when there is no entry).
  // The entry `cache` holds for `key`, when it is one of `node` naming every
  // output; else null, with `problem` saying what is wrong (empty when there
  // is no entry). `what` names the entry in problems ("cache entry").
  static std::shared_ptr<const detail::CacheEntry> checked_entry(const detail::ActionCache& cache,
                                                                 const detail::StepNode& node, const Digest& key,
                                                                 const std::string& what, std::string& problem,
                                                                 bool remote = false) {
    problem.clear();
    std::shared_ptr<const detail::CacheEntry> entry;
    try {
      entry = remote ? cache.read(key) : cache.get(key);
    } catch (const CorruptData& e) {
      problem = what + " damaged: " + e.what();
      return nullptr;
    }
    if (!entry) return nullptr;
    // An entry copied from another key, or edited, is not this step's.
    if (entry->key != key) {
      problem = what + " damaged: it records key " +
                (entry->key == Digest() ? std::string("none") : entry->key.short_str()) + ", not " + key.short_str();
      return nullptr;
    }
    if (entry->step != node.spec.name) {
      problem = what + " damaged: it is an entry of step '" + printable(entry->step) + "', not '" + node.spec.name + "'";
      return nullptr;
    }
    for (const auto& slot : node.outputs)
      if (!entry->outputs.contains(slot.name)) {
        problem = what + " damaged: no digest for output `" + slot.name + "`";
        return nullptr;
      }
    return entry;
  }

  std::optional<std::vector<Digest>> lookup(const detail::StepNode& node, const Digest& key,
                                            const std::vector<std::shared_ptr<const MaterializerEntry>>& entries,
                                            std::string& problem, std::shared_ptr<const detail::CacheEntry>& entry_out) {
    auto entry = checked_entry(detail::StoreAccess::cache(store_), node, key, "cache entry", problem);
    if (!entry) return std::nullopt;
    std::vector<Digest> digests;
    for (std::size_t s = 0; s < node.outputs.size(); ++s) {
      const auto& name = node.outputs[s].name;
      Digest d = entry->outputs.at(name);
      if (auto why = artifact_problem(store_, d, *entries[s], options_.verify_hits); !why.empty()) {
        problem = "output `" + name + "` missing or damaged (" + why + ")";
        return std::nullopt;
      }
      digests.push_back(d);
    }
    entry_out = std::move(entry);
    return digests;
  }

  // The same on the remote's cache: an entry there is used when each output's
  // manifest is there and was written by the output's materializer (one
  // request for the entry and one per output; payloads are not looked at
  // until a step or a load reads them, and checked piece by piece then).
  // `manifests` receives the outputs' manifests.
  std::optional<std::vector<Digest>> remote_lookup(const detail::StepNode& node, const Digest& key,
                                                   const std::vector<std::shared_ptr<const MaterializerEntry>>& entries,
                                                   std::string& problem,
                                                   std::shared_ptr<const detail::CacheEntry>& entry_out,
                                                   std::vector<Manifest>& manifests) {
    const std::string where = "remote '" + remote_name_ + "'";
    auto entry = checked_entry(detail::StoreAccess::cache(*remote_), node, key, "cache entry on " + where, problem, true);
    if (!entry) return std::nullopt;
    std::vector<Digest> digests;
    manifests.clear();
    for (std::size_t s = 0; s < node.outputs.size(); ++s) {
      const auto& name = node.outputs[s].name;
      const Digest d = entry->outputs.at(name);
      try {
        // One read, checked against its digest as opening it would.
        const std::string label = where + ": artifact " + d.short_str();
        const auto text = detail::StoreAccess::artifacts(*remote_).read_manifest(d, Manifest::kMaxBytes);
        if (Sha256::of(text) != d.value()) throw CorruptData(label + ": manifest.json does not match its digest");
        auto manifest = Manifest::parse(text, label);
        if (manifest.materializer != entries[s]->name) {
          problem = "output `" + name + "` on " + where + " was made by " + printable(manifest.materializer) +
                    ", not " + entries[s]->name;
          return std::nullopt;
        }
        manifests.push_back(std::move(manifest));
      } catch (const NotFound&) {
        problem = "output `" + name + "` of the cache entry on " + where + " is not there (" + d.short_str() + ")";
        return std::nullopt;
      } catch (const CorruptData& e) {
        problem = "output `" + name + "` of the cache entry on " + where + " is damaged (" + e.what() + ")";
        return std::nullopt;
      } catch (const Unsupported& e) {
        problem = "output `" + name + "` of the cache entry on " + where + " cannot be read here (" + e.what() + ")";
        return std::nullopt;
      }
      digests.push_back(d);
    }
    entry_out = std::move(entry);
    return digests;
  }

  // What a lookup found: a hit (its digests and entry; for the remote's,
  // the outputs' manifests), or why there was none.
  struct Found {
    std::optional<std::vector<Digest>> digests;
    std::shared_ptr<const detail::CacheEntry> entry;
    std::vector<Manifest> manifests;
    bool remote = false;
    std::string problem;
  };

  // The local cache, else the remote's (the local problem named first).
  Found find_hit(std::size_t i) {
    const auto& node = nodes_[i];
    const Digest& key = reports_[i].key;
    const auto& entries = keyed_[i].entries;
    Found found;
    if ((found.digests = lookup(node, key, entries, found.problem, found.entry))) return found;
    if (!remote_) return found;
    std::string remote_problem;
    if ((found.digests = remote_lookup(node, key, entries, remote_problem, found.entry, found.manifests))) {
      found.remote = true;
      found.problem.clear();
      return found;
    }
    if (found.problem.empty()) found.problem = remote_problem;
    return found;
  }

  // Serves a hit, looked up now or given (prefetched); false with `problem`
  // saying why not.
  bool try_hit(std::size_t i, const std::string& reason, std::string& problem, std::optional<Found> given = {}) {
    Found found = given ? std::move(*given) : find_hit(i);
    problem = found.problem;
    if (!found.digests) return false;
    return served(i, *found.digests, *found.entry, reason, problem, found.remote ? &found.manifests : nullptr);
  }

  void process(std::size_t i) {
    const auto& node = nodes_[i];
    auto& report = reports_[i];
    report.name = node.spec.name;
    const auto started = std::chrono::steady_clock::now();
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      auto producer = node.inputs[k].first;
      if (!nodes_[producer].is_input && reports_[producer].status != "ran" && reports_[producer].status != "cached") {
        report.status = "skipped";
        report.reason = "input `" + node.spec.inputs[k] + "` is missing: step '" + nodes_[producer].spec.name + "' " +
                        reports_[producer].status;
        finish(i, started);
        return;
      }
    }
    // A step's message is kept as it was, as far as JSON can hold it:
    // bytes that are not UTF-8 become U+FFFD, so the run record is written.
    try {
      run_step(i, started);
    } catch (const std::exception& e) {
      report.status = "failed";
      report.error = valid_utf8(e.what());
    } catch (...) {
      report.status = "failed";
      report.error = "an exception that is not a std::exception";
    }
    finish(i, started);
  }

  // The step's cache key and ingredients, from its producers' digests as
  // they are now: computed once, by the remote prefetch or by the step,
  // again only if a producer's digests changed since (a prefetched hit that
  // could not be served, and ran). Calls StepSpec::external.
  void key_step(std::size_t i) {
    const auto& node = nodes_[i];
    auto& keyed = keyed_[i];
    std::vector<Digest> from;
    for (const auto& [producer, slot] : node.inputs) from.push_back(digests_[producer][slot]);
    if (keyed.done && keyed.from == from) return;
    keyed = Keyed{};
    std::vector<std::pair<std::string, const MaterializerEntry*>> outputs;
    for (const auto& slot : node.outputs) {
      keyed.entries.push_back(slot.entry(store_));
      outputs.emplace_back(slot.name, keyed.entries.back().get());
    }
    std::vector<std::pair<std::string, Digest>> inputs;
    for (std::size_t k = 0; k < node.inputs.size(); ++k) inputs.emplace_back(node.spec.inputs[k], from[k]);
    if (node.spec.external) {
      keyed.external = node.spec.external(StepContext(pipeline_.name(), node.spec.name, report_.run_id, params_[i]));
      validate_storable_json(keyed.external, "the external input of step '" + node.spec.name + "'");
    }
    auto ingredients = Pipeline::cache_key_ingredients(pipeline_.name(), node.spec.name, node.spec.version,
                                                       node.spec.code, params_[i], inputs, outputs, keyed.external);
    reports_[i].key = Pipeline::cache_key(ingredients);
    ingredients_[i] = std::move(ingredients);  // recorded only once the key is known good
    keyed.from = std::move(from);
    keyed.done = true;
  }

  // Before the schedule, when the run has a remote cache: the steps whose
  // inputs are known are keyed and looked up a DAG level at a time, each
  // level's lookups at once, so a run served by the remote waits about one
  // round trip per level rather than one per step. A level's hits make the
  // next level's keys; what misses, and what follows it, is left to the
  // schedule. A lookup that throws is left to the step, which reports it.
  void prefetch() {
    if (!remote_) return;
    const auto n = nodes_.size();
    std::vector<char> hit(n, 0), looked(n, 0);
    auto known = [&](std::size_t i) {
      return std::all_of(nodes_[i].inputs.begin(), nodes_[i].inputs.end(),
                         [&](const auto& in) { return nodes_[in.first].is_input || hit[in.first]; });
    };
    for (;;) {
      std::vector<std::size_t> level;
      for (std::size_t i = 0; i < n; ++i)
        if (!nodes_[i].is_input && !forced_[i] && !looked[i] && known(i)) level.push_back(i);
      if (level.empty()) return;
      ++lookup_rounds_;
      detail::run_parallel(level.size(), kPrefetchLookups, [&](std::size_t k) {
        const std::size_t i = level[k];
        looked[i] = 1;
        try {
          key_step(i);
          found_[i] = find_hit(i);
          if (found_[i]->digests) {
            digests_[i] = *found_[i]->digests;
            hit[i] = 1;
          }
        } catch (...) {
          found_[i].reset();
        }
      });
    }
  }

  void run_step(std::size_t i, std::chrono::steady_clock::time_point) {
    const auto& node = nodes_[i];
    auto& report = reports_[i];
    const Digest prefetched_key = keyed_[i].done ? report.key : Digest();
    key_step(i);
    const auto& entries = keyed_[i].entries;
    const nlohmann::json& external = keyed_[i].external;
    std::optional<Found> found;
    if (found_[i] && report.key == prefetched_key) found = std::move(found_[i]);
    found_[i].reset();

    std::string problem;
    if (!forced_[i] && try_hit(i, "", problem, std::move(found))) return;
    report.reason = forced_[i] ? "forced" : reason_for_miss(i, problem);
    // One process computes a key: the local lease excludes the processes of
    // this host, the remote's those of every host sharing the remote.
    const auto& cache = detail::StoreAccess::cache(store_);
    bool told = false;
    auto take = [&](const detail::ActionCache& where) {
      auto lease = where.lease(report.key, false);
      if (!lease) {
        if (options_.on_wait && !told) call_back("on_wait", [&] { options_.on_wait(node.spec.name); });
        told = true;
        lease = where.lease(report.key, true);
      }
      return lease;
    };
    auto lease = take(cache);
    std::unique_ptr<Lease> remote_lease;
    if (remote_ && options_.remote_cache == RemoteCache::read_write) remote_lease = take(detail::StoreAccess::cache(*remote_));
    // Looked up again under the leases: another run may have published the
    // entry between our miss and our lease, whether or not we had to wait.
    if (!forced_[i]) {
      std::string late_problem;
      if (try_hit(i, "computed meanwhile by another run", late_problem)) return;
      if (!late_problem.empty() && problem.empty()) report.reason = reason_for_miss(i, late_problem);
    }
    report.status = "ran";  // from here a failure is this step's
    std::vector<std::shared_ptr<void>> args;
    for (const auto& [producer, slot] : node.inputs) args.push_back(input_value(producer, slot));
    StepContext context(pipeline_.name(), node.spec.name, report_.run_id, params_[i], external);
    auto values = node.invoke(args, context);
    args.clear();

    nlohmann::json provenance = {{"pipeline", pipeline_.name()}, {"step", node.spec.name},
                                 {"step_version", node.spec.version}, {"run", report_.run_id},
                                 {"cache_key", report.key.str()}, {"params", params_[i]},
                                 {"inputs", ingredients_[i]["inputs"]}};
    // Name records and cache entries are small (1 MiB at most): a long
    // external value is kept by its digest there, and whole in the run record.
    if (!external.is_null()) {
      provenance["external_digest"] = typed_digest(external).str();
      if (external.dump().size() <= kMaxExternalInProvenance) provenance["external"] = external;
    }
    detail::CacheEntry produced{report.key, pipeline_.name(), node.spec.name, {}, provenance,
                                utc_timestamp(std::chrono::system_clock::now(), false)};
    std::vector<Digest> digests;
    std::vector<nlohmann::json> provenances;
    for (std::size_t s = 0; s < values.size(); ++s) {
      SaveOptions save;
      save.name = output_name(node, s);
      save.options = node.spec.save_options;
      save.provenance = provenance;
      save.provenance["output"] = node.outputs[s].name;
      provenances.push_back(save.provenance);
      auto saved = store_.save_erased(*entries[s], values[s].get(), save);
      digests.push_back(saved.digest);
      produced.outputs.emplace(node.outputs[s].name, saved.digest);
      report.outputs.push_back({node.outputs[s].name, saved.name + "@" + std::to_string(saved.version), saved.digest});
    }
    {
      std::lock_guard lock(value_mutex_[i]);
      if (consumers_[i] > 0) values_[i] = std::move(values);  // handed to the steps that read them
    }
    digests_[i] = digests;
    // Published only after every output is named, so an entry never points
    // at what gc may collect.
    cache.put(produced);
    if (remote_lease) share(node, produced, digests, provenances);
  }

  // The outputs pushed to the remote and named there as here (unless the
  // name's latest version there has the digest already), then the entry
  // created if absent: the outputs first, so a visible entry always has
  // them; named, so gc --keep-last on the remote treats them as it does here.
  void share(const detail::StepNode& node, const detail::CacheEntry& produced, const std::vector<Digest>& digests,
             const std::vector<nlohmann::json>& provenances) {
    try {
      std::vector<std::string> refs;
      for (const auto& d : digests) refs.push_back(d.str());
      detail::StoreAccess::push(store_, remote_name_, *remote_, refs, {});
      for (std::size_t s = 0; s < digests.size(); ++s) {
        const auto name = output_name(node, s);
        const auto latest = detail::StoreAccess::names(*remote_).newest(name);
        if (latest && latest->second == digests[s]) continue;
        const Manifest manifest = store_.open_artifact(digests[s]).manifest();
        detail::StoreAccess::name_artifact(*remote_, digests[s], name, provenances[s], &manifest);
      }
      detail::StoreAccess::cache(*remote_).put(produced, true);
    } catch (const std::exception& e) {
      throw RemoteError("its outputs are saved and cached here, but sharing them on remote '" + remote_name_ +
                            "' failed: " + valid_utf8(e.what()),
                        remote_->location(), "", 0, "");
    }
  }

  // A hit, unless recording it fails on what the entry holds (provenance
  // too large for a name record, FORMAT.md §1.7) or an output is gone (a gc
  // in another process took the entry's outputs after the lookup found
  // them): then false, with `problem` saying why, and the step runs,
  // replacing the entry.
  bool served(std::size_t i, const std::vector<Digest>& digests, const detail::CacheEntry& entry, std::string reason,
              std::string& problem, const std::vector<Manifest>* remote_manifests) {
    auto& report = reports_[i];
    const std::string reason_before = report.reason;
    auto unusable = [&](const Error& e) {
      problem = std::string("cache entry unusable: ") + e.what();
      report.status.clear();
      report.cache.clear();
      report.reason = reason_before;
      report.outputs.clear();
      digests_[i].clear();
      return false;
    };
    try {
      cached(i, digests, entry, std::move(reason), remote_manifests);
      return true;
    } catch (const InvalidArgument& e) {
      return unusable(e);
    } catch (const NotFound& e) {
      return unusable(e);
    }
  }

  // `remote_manifests`: the outputs' manifests, for an entry found on the
  // remote; the outputs then stay there, and their local names say so.
  void cached(std::size_t i, const std::vector<Digest>& digests, const detail::CacheEntry& entry, std::string reason,
              const std::vector<Manifest>* remote_manifests) {
    const auto& node = nodes_[i];
    auto& report = reports_[i];
    report.status = "cached";
    report.cache = remote_manifests ? remote_name_ : "local";
    report.reason = std::move(reason);
    digests_[i] = digests;
    // `PIPELINE.STEP.OUTPUT` keeps meaning the latest run's output: a hit on
    // an older result (a parameter set back, say) records it as a new version.
    // The outputs are named together: one that cannot be (collected, or its
    // record too large) leaves every name as it was, and the step reruns.
    std::vector<std::uint64_t> versions(digests.size());
    std::vector<std::size_t> renamed;
    std::vector<detail::StoreAccess::Naming> namings;
    for (std::size_t s = 0; s < digests.size(); ++s) {
      auto name = output_name(node, s);
      // A bad latest record (nullopt) gets a new version recorded.
      auto latest = detail::StoreAccess::names(store_).newest(name);
      if (latest && latest->second == digests[s]) {
        versions[s] = latest->first;
        continue;
      }
      // Copied only here: a steady rerun records no new version.
      auto p = entry.provenance;
      p["output"] = node.outputs[s].name;
      p["cached_in_run"] = report_.run_id;
      if (remote_manifests) p["remote_cache"] = remote_name_;
      namings.push_back({digests[s], std::move(name), std::move(p), remote_manifests ? &(*remote_manifests)[s] : nullptr});
      renamed.push_back(s);
    }
    const auto named = detail::StoreAccess::name_artifacts(store_, namings);
    for (std::size_t k = 0; k < renamed.size(); ++k) versions[renamed[k]] = named[k].version;
    for (std::size_t s = 0; s < digests.size(); ++s)
      report.outputs.push_back(
          {node.outputs[s].name, output_name(node, s) + "@" + std::to_string(versions[s]), digests[s]});
  }

  std::string reason_for_miss(std::size_t i, const std::string& problem) {
    if (!problem.empty()) return problem;
    auto previous = history_->last_ingredients(nodes_[i].spec.name);
    if (previous.is_null()) return "no cache entry";
    auto change = explain_change(ingredients_[i], previous);
    if (change.empty()) return "no cache entry (removed since the last run)";
    return change;
  }

  // What the run record says of the remote cache.
  nlohmann::json remote_description() const {
    if (!remote_) return remote_note_.empty() ? std::string("off") : remote_note_;
    return {{"remote", remote_name_},
            {"mode", options_.remote_cache == RemoteCache::read ? "read" : "read_write"},
            {"location", remote_->location()},
            {"lookup_rounds", lookup_rounds_}};
  }

  const Pipeline& pipeline_;
  const std::vector<detail::StepNode>& nodes_;
  Store& store_;
  static constexpr std::size_t kPrefetchLookups = 16;  // lookups in flight at once
  struct Keyed {
    bool done = false;
    std::vector<Digest> from;  // the producers' digests the key was made from
    std::vector<std::shared_ptr<const MaterializerEntry>> entries;
    nlohmann::json external;
  };
  std::vector<Keyed> keyed_;
  std::size_t lookup_rounds_ = 0;  // levels the prefetch looked up
  std::vector<std::optional<Found>> found_;  // prefetched lookups, until their step takes them
  std::optional<Store> remote_;  // the remote cache, if the run uses one
  std::string remote_name_;
  std::string remote_note_;  // why none is used, when the store has remotes
  const RunOptions& options_;
  std::size_t jobs_ = 1;
  RunReport report_;
  nlohmann::json record_;
  nlohmann::json store_inputs_;
  std::optional<History> history_;
  std::vector<nlohmann::json> params_;
  std::vector<bool> forced_;
  std::vector<StepReport> reports_;
  std::vector<nlohmann::json> ingredients_;
  std::vector<std::vector<Digest>> digests_;
  std::vector<std::vector<std::shared_ptr<void>>> values_;
  std::vector<std::mutex> value_mutex_;
  std::vector<std::size_t> consumers_;
  std::mutex callback_mutex_;
  std::string callback_error_;  // the first callback's failure, under callback_mutex_
};

}  // namespace

RunReport Pipeline::run(Store& store, const RunOptions& options) const {
  return detail::translate_errors(detail::Blame::stored_data, [&] {
    Run run(*this, nodes_, store, options);
    return run.execute();
  });
}

// ---------------------------------------------------------------- fingerprints

namespace {
std::mutex fingerprint_mutex;
std::map<std::string, std::string>& fingerprint_table() {
  static std::map<std::string, std::string> table;
  return table;
}
}  // namespace

void detail::register_code_fingerprints(std::span<const std::pair<const char*, const char*>> table) {
  std::lock_guard lock(fingerprint_mutex);
  for (const auto& [file, fingerprint] : table) fingerprint_table()[file] = fingerprint;
}

std::string detail::code_fingerprint_of(std::string_view source_file) {
  std::lock_guard lock(fingerprint_mutex);
  const auto& table = fingerprint_table();
  if (auto it = table.find(std::string(source_file)); it != table.end()) return it->second;
  // The compiler may have been given the file by another spelling of its
  // path: match on the longest run of trailing path components, if unique.
  auto components = [](std::string_view path) {
    std::vector<std::string_view> parts;
    while (!path.empty()) {
      auto slash = path.rfind('/');
      auto part = slash == std::string_view::npos ? path : path.substr(slash + 1);
      if (!part.empty() && part != ".") parts.push_back(part);
      if (slash == std::string_view::npos) break;
      path = path.substr(0, slash);
    }
    return parts;
  };
  auto wanted = components(source_file);
  std::size_t best = 0, ties = 0;
  const std::string* found = nullptr;
  for (const auto& [file, fingerprint] : table) {
    auto have = components(file);
    std::size_t common = 0;
    while (common < have.size() && common < wanted.size() && have[common] == wanted[common]) ++common;
    if (common == 0 || common < best) continue;
    if (common > best) {
      best = common;
      found = &fingerprint;
      ties = 1;
    } else {
      ++ties;
    }
  }
  return ties == 1 ? *found : std::string();
}

}  // namespace amphora
