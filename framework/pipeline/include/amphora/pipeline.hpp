#pragma once
// Pipelines: typed steps composed into a DAG and run against a store. A step
// whose cache key (code, version, parameters, input digests, output
// materializers) has an intact entry in the store's action cache is not run;
// every step that does run says why. docs/FORMAT.md §1.7, §1.8 and §3.8.
//
//   amphora::Pipeline p("wc");
//   auto lines = p.step({.name = "read", .params = {{"n", 3}}},
//                       [](const amphora::StepContext& c) { return std::vector<std::string>(c.param<int>("n"), "x"); });
//   auto count = p.step({.name = "count"}, [](const std::vector<std::string>& v) { return v.size(); }, lines);
//   auto report = p.run(store);

#include <amphora/export.hpp>
#include <amphora/digest.hpp>
#include <amphora/error.hpp>
#include <amphora/materializer.hpp>
#include <amphora/store.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <sstream>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <map>
#include <utility>
#include <vector>

AMPHORA_API_BEGIN

namespace amphora {

/// Version of the cache-key encoding (FORMAT.md §3.8). Bumping it makes
/// every existing cache entry a miss. 2: the pipeline's name joined the key.
inline constexpr int kCacheSchemaVersion = 2;

/// What a running step sees besides its inputs. Holds its own copies, so it
/// stays valid however long a step keeps it.
class StepContext {
 public:
  StepContext(std::string pipeline, std::string step, std::string run_id, nlohmann::json params,
              nlohmann::json external = nullptr)
      : pipeline_(std::move(pipeline)),
        step_(std::move(step)),
        run_id_(std::move(run_id)),
        params_(std::move(params)),
        external_(std::move(external)) {}
  /// The step's parameters: its declared defaults with the run's overrides.
  const nlohmann::json& params() const { return params_; }
  /// Parameter `key` as a T. Throws InvalidArgument naming the step and the
  /// key when it is missing or not convertible to T; an integer T takes only
  /// integers within its range (no -1 as a size, no 2.5 as a count).
  template <class T>
  T param(std::string_view key) const {
    auto it = params_.find(key);
    if (it == params_.end()) throw InvalidArgument("step '" + step_ + "' has no parameter '" + std::string(key) + "'");
    auto refuse = [&](std::string_view why) {
      return InvalidArgument("parameter '" + std::string(key) + "' of step '" + step_ + "' is " + it->dump() + ", " +
                             std::string(why));
    };
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (!it->is_number_integer()) throw refuse("not an integer");
      const bool fits = it->is_number_unsigned() ? std::in_range<T>(it->template get<std::uint64_t>())
                                                 : std::in_range<T>(it->template get<std::int64_t>());
      if (!fits) throw refuse("out of range here");
    }
    try {
      return it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      throw refuse("which has the wrong type");
    }
  }
  /// The value StepSpec::external returned for this run, the one the cache
  /// key holds (null for a step without one, and while external itself
  /// runs). Read what it lists, and check what you read against it, so a
  /// file edited meanwhile cannot be cached under the digest of its old
  /// content.
  const nlohmann::json& external() const { return external_; }
  const std::string& pipeline() const { return pipeline_; }
  const std::string& step() const { return step_; }
  const std::string& run_id() const { return run_id_; }

 private:
  std::string pipeline_;
  std::string step_;
  std::string run_id_;
  nlohmann::json params_;
  nlohmann::json external_;
};

/// A typed handle to one output of a step, or to a value read from the
/// store (Pipeline::input), for passing to later steps. Cheap to copy; only
/// meaningful with the Pipeline that made it, or a copy of that pipeline made
/// after it: any other pipeline refuses it.
template <class T>
class Output {
 public:
  using value_type = T;
  std::uint64_t pipeline() const { return pipeline_; }
  std::size_t node() const { return node_; }
  std::size_t slot() const { return slot_; }

 private:
  friend class Pipeline;
  Output(std::uint64_t pipeline, std::size_t node, std::size_t slot) : pipeline_(pipeline), node_(node), slot_(slot) {}
  std::uint64_t pipeline_ = 0;
  std::size_t node_ = 0;
  std::size_t slot_ = 0;
};

