#include <amphora/everyday.hpp>
#include <amphora/pipeline.hpp>

#include "shared.hpp"

namespace {
std::int64_t helper() { return 1; }
}  // namespace

void add_alpha(amphora::Pipeline& p) {
  p.step({.name = "alpha"}, [] { return helper() + kAlphaOffset /*ALPHA_BODY*/; });
}
