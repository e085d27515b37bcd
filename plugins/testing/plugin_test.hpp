#pragma once
// What the example plugins' tests share: a scratch directory, the `amphora`
// command run with a store, and where docs/FORMAT.md puts an artifact.

#include <amphora/digest.hpp>
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdlib.h>
#include <string>
#include <sys/wait.h>

namespace plugin_test {

namespace fs = std::filesystem;

/// The tests say which plugins each command loads: none from the caller's
/// $AMPHORA_PLUGIN_PATH, or "without the plugin" would not be.
inline const bool kNoCallerPlugins = (::unsetenv("AMPHORA_PLUGIN_PATH"), true);

/// A fresh directory, removed with everything in it at scope exit.
struct Scratch {
  Scratch() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("amphora-plugin-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  fs::path path;
};

struct Ran {
  int status;          ///< exit status, -1 when killed
  std::string output;  ///< standard output and error
};

/// Runs `command` through the shell, collecting what it prints.
inline Ran run_shell(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe);
  std::string output;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

/// Runs `cli --store STORE ARGS` (ARGS quoted by the caller).
inline Ran run_cli(const std::string& cli, const fs::path& store, const std::string& args) {
  return run_shell("'" + cli + "' --store '" + store.string() + "' " + args);
}

/// Runs the Python program `source` with Debian's interpreter (the one with
/// numpy), written to DIR/check.py, with `args` (quoted by the caller).
inline Ran run_python(const fs::path& dir, const std::string& source, const std::string& args) {
  const fs::path script = dir / "check.py";
  std::ofstream(script) << source;
  return run_shell("/usr/bin/python3 '" + script.string() + "' " + args);
}

#if defined(AMPHORA_TEST_CLI) && defined(AMPHORA_TEST_PLUGIN)
/// The `amphora` command and the plugin under test, as amphora_example_plugin
/// (plugins/CMakeLists.txt) gives every example plugin's test.
inline const std::string kCli = AMPHORA_TEST_CLI;
inline const std::string kPlugin = AMPHORA_TEST_PLUGIN;

/// Runs `amphora --store STORE ARGS` (ARGS quoted by the caller).
inline Ran run_cli(const fs::path& store, const std::string& args) { return run_cli(kCli, store, args); }
#endif

/// Where docs/FORMAT.md puts the files of artifact `d`.
inline fs::path object_dir(const fs::path& store, const amphora::Digest& d) {
  return store / "objects" / "sha256" / d.hex().substr(0, 2) / d.hex();
}

}  // namespace plugin_test
