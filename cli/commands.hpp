#pragma once
// The `amphora` commands, each given its parsed arguments (main.cpp parses).

#include <amphora/store.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace amphora::cli {

/// Arguments of the command being run; each command reads its own.
struct Args {
  std::optional<std::string> store;  ///< --store DIR, before or after the command
  std::optional<std::string> ref;    ///< REF, NAME or NAME[@N] (optional for ls and verify)
  std::string file;                  ///< FILE of import and export
  std::string name;                  ///< import --name, migrate --name
  std::string compress = "auto";     ///< import --compress
  int level = 0;                     ///< import --level (zstd); 0: the default
  std::vector<std::string> encode;   ///< import --encode: delta, squeeze, shuffle
  bool json = false;                 ///< ls, show --json
  bool force = false;                ///< export --force
  bool dry_run = false;              ///< gc --dry-run
  std::string grace;                 ///< gc --grace DURATION (empty: 60 s, or 7 days for --remote)
  bool yes = false;                  ///< rm --yes
  std::uint64_t keep_last = 0;       ///< gc --keep-last (0 = every version)
  bool explain = false;              ///< runs --explain
  bool dot = false;                  ///< lineage --dot
  std::vector<std::string> plugins;  ///< --plugin PATH, each
  std::vector<std::string> refs;     ///< push, pull: REF...
  std::string action;                ///< remote: add, list or remove
  std::string remote_name;           ///< remote add/remove NAME
  std::string url;                   ///< remote add URL
  std::string endpoint;              ///< remote add --endpoint
  std::string region;                ///< remote add --region
  std::string remote;                ///< push, pull --remote NAME
  std::uint64_t jobs = 8;            ///< push, pull -j N
  bool no_remote = false;            ///< --no-remote: never read through to the store's remote
};

/// The built-in materializers, the plugins of $AMPHORA_PLUGIN_PATH and those
/// of --plugin, in that order.
std::shared_ptr<amphora::Registry> make_registry(const Args& a);

/// Opens --store (or the default store); with `create`, initialises it.
amphora::Store open_store(const Args& a, bool create = false);

int cmd_init(const Args& a);
int cmd_ls(const Args& a);
int cmd_show(const Args& a);
int cmd_import(const Args& a);
int cmd_export(const Args& a);
int cmd_verify(const Args& a);
int cmd_rm(const Args& a);
int cmd_gc(const Args& a);
int cmd_runs(const Args& a);
int cmd_why(const Args& a);
int cmd_lineage(const Args& a);
int cmd_migrate(const Args& a);
int cmd_plugins(const Args& a);
int cmd_remote(const Args& a);
int cmd_push(const Args& a);
int cmd_pull(const Args& a);

}  // namespace amphora::cli
