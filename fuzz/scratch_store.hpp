#pragma once
// A store in memory (tests/support/memory_medium.hpp) for comparing
// streaming imports with read-then-save; nothing reaches the disk. Each input
// gets a fresh one: what an input allocates it also frees, so libFuzzer's
// leak check (which scans the heap whenever an input leaves more allocated
// than it found) stays quiet unless something really leaks.

#include "memory_medium.hpp"

#include <amphora/store.hpp>

inline amphora::Store scratch_store() {
  return amphora::Store::open({.create = true, .medium = amphora::testing::make_memory_medium("fuzz scratch")});
}
