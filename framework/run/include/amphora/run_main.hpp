#pragma once
// A pipeline program's command line, in the library amphora::run (CLI11 and
// yaml-cpp stay inside it): run_main() parses the options, reads a YAML run
// configuration and --set overrides, runs the pipeline and prints a line per
// step.
//
//   int main(int argc, char** argv) {
//     amphora::Pipeline p("wc");
//     ...
//     return amphora::run_main(p, argc, argv);
//   }

#include <amphora/export.hpp>
#include <amphora/pipeline.hpp>

#include <filesystem>
#include <functional>
#include <string_view>

AMPHORA_API_BEGIN

namespace amphora {

/// Parameter overrides from `--set STEP.PARAM=VALUE` text: VALUE is read as
/// YAML would read a plain scalar (integer, float, true/false, null, else a
/// string; quote it to force a string). Merged into `params`. Throws
/// InvalidArgument for text without a '.' before the '='.
void apply_override(nlohmann::json& params, std::string_view assignment);

/// Parameter overrides from a YAML run configuration: a mapping from step
/// name to a mapping of parameters (FORMAT.md §1.9). Throws NotFound for a
/// missing file, InvalidArgument naming the file (and line) for anything
/// else: not YAML of that form, not a regular file, over 1 MiB.
nlohmann::json read_run_config(const std::filesystem::path& file);

/// Flushes standard output and returns `status`, or, when what a program
/// printed did not all arrive (a full disk, a closed pipe), says so on
/// standard error after `prefix` (with the system's reason) and returns
/// `status` if it is already a failure, else 1. For the end of main().
int finish_output(int status, std::string_view prefix);

/// A pipeline program's main(): parses `--store DIR` (which must hold a
/// store unless `--init` is given or DIR is the default, $AMPHORA_STORE or
/// ./.amphora), `--config FILE`, `--set STEP.PARAM=VALUE`, `--force STEP`
/// (or `--force '*'`), `--jobs N`, `--verify-hits`, `--quiet` and `--print
/// STEP` (print that step's outputs after the run, Pipeline::output_texts);
/// `--help` lists the steps and their parameters with defaults. Runs
/// `pipeline`, prints a line per step (status, time, reason) and returns 0
/// when the run succeeded, 1 when a step failed or its output could not be
/// written (finish_output), 2 for bad usage or a store error (a --store
/// without a store among them).
int run_main(const Pipeline& pipeline, int argc, char** argv);
/// The same, calling `after` once a run has succeeded (unless --quiet), for
/// the program's own summary: print a report, a table. An exception from
/// `after` is reported and the program returns 1, as for a failed step.
int run_main(const Pipeline& pipeline, int argc, char** argv,
             const std::function<void(Store& store, const RunReport& report)>& after);

}  // namespace amphora

AMPHORA_API_END
