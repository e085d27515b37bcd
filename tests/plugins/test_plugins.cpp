// Loading plugins into a host that links Amphora's shared libraries, as any
// program does: the good plugin's materializers work through the registry
// and the store; every broken plugin is refused, naming the library, and
// leaves the registry as it was.

#define CATCH_CONFIG_MAIN
#include <amphora/amphora.hpp>
#include <amphora/plugin.hpp>
#include <catch2/catch.hpp>

#include "support.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace amphora;
using test::TempDir;

namespace {

const fs::path kGoodDir = AMPHORA_TEST_GOOD_PLUGINS;
const fs::path kBrokenDir = AMPHORA_TEST_BROKEN_PLUGINS;
const fs::path kPoints = kGoodDir / "test_point_plugin.so";

// Everything a registry holds, as text, to compare before and after.
std::set<std::string> contents(const Registry& r) {
  std::set<std::string> all;
  for (const auto& e : r.entries()) all.insert("materializer " + e->name + " " + e->origin);
  for (const auto& f : r.formats()) all.insert("format " + f->extension + " " + f->materializer);
  for (const auto& p : r.plugins()) all.insert("plugin " + p.name + " " + p.path.string());
  return all;
}


}  // namespace

TEST_CASE("A plugin's materializers and formats join the registry, with the plugin as their origin") {
  auto registry = Registry::with_defaults();
  const auto before = registry->entries().size();
  PluginInfo info = registry->load_plugin(kPoints);
  CHECK(info.name == "test.points");
  CHECK(info.version == "1.2.0");
  CHECK(info.path == fs::canonical(kPoints));
  CHECK(info.materializers == std::vector<std::string>{"test.fragile", "test.point"});
  CHECK(info.formats == std::vector<std::string>{".point", ".fragile"});
  CHECK(registry->entries().size() == before + 2);
  auto point = registry->find("test.point");
  REQUIRE(point);
  CHECK(point->origin == info.path.string());
  CHECK(point->version == 1);
  REQUIRE(registry->format_for("a.point"));
  CHECK(registry->format_for("a.point")->origin == info.path.string());
  REQUIRE(registry->plugins().size() == 1);
  CHECK(registry->plugins()[0].name == "test.points");

  // Loaded again, by the same path or through a link: the same plugin, once.
  TempDir dir;
  fs::create_symlink(fs::canonical(kPoints), dir / "alias.so");
  const auto all = contents(*registry);
  CHECK(registry->load_plugin(kPoints).path == info.path);
  CHECK(registry->load_plugin(dir / "alias.so").path == info.path);
  CHECK(contents(*registry) == all);
  // A copy is another library with the same plugin name: refused.
  fs::copy_file(kPoints, dir / "copy.so");
  CHECK_THROWS_WITH(registry->load_plugin(dir / "copy.so"),
                    Catch::Contains((dir / "copy.so").string()) &&
                        Catch::Contains("a plugin named 'test.points' is loaded already, from " + info.path.string()));
  CHECK(contents(*registry) == all);
}

TEST_CASE("A value saved through a plugin round-trips, and its errors reach the host as Amphora's") {
  TempDir dir;
  auto registry = Registry::with_defaults();
  registry->load_plugin(kPoints);
  Store store = Store::open(dir / "store", {.create = true, .registry = registry});
  test::write_text(dir / "in.point", "1.5 -2.25 apex\n");
  auto format = registry->format_for(dir / "in.point");
  REQUIRE(format);
  auto value = format->read(dir / "in.point");
  auto entry = registry->find("test.point");
  auto saved = store.save_erased(*entry, value.get(), {.name = "apex"});
  ArtifactReader reader = store.open_artifact("apex");
  CHECK(reader.manifest().materializer == "test.point");
  CHECK(reader.meta()["fields"]["x"] == 1.5);
  CHECK(reader.meta()["fields"]["label"] == "apex");
  auto back = entry->load(reader);
  format->write(back.get(), dir / "out.point");
  CHECK(test::read_text(dir / "out.point") == "1.5 -2.25 apex\n");
  CHECK(store.verify().ok());

  // Thrown in the plugin, caught here by class.
  test::write_text(dir / "bad.point", "not a point");
  CHECK_THROWS_AS(format->read(dir / "bad.point"), InvalidArgument);
  auto fragile_format = registry->format_for(dir / "x.fragile");
  REQUIRE(fragile_format);
  test::write_text(dir / "minus.fragile", "-3");
  CHECK_THROWS_AS(fragile_format->read(dir / "minus.fragile"), TypeMismatch);
  CHECK_THROWS_AS(fragile_format->read(dir / "minus.fragile"), Unsupported);
  test::write_text(dir / "seven.fragile", "7");
  auto fragile = fragile_format->read(dir / "seven.fragile");
  auto fragile_entry = registry->find("test.fragile");
  auto fragile_saved = store.save_erased(*fragile_entry, fragile.get(), {});
  try {
    (void)fragile_entry->load(store.open_artifact(fragile_saved.digest.str()));
    FAIL("test.fragile loaded");
  } catch (const CorruptData& e) {
    CHECK(std::string(e.what()).find("refuses to load (code 7)") != std::string::npos);
  }

  // A host without the plugin keeps the artifact and says what loads it.
  Store plain = Store::open(dir / "store");
  CHECK_THROWS_AS(plain.load_erased("apex"), Unsupported);
  CHECK_THROWS_WITH(plain.load_erased("apex"),
                    Catch::Contains("materializer 'test.point' (format version 1), which is not registered"));
  CHECK(plain.verify().ok());
  // ... and which plugin on $AMPHORA_PLUGIN_PATH would.
  ::setenv("AMPHORA_PLUGIN_PATH", (kBrokenDir.string() + ":" + kGoodDir.string()).c_str(), 1);
  CHECK_THROWS_WITH(plain.load_erased("apex"),
                    Catch::Contains("the plugin " + fs::canonical(kPoints).string() + " on $AMPHORA_PLUGIN_PATH provides it"));
  ::unsetenv("AMPHORA_PLUGIN_PATH");
}

