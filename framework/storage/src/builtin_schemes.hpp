#pragma once
// The URI schemes the framework opens by itself: "file" here, and the
// object stores of the remote layer (framework/remote), which registers
// them through this hook when the scheme registry is first used.

#include <amphora/storage/medium.hpp>

#include <functional>
#include <string>

namespace amphora::detail {

/// Calls `add` for each scheme the remote layer implements ("s3").
void add_remote_schemes(const std::function<void(std::string, MediumFactory)>& add);

}  // namespace amphora::detail
