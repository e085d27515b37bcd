// A small pipeline program for the command-line and multi-process tests:
// numbers(n) -> square -> total. The environment steers it without
// touching cache keys: $AMPHORA_TEST_LOG (a file each executed step appends
// its name to), $AMPHORA_TEST_DELAY (seconds `numbers` sleeps),
// $AMPHORA_TEST_MARKER (a file `numbers` creates before sleeping) and
// $AMPHORA_TEST_FAIL (the name of a step that throws) with the message
// $AMPHORA_TEST_FAIL_MESSAGE (default "asked to fail").

#include <amphora/amphora.hpp>
#include <amphora/everyday.hpp>
#include <amphora/run_main.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

void executed(const std::string& step) {
  if (const char* fail = std::getenv("AMPHORA_TEST_FAIL"); fail && step == fail)
    throw std::runtime_error(std::getenv("AMPHORA_TEST_FAIL_MESSAGE") ? std::getenv("AMPHORA_TEST_FAIL_MESSAGE")
                                                                       : "asked to fail");
  if (const char* log = std::getenv("AMPHORA_TEST_LOG")) std::ofstream(log, std::ios::app) << step << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  amphora::Pipeline p("testpipe");
  auto numbers = p.step({.name = "numbers", .params = {{"n", 10}}}, [](const amphora::StepContext& c) {
    if (const char* marker = std::getenv("AMPHORA_TEST_MARKER")) std::ofstream(marker) << "started\n";
    if (const char* delay = std::getenv("AMPHORA_TEST_DELAY"))
      std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(delay)));
    executed("numbers");
    std::vector<std::int64_t> v(c.param<std::size_t>("n"));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(i);
    return v;
  });
  auto squares = p.step({.name = "square"}, [](const std::vector<std::int64_t>& v) {
    executed("square");
    auto out = v;
    for (auto& x : out) x *= x;
    return out;
  }, numbers);
  p.step({.name = "total", .params = {{"offset", 0}}}, [](const std::vector<std::int64_t>& v, const amphora::StepContext& c) {
    executed("total");
    std::int64_t sum = c.param<std::int64_t>("offset");
    for (auto x : v) sum += x;
    return sum;
  }, squares);
  return amphora::run_main(p, argc, argv);
}