/// How a step is declared. Use designated initializers:
/// `{.name = "count", .version = "2", .params = {{"top_k", 1000}}}`.
struct StepSpec {
  /// Letters, digits, '_' and '-'; unique in its pipeline.
  std::string name;
  /// Change it to invalidate the step's cache on purpose.
  std::string version = "1";
  /// Every parameter the step reads, with its default. A run's configuration
  /// may override these, and only these.
  nlohmann::json params = nlohmann::json::object();
  /// Names of the inputs, in argument order; empty = each upstream output's
  /// name. They name inputs in cache keys and in the reasons a step reran.
  std::vector<std::string> inputs{};
  /// Names of the outputs (one per tuple element); empty = "out" for one
  /// output, "out0", "out1", ... for several. Step outputs are saved under
  /// `PIPELINE.STEP.OUTPUT`.
  std::vector<std::string> outputs{};
  /// Code fingerprint. Empty = the fingerprint the program's build
  /// registered for the source file that declares the step, or none.
  std::string code{};
  /// What the step reads from outside the store (files, a database), for a
  /// step whose parameters cannot say whether that changed: called on every
  /// run before the cache lookup (so keep it cheaper than the step), on a
  /// worker thread, possibly alongside other steps; it must be thread-safe
  /// and give the same value for the same state. Its JSON value (for files,
  /// amphora::file_digests) joins the cache key as the `external` ingredient
  /// and reaches the step as StepContext::external(). A change reruns the
  /// step, with a reason naming the member that changed ("external input
  /// `a.txt` changed"); by early cutoff, the steps after it rerun only if
  /// its outputs change too. Returning null leaves it out. An exception, or
  /// a value that cannot be stored (NaN, text that is not UTF-8), fails the
  /// step and skips its dependents.
  std::function<nlohmann::json(const StepContext&)> external{};
  /// Options for the output materializers (compression, encodings, ...).
  MaterializerOptions save_options{};
  /// Where the step is declared; leave the default.
  std::source_location where = std::source_location::current();
};

/// One output of a step in a run.
struct StepOutput {
  std::string name;  ///< output name, e.g. "model"
  std::string ref;   ///< `PIPELINE.STEP.OUTPUT@N`
  Digest digest;
};

/// What happened to one step in a run.
struct StepReport {
  std::string name;
  /// "ran", "cached", "failed", or "skipped" (an input's step failed).
  std::string status;
  /// Why it ran ("no cache entry", "parameter `top_k` changed from 1000 to
  /// 500", ...), why it failed or was skipped; empty for a plain cache hit.
  std::string reason;
  std::string error;   ///< the step's exception message, when it failed
  /// For a cached step, where its entry was found: "local", or the name of
  /// the store's remote (its outputs then stay there until a step or a load
  /// reads them). Empty otherwise.
  std::string cache;
  double seconds = 0;  ///< wall time spent on the step, including the cache check
  Digest key;          ///< its cache key (empty when skipped)
  std::vector<StepOutput> outputs;
};

/// The outcome of Pipeline::run; `record` is what the store keeps (§1.8).
struct RunReport {
  std::string run_id;
  std::string pipeline;
  bool ok = false;
  std::string error;  ///< the first failure, "step 'x' failed: ..."
  std::vector<StepReport> steps;  ///< in declaration order
  nlohmann::json record;
  std::size_t count(std::string_view status) const;
  const StepReport& step(std::string_view name) const;  ///< throws NotFound
};

/// How a run uses its store's remote as a shared action cache (FORMAT.md §13.4).
enum class RemoteCache {
  off,         ///< the local cache only
  read,        ///< look up and use the remote's entries; never write to the remote
  read_write,  ///< also push what a step computes, then its entry; take step leases there
};

/// How one Pipeline::run runs; every member has a default.
struct RunOptions {
  /// Steps run at once at most; 0 = one per core.
  std::size_t jobs = 0;
  /// Parameter overrides, `{"STEP": {"PARAM": value}}`. Each must name a
  /// step and one of its declared parameters (InvalidArgument otherwise).
  nlohmann::json params = nlohmann::json::object();
  /// Steps to run even on a cache hit; "*" forces every step.
  std::vector<std::string> force{};
  /// Re-hash every output of a cache hit (Store::damage with rehash) instead
  /// of checking that its manifests and files are there with the right sizes.
  /// A remote hit's outputs are checked piece by piece when they are pulled.
  bool verify_hits = false;
  /// The remote cache, when the store has exactly one remote (with several,
  /// none is used and the run record says so). A step missing here is
  /// looked up there; a hit is used by its output digests alone, and what a
  /// step on this machine then reads is pulled as it reads it.
  RemoteCache remote_cache = RemoteCache::read_write;
  /// Called as each step ends, one call at a time (with on_wait too), on a
  /// worker thread. What it throws fails the run (RunReport::error names
  /// it); the steps go on.
  std::function<void(const StepReport&)> on_step{};
  /// Called once as a step starts waiting for another run (in this process
  /// or another) computing the same key; as on_step for threads and
  /// exceptions.
  std::function<void(std::string_view step)> on_wait{};
};

