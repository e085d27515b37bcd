#pragma once
// A process-wide worker pool for data-parallel loops (hashing, compression).

#include <amphora/export.hpp>

#include <cstddef>
#include <functional>

AMPHORA_API_BEGIN

namespace amphora {

/// Number of threads parallel_for uses, including the caller (at least 1).
std::size_t parallel_threads();

/// Runs body(i) for every i in [0, count), spreading indices over the shared
/// pool; the calling thread takes part, so nested or concurrent calls cannot
/// deadlock. `max_threads` (0 = all) caps the threads used. The first
/// exception thrown by a body is rethrown here after every started body ends.
void parallel_for(std::size_t count, const std::function<void(std::size_t)>& body, std::size_t max_threads = 0);

}  // namespace amphora

AMPHORA_API_END
