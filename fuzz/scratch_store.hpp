#pragma once
// A store under the fuzzer's scratch directory for comparing streaming
// imports with read-then-save, started afresh every thousand inputs so that
// it stays small.

#include <amphora/store.hpp>

#include <filesystem>
#include <optional>

inline amphora::Store& scratch_store(const std::filesystem::path& dir) {
  static int uses = 0;
  static std::optional<amphora::Store> store;
  if (!store || ++uses % 1000 == 0) {
    store.reset();
    std::filesystem::remove_all(dir);
    store = amphora::Store::open(dir, {.create = true});
  }
  return *store;
}