namespace detail {

// One output slot of a node, type-erased.
struct OutputSlot {
  std::string name;
  std::type_index type = typeid(void);
  std::shared_ptr<const MaterializerEntry> (*entry)(const Store&) = nullptr;
  std::shared_ptr<void> (*load)(const Store&, const Digest&) = nullptr;
  // The value as text (JSON, or what operator<< writes), or nullopt for a
  // type with neither.
  std::optional<std::string> (*text)(const void* value) = nullptr;
};

struct StepNode {
  StepSpec spec;
  bool is_input = false;  // a value read from the store, spec.name is its ref
  // An address in the code built from the file that declares the step, for
  // the program fingerprint of a step without a source fingerprint.
  const void* code_anchor = nullptr;
  bool program_code = false;  // spec.code is that program fingerprint
  std::vector<std::pair<std::size_t, std::size_t>> inputs;  // (node, slot)
  std::vector<OutputSlot> outputs;
  std::function<std::vector<std::shared_ptr<void>>(std::span<const std::shared_ptr<void>>, const StepContext&)> invoke;
};

template <class T>
std::shared_ptr<const MaterializerEntry> slot_entry(const Store&) {
  return std::shared_ptr<const MaterializerEntry>(std::shared_ptr<void>(), &materializer_entry<T>());
}
template <class T>
std::shared_ptr<void> slot_load(const Store& store, const Digest& digest) {
  return std::make_shared<T>(store.load<T>(digest));
}
template <class T>
std::optional<std::string> slot_text(const void* value) {
  const T& v = *static_cast<const T*>(value);
  if constexpr (requires { nlohmann::json(v); }) {
    return nlohmann::json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else if constexpr (requires(std::ostream& os) { os << v; }) {
    std::ostringstream os;
    os << v;
    return os.str();
  } else {
    return std::nullopt;
  }
}

template <class T>
OutputSlot make_slot(std::string name) {
  static_assert(std::is_same_v<T, std::decay_t<T>> && !std::is_void_v<T>,
                "amphora: a step returns values (or a std::tuple of values), not references or void");
  // Every value a step passes on is saved, so its type needs a materializer
  // now (the built-in ones for standard types are in <amphora/everyday.hpp>).
  detail::require_materializable<T>();
  return OutputSlot{std::move(name), typeid(T), &slot_entry<T>, &slot_load<T>, &slot_text<T>};
}

template <class R>
struct StepResult {
  using tuple = std::tuple<R>;
  static constexpr bool many = false;
};
template <class... Ts>
struct StepResult<std::tuple<Ts...>> {
  using tuple = std::tuple<Ts...>;
  static constexpr bool many = true;
};

/// The fingerprint registered for `source_file`, or "".
std::string code_fingerprint_of(std::string_view source_file);

/// What a program fingerprint starts with (docs/FORMAT.md §3.8).
inline constexpr std::string_view kProgramFingerprintPrefix = "program:";
/// The fingerprint of the program or shared library whose code holds
/// `anchor`: "program:sha256:" + the SHA-256 of its GNU build ID, or of its
/// file when it was linked without one. Computed once per object;
/// thread-safe. Throws when the file cannot be read: NotFound (deleted
/// since it was loaded), OutOfResources (no descriptor or memory left),
/// IoError otherwise.
std::string program_fingerprint(const void* anchor);

/// Instantiated where a step is declared (for its function's type), so that
/// its address lies in the program or library built from that file.
template <class F>
void code_anchor() {}
/// Registers (source file, fingerprint) pairs; called by generated code
/// before main.
void register_code_fingerprints(std::span<const std::pair<const char*, const char*>> table);

}  // namespace detail

/// A DAG of steps. Build it once (not thread-safe while building), then run it any number of
/// times; run() is thread-safe, and concurrent runs may call one step function at once.
class Pipeline {
 public:
  /// Throws InvalidArgument unless `name` is 1-64 letters, digits, '_' or '-'.
  explicit Pipeline(std::string name);
  /// A copy has the steps declared so far; each then grows on its own. The
  /// handles made before the copy serve both, later ones only their maker.
  Pipeline(const Pipeline& other);
  Pipeline& operator=(const Pipeline& other);
  /// The steps and handles move. The moved-from pipeline is left empty:
  /// assign to it before using it again (its handles reach no other).
  Pipeline(Pipeline&& other) noexcept;
  Pipeline& operator=(Pipeline&& other) noexcept;
  const std::string& name() const { return name_; }

