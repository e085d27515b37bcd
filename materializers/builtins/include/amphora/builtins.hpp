#pragma once
// Registration of Amphora's built-in materializers. Every registry made
// with defaults (Registry::with_defaults(), a Store opened without a
// registry) holds them in a program that includes this header, as every
// header of the materializers library does.

#include <amphora/export.hpp>
#include <amphora/registry.hpp>

AMPHORA_API_BEGIN

namespace amphora {

/// Adds every built-in materializer ("amphora.tensor", ...) and its file
/// formats (".npy", ...) to `registry`. Throws InvalidArgument if any of them
/// is already registered.
void register_builtins(Registry& registry);

namespace detail {
/// True once the built-ins are among the registry defaults
/// (register_defaults). Referenced below so that a program including a
/// materializer header links the object file whose initializer registers
/// them, even from a static library.
bool builtins_are_defaults();
inline const bool builtins_linked = builtins_are_defaults();
}  // namespace detail

}  // namespace amphora

AMPHORA_API_END
