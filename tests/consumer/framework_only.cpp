// Links amphora::framework alone: stores and names, no built-in materializer.

#include <amphora/amphora.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto store = amphora::Store::open(argv[1]);
  for (const auto& name : store.names()) std::cout << name << "\n";
  return store.artifacts().empty() ? 1 : 0;
}