  /// A value read from the store: `ref` is resolved to a digest when a run
  /// starts, and that digest keys the steps that read it.
  template <class T>
  Output<T> input(std::string ref) {
    StepSpec spec;
    spec.name = std::move(ref);
    detail::StepNode node;
    node.spec = std::move(spec);
    node.is_input = true;
    node.outputs.push_back(detail::make_slot<T>("value"));
    return Output<T>(id_, add_node(std::move(node)), 0);
  }

  /// Adds step `spec` computing `fn(inputs..., context)` (or `fn(inputs...)`,
  /// when fn takes no StepContext). fn returns one value or a std::tuple of
  /// values, each saved by its materializer; the result is an Output (or a
  /// tuple of Outputs) for later steps. Throws InvalidArgument for a bad or
  /// duplicate name, a handle from another pipeline, or mismatched names.
  /// A step with no registered source fingerprint is keyed by the program
  /// file that holds its code, which is then read once: it throws as
  /// program_fingerprint() does when that file cannot be read.
  template <class F, class... In>
  auto step(StepSpec spec, F fn, Output<In>... inputs) {
    constexpr bool with_context = std::is_invocable_v<F&, const In&..., const StepContext&>;
    static_assert(with_context || std::is_invocable_v<F&, const In&...>,
                  "amphora: a step function must be callable as fn(const In&..., const amphora::StepContext&) or "
                  "fn(const In&...), with one argument per input handle");
    using R = std::conditional_t<with_context, std::invoke_result<F&, const In&..., const StepContext&>,
                                 std::invoke_result<F&, const In&...>>::type;
    using Result = detail::StepResult<std::decay_t<R>>;
    using Tuple = typename Result::tuple;
    constexpr std::size_t n_out = std::tuple_size_v<Tuple>;

    (check_handle(spec.name, inputs.pipeline(), inputs.node(), inputs.slot(), typeid(In)), ...);
    detail::StepNode node;
    node.spec = std::move(spec);
    node.code_anchor = reinterpret_cast<const void*>(&detail::code_anchor<F>);
    (node.inputs.emplace_back(inputs.node(), inputs.slot()), ...);
    auto names = output_names(node.spec, n_out);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (node.outputs.push_back(detail::make_slot<std::tuple_element_t<I, Tuple>>(names[I])), ...);
    }(std::make_index_sequence<n_out>{});
    node.invoke = [fn = std::move(fn)](std::span<const std::shared_ptr<void>> in,
                                       const StepContext& ctx) mutable -> std::vector<std::shared_ptr<void>> {
      auto call = [&]<std::size_t... I>(std::index_sequence<I...>) -> decltype(auto) {
        if constexpr (with_context)
          return fn(*static_cast<const In*>(in[I].get())..., ctx);
        else
          return fn(*static_cast<const In*>(in[I].get())...);
      };
      std::vector<std::shared_ptr<void>> out;
      if constexpr (Result::many) {
        auto values = call(std::index_sequence_for<In...>{});
        std::apply([&](auto&... v) { (out.push_back(std::make_shared<std::decay_t<decltype(v)>>(std::move(v))), ...); },
                   values);
      } else {
        out.push_back(std::make_shared<std::decay_t<R>>(call(std::index_sequence_for<In...>{})));
      }
      return out;
    };
    std::size_t id = add_node(std::move(node));
    if constexpr (Result::many)
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return std::tuple<Output<std::tuple_element_t<I, Tuple>>...>(
            Output<std::tuple_element_t<I, Tuple>>(id_, id, I)...);
      }(std::make_index_sequence<n_out>{});
    else
      return Output<std::tuple_element_t<0, Tuple>>(id_, id, 0);
  }

  /// Runs the pipeline against `store`: each step either hits the action
  /// cache or runs, independent steps in parallel, and a run record is
  /// written (§1.8). A failing step does not throw: the report says so, its
  /// dependents are skipped and the other steps' outputs stay committed.
  /// Throws InvalidArgument for bad options (an unknown step or parameter),
  /// NotFound for a store input that does not resolve, and store errors
  /// (IoError, ...) that leave the run unrecorded.
  RunReport run(Store& store, const RunOptions& options = {}) const;

  /// The cache key ingredients of step `step` of pipeline `pipeline` as
  /// documented in FORMAT.md §3.8; `external` (StepSpec::external's value)
  /// is left out when null.
  static nlohmann::json cache_key_ingredients(std::string_view pipeline, std::string_view step,
                                              std::string_view version, std::string_view code,
                                              const nlohmann::json& params,
                                              const std::vector<std::pair<std::string, Digest>>& inputs,
                                              const std::vector<std::pair<std::string, const MaterializerEntry*>>& outputs,
                                              const nlohmann::json& external = nullptr);
  /// typed_digest of the ingredients: the cache key.
  static Digest cache_key(const nlohmann::json& ingredients);

  /// Step names in declaration order (store inputs excluded).
  std::vector<std::string> step_names() const;
  /// The steps with neither StepSpec::code nor a fingerprint registered for
  /// their source file (a program not built with amphora_add_pipeline):
  /// they are keyed by the program's own fingerprint instead, so they rerun
  /// after any rebuild of it, and are never served a result of other code.
  std::vector<std::string> steps_keyed_by_program() const;
  /// The declared parameters of `step`; throws NotFound.
  const nlohmann::json& step_params(std::string_view step) const;
  /// The outputs `step` produced in `report` (a run of this pipeline on
  /// `store`), each as (output name, its value as text): JSON for a type
  /// nlohmann::json converts, else what operator<< writes, else the
  /// materializer and ref to give `amphora show`. Loads each value. Throws
  /// NotFound for an unknown step or one without outputs in the run (it
  /// failed or was skipped), and what loading throws.
  std::vector<std::pair<std::string, std::string>> output_texts(const Store& store, const RunReport& report,
                                                                std::string_view step) const;

 private:
  std::size_t add_node(detail::StepNode node);
  // Throws InvalidArgument unless the handle (pipeline, node, slot) is one of
  // this pipeline's, of type `type`, for an input of step `step`.
  void check_handle(const std::string& step, std::uint64_t pipeline, std::size_t node, std::size_t slot,
                    const std::type_index& type) const;
  static std::vector<std::string> output_names(const StepSpec& spec, std::size_t count);
  std::string name_;
  std::uint64_t id_;  // this pipeline's own; a copy gets a new one
  // The pipelines this one copies, each with the nodes it had then: their
  // handles to those nodes are this pipeline's too, later ones are not.
  std::vector<std::pair<std::uint64_t, std::size_t>> copied_from_;
  std::vector<detail::StepNode> nodes_;
};

