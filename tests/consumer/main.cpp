#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/tensor.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto registry = std::make_shared<amphora::Registry>();
  amphora::register_builtins(*registry);
  auto store = amphora::Store::open(argv[1], {.create = true, .registry = registry});
  auto t = amphora::Tensor::from_values<float>({2, 2}, {1.f, 2.f, 3.f, 4.f});
  auto saved = store.save(t, {.name = "consumer"});
  auto back = store.load<amphora::Tensor>("consumer");
  if (!back.bit_equal(t) || !store.verify().ok()) return 1;
  std::cout << "consumer ok " << saved.digest.str() << "\n";
  return 0;
}
