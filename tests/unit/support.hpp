#pragma once
// Shared helpers for the unit tests.

#include <amphora/amphora.hpp>
#include <amphora/builtins.hpp>
#include <amphora/tensor.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>

namespace test {

namespace fs = std::filesystem;

/// A fresh directory removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("amphora-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& p) const { return path_ / p; }

 private:
  fs::path path_;
};

inline amphora::Store make_store(const fs::path& dir) { return amphora::Store::open(dir, {.create = true}); }

/// Saves `value` with the entry the store's registry holds for T: for the
/// types whose materializer a test registers at run time (store.save<T>
/// takes only types with a materializer<T>).
template <class T>
amphora::SaveResult save_registered(amphora::Store& store, const T& value, const amphora::SaveOptions& options = {}) {
  return store.save_erased(*store.registry().for_type(typeid(T)), &value, options);
}

/// Size multiplier for the heavier tests: $AMPHORA_TEST_SCALE (default 1).
inline int scale() {
  const char* env = std::getenv("AMPHORA_TEST_SCALE");
  int s = env ? std::atoi(env) : 1;
  return s < 1 ? 1 : s;
}

/// A tensor of `dtype` filled with random bytes (every bit pattern, so NaNs,
/// infinities and negative zeros occur for float types); bools are 0 or 1.
inline amphora::Tensor random_tensor(amphora::DType dtype, std::vector<std::int64_t> shape, std::uint64_t seed) {
  auto t = amphora::Tensor::zeros(dtype, std::move(shape));
  std::mt19937_64 rng(seed);
  auto* p = t.mutable_data();
  for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<std::byte>(rng());
  if (dtype == amphora::DType::bool_)
    for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<std::byte>(static_cast<unsigned>(p[i]) & 1u);
  return t;
}

/// A compressible int32 tensor (a slowly varying ramp with some noise).
inline amphora::Tensor ramp_tensor(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  auto t = amphora::Tensor::zeros(amphora::DType::int32, {rows, cols});
  std::mt19937 rng(static_cast<unsigned>(seed));
  auto v = t.mutable_values<std::int32_t>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i / 64) + static_cast<std::int32_t>(rng() % 4);
  return t;
}

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

inline void write_text(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

/// What import_while_changing saw.
struct ChangedImport {
  bool rewritten = false;  ///< the file was rewritten during the import
  std::string error;       ///< what the import threw; empty when it did not
};

/// Imports `file` holding `before`, rewriting it to hold `after` at the
/// import's first progress report: during its first pass, after the file's
/// one block was read, so only the later passes see the change.
inline ChangedImport import_while_changing(amphora::Store& store, const fs::path& file, const std::string& before,
                                           const std::string& after) {
  write_text(file, before);
  ChangedImport seen;
  amphora::SaveOptions options;
  options.progress = [&](std::uint64_t) {
    if (!std::exchange(seen.rewritten, true)) write_text(file, after);
  };
  try {
    store.import_file(file, options);
  } catch (const amphora::Error& e) {
    seen.error = e.what();
  }
  return seen;
}

/// The directory of a published artifact in a local store.
inline fs::path object_dir(const fs::path& store, const amphora::Digest& d) {
  return store / "objects" / "sha256" / d.hex().substr(0, 2) / d.hex();
}

/// Flips one byte of a file in place.
inline void flip_byte(const fs::path& p, std::uint64_t offset) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

}  // namespace test
