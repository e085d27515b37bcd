#pragma once
// Loops that wait on a medium (requests to an object store), spread over
// threads of their own rather than the compute pool. Internal to the framework.

#include <cstddef>
#include <functional>

namespace amphora::detail {

/// Runs body(0..count-1) on up to `jobs` threads (the caller's among them);
/// the first exception stops the rest and is rethrown. For waiting on a
/// medium, not for computing: threads beyond the cores are the point.
void run_parallel(std::size_t count, std::size_t jobs, const std::function<void(std::size_t)>& body);

}  // namespace amphora::detail
