#pragma once
// Checks on tensor bytes shared by save, load, validate and .npy import.
// Internal to the materializers.

#include <amphora/buffer.hpp>

#include <cstdint>
#include <optional>

namespace amphora::detail {

/// Offset of the first byte of `data` that is neither 0 nor 1, scanning on
/// all cores. A C++ bool holding any other byte is undefined behaviour, so
/// no bool tensor may carry one.
std::optional<std::uint64_t> find_invalid_bool(ConstBytes data);

}  // namespace amphora::detail
