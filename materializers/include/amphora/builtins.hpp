#pragma once
// Registration of Amphora's built-in materializers.

#include <amphora/registry.hpp>

namespace amphora {

/// Adds every built-in materializer ("amphora.tensor", ...) and its file
/// formats (".npy", ...) to `registry`. Call once per registry; throws
/// InvalidArgument if any of them is already registered.
void register_builtins(Registry& registry);

}  // namespace amphora