TEST_CASE("Broken plugins are refused, naming the library, and leave the registry as it was") {
  auto registry = Registry::with_defaults();
  registry->load_plugin(kPoints);
  const auto before = contents(*registry);
  struct Case {
    const char* file;
    const char* says;
  };
  for (const Case& c : {Case{"test_no_entry_plugin.so", "is not an Amphora plugin: it exports no amphora_plugin_entry"},
                        Case{"test_wrong_abi_plugin.so", "was built for 'amphora 0.0 boundary 0"},
                        Case{"test_throwing_plugin.so",
                             "('test.throwing') failed to register: deliberate failure after one materializer; "
                             "nothing of it was registered"},
                        Case{"test_duplicate_plugin.so", "materializer name 'amphora.tensor' is registered twice"}}) {
    INFO(c.file);
    const fs::path path = fs::canonical(kBrokenDir / c.file);
    CHECK_THROWS_WITH(registry->load_plugin(path), Catch::Contains("plugin " + path.string()) && Catch::Contains(c.says));
    CHECK(contents(*registry) == before);
    CHECK_FALSE(registry->find("test.half_registered"));
    CHECK_FALSE(registry->find("test.fresh"));
  }
  CHECK_THROWS_AS(registry->load_plugin(kBrokenDir / "test_wrong_abi_plugin.so"), Unsupported);
  CHECK_THROWS_AS(registry->load_plugin(kBrokenDir / "test_no_entry_plugin.so"), InvalidArgument);
  CHECK_THROWS_AS(registry->load_plugin(kBrokenDir / "missing.so"), NotFound);
  TempDir dir;
  test::write_text(dir / "text.so", "not a library");
  CHECK_THROWS_WITH(registry->load_plugin(dir / "text.so"),
                    Catch::Contains(fs::canonical(dir / "text.so").string()) && Catch::Contains("cannot be loaded"));
  CHECK(contents(*registry) == before);
}

TEST_CASE("Plugins are found on a search path and on $AMPHORA_PLUGIN_PATH") {
  TempDir dir;
  {
    auto registry = Registry::with_defaults();
    auto loaded = registry->load_plugins("::" + (dir / "absent").string() + ":" + kGoodDir.string() + ":");
    REQUIRE(loaded.size() == 1);
    CHECK(loaded[0].name == "test.points");
    CHECK(registry->find("test.point"));
  }
  {
    auto registry = Registry::with_defaults();
    ::unsetenv("AMPHORA_PLUGIN_PATH");
    CHECK(registry->load_env_plugins().empty());
    ::setenv("AMPHORA_PLUGIN_PATH", kGoodDir.c_str(), 1);
    CHECK(registry->load_env_plugins().size() == 1);
    ::unsetenv("AMPHORA_PLUGIN_PATH");
    CHECK(registry->find("test.point"));
  }
  {
    // A directory holding a broken plugin fails with that plugin's path.
    auto registry = Registry::with_defaults();
    CHECK_THROWS_WITH(registry->load_plugins(kBrokenDir.string()), Catch::Contains(kBrokenDir.string()));
  }
}

TEST_CASE("A plugin directory that cannot be listed is named by load_plugins, passed over by plugins_providing") {
  if (::geteuid() != 0) {
    WARN("skipped: making a directory unlistable to a user needs root to switch to that user");
    return;
  }
  TempDir dir;
  fs::permissions(dir.path(), fs::perms::all);
  const fs::path locked = dir / "locked";
  fs::create_directory(locked);
  fs::permissions(locked, fs::perms::none);
  const std::string path = locked.string() + ":" + kGoodDir.string();
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(9);
    int status = 0;
    try {
      Registry registry;
      registry.load_plugins(path);
      status = 1;  // listed what it cannot list
    } catch (const IoError& e) {
      if (std::string(e.what()).find(locked.string() + " cannot be listed") == std::string::npos) status = 2;
    } catch (...) {
      status = 3;
    }
    try {
      const auto found = plugins_providing("test.point", path);
      if (found.size() != 1 || found.front().parent_path() != fs::canonical(kGoodDir)) status = status ? status : 4;
    } catch (...) {
      status = 5;
    }
    ::_exit(status);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  fs::permissions(locked, fs::perms::owner_all);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("What is not a regular file is refused by path, at once, never opened") {
  // A FIFO would block dlopen until a writer came; a directory or a device
  // is no library. Each is refused before it is opened, naming it.
  TempDir dir;
  REQUIRE(::mkfifo((dir / "fifo.so").c_str(), 0600) == 0);
  fs::create_directory(dir / "folder.so");
  auto registry = Registry::with_defaults();
  const auto before = contents(*registry);
  for (const fs::path& path : {dir / "fifo.so", dir / "folder.so", fs::path("/dev/null")}) {
    INFO(path.string());
    CHECK_THROWS_AS(registry->load_plugin(path), InvalidArgument);
    CHECK_THROWS_WITH(registry->load_plugin(path), Catch::Contains(path.string()) && Catch::Contains("not a regular file"));
  }
  // On a search path too: the directory's first such entry is named.
  CHECK_THROWS_WITH(registry->load_plugins(dir.path().string()), Catch::Contains("not a regular file"));
  CHECK(contents(*registry) == before);
}
