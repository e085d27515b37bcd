#pragma once
// Summary statistics of a tensor (min, max, mean, NaN count), computed over
// fixed 256 KiB blocks of its .npy file. A block seen whole while the file is
// hashed is summarised then, while it is in cache; the rest are summarised at
// the end. Blocks are combined in file order, so the figures, which are hashed
// in the manifest, never depend on thread count or on how hashing cut the
// file. Internal to the materializers.

#include <amphora/tensor.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>

namespace amphora::detail {

class TensorStats {
 public:
  /// `data_offset` is where the tensor's data starts in the observed file.
  TensorStats(const Tensor& tensor, std::uint64_t data_offset);
  ~TensorStats();

  /// Takes a range of the file just hashed. Thread-safe for disjoint ranges.
  void observe(std::uint64_t file_offset, ConstBytes bytes);
  /// The "stats" metadata: null for empty and complex tensors.
  nlohmann::json finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace amphora::detail
