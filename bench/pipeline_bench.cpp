// Section "pipeline": what a pipeline costs when nothing changed. A chain of
// 100 trivial steps run once and then rerun fully cached; a 1,000-step chain
// and a 1,000-step wide DAG (one source, 999 steps reading it) rerun fully
// cached; and the per-step parts of a cached step: computing its key,
// looking it up (entry, manifests, file sizes, the output's latest name
// version) and recording the run.

#include "bench_common.hpp"

#include <amphora/everyday.hpp>
#include <amphora/pipeline.hpp>

namespace amphora_bench {

namespace {

amphora::Pipeline chain(std::size_t steps) {
  amphora::Pipeline p("chain" + std::to_string(steps));
  auto prev = p.step({.name = "s0", .params = {{"start", 1}}},
                     [](const amphora::StepContext& c) { return c.param<std::int64_t>("start"); });
  for (std::size_t i = 1; i < steps; ++i)
    prev = p.step({.name = "s" + std::to_string(i), .inputs = {"prev"}}, [](const std::int64_t& x) { return x + 1; },
                  prev);
  return p;
}

amphora::Pipeline wide(std::size_t steps) {
  amphora::Pipeline p("wide" + std::to_string(steps));
  auto source = p.step({.name = "source"}, [] { return std::int64_t{7}; });
  for (std::size_t i = 1; i < steps; ++i)
    p.step({.name = "w" + std::to_string(i), .params = {{"i", i}}},
           [](const std::int64_t& x, const amphora::StepContext& c) { return x * c.param<std::int64_t>("i"); }, source);
  return p;
}

struct Reruns {
  double first = 0;              // the first run, every step executing
  std::vector<double> cached;    // fully cached reruns
  bool ok = true;
};

Reruns time_reruns(const amphora::Pipeline& p, amphora::Store& store, int repeats) {
  Reruns r;
  touch_scratch();
  auto t0 = Clock::now();
  auto first = p.run(store);
  r.first = seconds_since(t0);
  r.ok = first.ok && first.count("ran") == first.steps.size();
  for (int i = 0; i < repeats; ++i) {
    touch_scratch();
    t0 = Clock::now();
    auto again = p.run(store);
    r.cached.push_back(seconds_since(t0));
    r.ok = r.ok && again.ok && again.count("cached") == again.steps.size();
  }
  return r;
}

}  // namespace

void run_pipeline(const Options& o, Verdicts& verdict) {
  const int repeats = std::max(3, o.repeats);
  const std::size_t big = o.quick ? 200 : 1000;
  std::printf("\nPipelines: fully cached reruns (in-process, program start excluded; median of %d reruns)\n", repeats);
  // A store each: the chains share their first 100 steps' keys.
  const fs::path dir = o.dir / "store-pipeline";
  auto store = fresh_store(dir / "chain100");
  auto c100 = time_reruns(chain(100), store, repeats);
  store = fresh_store(dir / "chain");
  auto cbig = time_reruns(chain(big), store, repeats);
  store = fresh_store(dir / "wide");
  auto wbig = time_reruns(wide(big), store, repeats);
  const double m100 = median(c100.cached), mcbig = median(cbig.cached), mwbig = median(wbig.cached);
  std::printf("  chain of 100 steps:    first run %8.1f ms, cached rerun %7.2f ms (%5.1f us/step)\n",
              c100.first * 1e3, m100 * 1e3, m100 / 100 * 1e6);
  std::printf("  chain of %zu steps:   first run %8.1f ms, cached rerun %7.2f ms (%5.1f us/step)\n", big,
              cbig.first * 1e3, mcbig * 1e3, mcbig / static_cast<double>(big) * 1e6);
  std::printf("  wide DAG of %zu steps: first run %8.1f ms, cached rerun %7.2f ms (%5.1f us/step)\n", big,
              wbig.first * 1e3, mwbig * 1e3, mwbig / static_cast<double>(big) * 1e6);

  // The parts of one cached step, measured on their own over the wide DAG's steps.
  auto report = wide(big).run(store);
  std::vector<nlohmann::json> ingredients;
  for (const auto& s : report.record["steps"]) ingredients.push_back(s["ingredients"]);
  touch_scratch();
  auto t0 = Clock::now();
  bool same = true;
  for (std::size_t i = 0; i < report.steps.size(); ++i)
    same = same && amphora::Pipeline::cache_key(ingredients[i]) == report.steps[i].key;
  const double key_s = seconds_since(t0) / static_cast<double>(report.steps.size());
  // The cache entries and run records through the store's medium, as the
  // pipeline reads and writes them (docs/FORMAT.md §1.7, §1.8).
  auto medium = amphora::open_local_medium(dir / "wide", false);
  touch_scratch();
  t0 = Clock::now();
  for (const auto& s : report.steps) {
    auto entry = amphora::parse_untrusted_json(medium->get("cache/" + s.key.hex() + ".json", 1u << 20));
    auto digest = amphora::Digest::parse(entry["outputs"]["out"].get<std::string>());
    same = same && store.damage(store.open_artifact(digest)).empty();
    auto versions = store.version_numbers(s.outputs[0].ref.substr(0, s.outputs[0].ref.find('@')));
    same = same && !versions.empty();
  }
  const double lookup_s = seconds_since(t0) / static_cast<double>(report.steps.size());
  touch_scratch();
  t0 = Clock::now();
  medium->put("runs/" + report.pipeline + "/" + report.run_id + "-bench.json", report.record.dump(1) + "\n");
  const double record_s = seconds_since(t0) / static_cast<double>(report.steps.size());
  std::printf("  per cached step: key %.1f us, cache lookup and output check %.1f us, run recording %.1f us\n",
              key_s * 1e6, lookup_s * 1e6, record_s * 1e6);

  bool ok = c100.ok && cbig.ok && wbig.ok && report.ok && same;
  if (!ok) std::printf("  MISMATCH: a run did not execute or hit the cache as expected\n");
  const double per_step_small = m100 / 100, per_step_big = mcbig / static_cast<double>(big);
  std::printf("  cached rerun of 100 steps well under 100 ms: %s\n", verdict(ok && m100 < 0.05));
  // Linear: per-step cost at 1,000 steps within 2x of that at 100.
  std::printf("  per-step cost %.1f us at 100 steps, %.1f us at %zu (x%.2f): %s\n", per_step_small * 1e6,
              per_step_big * 1e6, big, per_step_big / per_step_small, verdict(ok && per_step_big < 2 * per_step_small));
  retire(dir);
}

}  // namespace amphora_bench
