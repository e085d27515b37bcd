#pragma once
// A store in memory (tests/support/memory_medium.hpp) for comparing
// streaming imports with read-then-save, started afresh every thousand
// inputs so that it stays small; nothing reaches the disk.

#include "memory_medium.hpp"

#include <amphora/store.hpp>

#include <optional>

inline amphora::Store& scratch_store() {
  static int uses = 0;
  static std::optional<amphora::Store> store;
  if (!store || ++uses % 1000 == 0) {
    store.reset();
    store = amphora::Store::open({.create = true, .medium = amphora::testing::make_memory_medium("fuzz scratch")});
  }
  return *store;
}