/// A digest of each regular file under `path` whose name ends with `suffix`
/// (empty = every file), or of `path` itself when it is a regular file
/// (whatever its name), for StepSpec::external: a JSON object from the path
/// relative to `path` (generic form; the file name itself for a file) to its
/// `sha256:` digest. Subdirectories are searched; links to files are
/// followed, directories reached through links are skipped. Reads every
/// byte: cost grows with the files' size. Thread-safe. Throws NotFound when
/// `path` or a listed file is missing, InvalidArgument naming a file that is
/// not regular (a FIFO, a socket) or whose name is not UTF-8, or when more
/// than `max_files` files match, IoError when one cannot be listed or read.
nlohmann::json file_digests(const std::filesystem::path& path, std::string_view suffix = "",
                            std::size_t max_files = 100000);

/// Every run record in the store, oldest first (by start time, then id),
/// all held at once: for many or large records, use run_summaries and
/// read_run. Unreadable records are described in `problems` when given,
/// else skipped.
std::vector<nlohmann::json> list_runs(const Store& store, std::vector<std::string>* problems = nullptr);

/// A run record's headline: what `amphora runs` lists of it.
struct RunSummary {
  std::string pipeline, run, status, started_at, ended_at;  ///< as recorded ("" when absent)
  std::string host;                                         ///< the host that ran it ("" when not recorded)
  std::map<std::string, std::size_t> steps;                 ///< steps by status: "ran", "cached", ...
  std::pair<std::string, std::string> stored_as;            ///< the (pipeline, run) read_run takes
};

/// Every run record's headline, ordered as list_runs orders the records,
/// reading one record at a time without building it: memory stays near one
/// record's size (at most 16 MiB) however many runs there are. Unreadable
/// records are described in `problems` when given, else skipped.
std::vector<RunSummary> run_summaries(const Store& store, std::vector<std::string>* problems = nullptr);

/// The run record `run` of `pipeline` (its "steps" an array). Throws
/// NotFound, or CorruptData for a record that cannot be read.
nlohmann::json read_run(const Store& store, std::string_view pipeline, std::string_view run);

/// The chain of steps and artifacts behind `digest`: one JSON object per
/// artifact reached through step inputs, breadth first from `digest` itself,
/// each {"digest", "names", "stored"} plus, for an artifact a step made, the
/// provenance its oldest such name record holds ("pipeline", "step",
/// "step_version", "output", "run", "params", "inputs", "cache_key", and
/// "external"/"external_digest" when present; docs/FORMAT.md §1.8).
std::vector<nlohmann::json> lineage(const Store& store, const Digest& digest);

}  // namespace amphora

AMPHORA_API_END
