#include <amphora/run_main.hpp>

void add_alpha(amphora::Pipeline& p);
void add_beta(amphora::Pipeline& p);

int main(int argc, char** argv) {
  amphora::Pipeline p("fp");
  add_alpha(p);
  add_beta(p);
  return amphora::run_main(p, argc, argv);
}
