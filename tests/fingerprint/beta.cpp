#include <amphora/everyday.hpp>
#include <amphora/pipeline.hpp>

void add_beta(amphora::Pipeline& p) {
  p.step({.name = "beta"}, [] { return std::int64_t{2} /*BETA_BODY*/; });
}
