// A type of the program's own, taught to Amphora in one place and
// registered so that type-erased tools (verify, show) know it too.
//   amphora_custom_type STORE_DIR
//
// A histogram keeps an invariant (edges strictly increasing, one count per
// bin): its materializer stores both as .npy arrays numpy opens, checks the
// invariant on load, and lets `verify` check it on the stored bytes.

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>

#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

class Histogram {
 public:
  /// Throws std::invalid_argument unless edges increase and counts fill the bins.
  Histogram(std::vector<double> edges, std::vector<std::int64_t> counts) : edges_(std::move(edges)), counts_(std::move(counts)) {
    if (const std::string problem = check(edges_, counts_); !problem.empty()) throw std::invalid_argument(problem);
  }
  const std::vector<double>& edges() const { return edges_; }
  const std::vector<std::int64_t>& counts() const { return counts_; }
  bool operator==(const Histogram&) const = default;

  /// What breaks the invariant, or "".
  static std::string check(std::span<const double> edges, std::span<const std::int64_t> counts) {
    if (edges.size() < 2) return "a histogram needs at least 2 edges, not " + std::to_string(edges.size());
    if (counts.size() != edges.size() - 1)
      return std::to_string(edges.size()) + " edges need " + std::to_string(edges.size() - 1) + " counts, not " +
             std::to_string(counts.size());
    for (std::size_t i = 1; i < edges.size(); ++i)
      if (!(edges[i - 1] < edges[i])) return "edge " + std::to_string(i) + " does not increase";
    return {};
  }

 private:
  std::vector<double> edges_;
  std::vector<std::int64_t> counts_;
};

template <>
struct amphora::materializer<Histogram> {
  static constexpr std::string_view name = "example.histogram";  // stable: artifacts are found by it
  static constexpr int version = 1;
  static void save(const Histogram& h, ArtifactWriter& out) {
    out.write_array<double>("edges.npy", h.edges());
    out.write_array<std::int64_t>("counts.npy", h.counts());
    out.meta()["bins"] = h.counts().size();
  }
  static Histogram load(const ArtifactReader& in) {
    // The views own the mapped files; the spans borrow from them.
    const ArrayView edges_file = in.read_array("edges.npy", DType::float64, 1);
    const ArrayView counts_file = in.read_array("counts.npy", DType::int64, 1);
    const auto edges = edges_file.values<double>();
    const auto counts = counts_file.values<std::int64_t>();
    if (const std::string problem = Histogram::check(edges, counts); !problem.empty())
      throw CorruptData(in.label() + ": " + problem);
    return Histogram(std::vector<double>(edges.begin(), edges.end()), std::vector<std::int64_t>(counts.begin(), counts.end()));
  }
  static void validate(const ArtifactReader& in) { (void)load(in); }
};

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: amphora_custom_type STORE_DIR\n";
    return 2;
  }
  try {
    auto registry = amphora::Registry::with_defaults();
    registry->add<Histogram>();  // for verify and show; save and load work without it
    auto store = amphora::Store::open(argv[1], {.create = true, .registry = registry});

    const Histogram latency({0, 1, 2.5, 5, 10}, {120, 48, 9, 1});
    const auto saved = store.save(latency, {.name = "latency"});
    const Histogram back = store.load<Histogram>("latency");
    const auto report = store.verify("latency");
    std::cout << "saved latency@" << saved.version << " " << saved.digest.short_str() << ", "
              << back.counts().size() << " bins, " << (back == latency ? "equal" : "DIFFERENT") << ", verify "
              << (report.ok() ? "ok" : "FAILED") << "\n";
    return back == latency && report.ok() ? 0 : 1;
  } catch (const amphora::Error& e) {
    std::cerr << "amphora_custom_type: " << e.what() << "\n";
    return 1;
  }
}
