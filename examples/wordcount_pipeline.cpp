// The README's two-step cached pipeline: run it twice and the second run
// comes from the cache; `--set count.min_length=5` reruns only `count`.
#include <amphora/amphora.hpp>
#include <amphora/everyday.hpp>
#include <amphora/run_main.hpp>

#include <map>
#include <sstream>

int main(int argc, char** argv) {
  amphora::Pipeline p("wordcount");
  auto words = p.step({.name = "split", .params = {{"text", "the cat sat on the mat"}}},
                      [](const amphora::StepContext& c) {
                        std::vector<std::string> out;
                        std::istringstream in(c.param<std::string>("text"));
                        for (std::string w; in >> w;) out.push_back(w);
                        return out;
                      });
  p.step({.name = "count", .params = {{"min_length", 1}}},
         [](const std::vector<std::string>& ws, const amphora::StepContext& c) {
           std::map<std::string, std::int64_t> counts;
           for (const auto& w : ws)
             if (w.size() >= c.param<std::size_t>("min_length")) ++counts[w];
           return counts;
         },
         words);
  return amphora::run_main(p, argc, argv);
}
