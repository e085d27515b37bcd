#pragma once
// The `amphora` commands, each given its parsed arguments (main.cpp parses).

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
  std::string name;                  ///< import --name
  std::string compress = "auto";     ///< import --compress
  std::vector<std::string> encode;   ///< import --encode: delta, squeeze, shuffle
  bool json = false;                 ///< ls, show --json
  bool force = false;                ///< export --force
  bool dry_run = false;              ///< gc --dry-run
  std::int64_t grace_seconds = 60;   ///< gc --grace
  bool yes = false;                  ///< rm --yes
};

int cmd_init(const Args& a);
int cmd_ls(const Args& a);
int cmd_show(const Args& a);
int cmd_import(const Args& a);
int cmd_export(const Args& a);
int cmd_verify(const Args& a);
int cmd_rm(const Args& a);
int cmd_gc(const Args& a);

}  // namespace amphora::cli
