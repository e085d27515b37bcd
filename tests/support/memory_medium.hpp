#pragma once
// A medium that keeps every object in memory: the second implementation of
// the storage interface, built on its public header alone, that the
// conformance suite holds to the same rules as the local directory, and a
// store for tests and fuzz targets that never touches the disk.

#include <amphora/storage/medium.hpp>

#include <memory>
#include <string>

namespace amphora::testing {

/// A new, empty in-memory medium. Its objects live as long as it does.
/// `location` names it in messages.
std::shared_ptr<Medium> make_memory_medium(std::string location = "memory");

/// Registers the URI scheme "memory": "memory://NAME" opens the in-memory
/// medium NAME of this process, made empty on first use (with `create`;
/// NotFound otherwise) and shared by every later open. Safe to call more
/// than once.
void register_memory_scheme();

}  // namespace amphora::testing
