#pragma once
// Registration of Amphora's built-in materializers.

#include <amphora/registry.hpp>
#include <amphora/store.hpp>

namespace amphora {

/// Adds every built-in materializer ("amphora.tensor", ...) and its file
/// formats (".npy", ...) to `registry`. Call once per registry; throws
/// InvalidArgument if any of them is already registered.
void register_builtins(Registry& registry);

namespace detail {
/// Makes Store::open without a registry use the built-ins. Runs before main
/// in every program that includes a header of the materializers library
/// (they all include this one), which also keeps that library linked.
bool use_builtins_by_default();
inline const bool builtins_by_default = use_builtins_by_default();
}  // namespace detail

}  // namespace amphora
