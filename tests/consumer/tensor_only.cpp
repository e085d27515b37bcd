// A program that includes only <amphora/tensor.hpp> sees the tensor API, not
// the store or the storage interface: defining classes of those names here
// would not compile if the header had brought theirs in.
#include <amphora/tensor.hpp>

namespace amphora {
class Store {
 public:
  int mine = 0;
};
class Medium {
 public:
  int mine = 0;
};
struct ObjectInfo {
  int mine = 0;
};
class ObjectLeases {};
}  // namespace amphora

int main() {
  amphora::Store store;
  amphora::Medium medium;
  auto t = amphora::Tensor::zeros(amphora::DType::int32, {2, 3});
  return static_cast<int>(t.num_elements()) - 6 + store.mine + medium.mine + amphora::ObjectInfo{}.mine;
}
