#pragma once
// A medium that keeps every object in memory: the second implementation of
// the storage interface, built on its public header alone, that the
// conformance suite holds to the same rules as the local directory, and a
// store for tests and fuzz targets that never touches the disk.

#include <amphora/storage/medium.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace amphora::testing {

/// What a medium was asked to read: each positional read, whole get and map
/// is one call (one request, were it an object store).
struct ReadCount {
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> bytes{0};
};

/// A new, empty in-memory medium. Its objects live as long as it does.
/// `location` names it in messages; `reads`, when given, counts its reads.
std::shared_ptr<Medium> make_memory_medium(std::string location = "memory", std::shared_ptr<ReadCount> reads = nullptr);

/// Registers the URI scheme "memory": "memory://NAME" opens the in-memory
/// medium NAME of this process, made empty on first use (with `create`;
/// NotFound otherwise) and shared by every later open. Safe to call more
/// than once.
void register_memory_scheme();

}  // namespace amphora::testing
