#!/usr/bin/env bash
# Runs each fuzz target for a bounded time: run.sh BUILD_DIR [SECONDS_EACH].
# Seeds are regenerated into BUILD_DIR/fuzz-seeds; inputs libFuzzer finds
# interesting accumulate in BUILD_DIR/fuzz-corpus across runs, and crashing
# inputs are written to BUILD_DIR/fuzz-crashes. Exits nonzero if any target
# found a crash, leak, timeout or sanitizer report.
set -uo pipefail

build=${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS_EACH]}
seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
bin="$build/bin"

"$bin/amphora_fuzz_seeds" "$build/fuzz-seeds" || exit 1
mkdir -p "$build/fuzz-crashes"

declare -A max_len=([npy]=16384 [manifest]=16384 [lz4_frame]=131072 [payloads]=8192 [npz]=16384 [array_encoding]=8192 [csv]=4096 [jsonl]=4096)
failed=()
for t in npy manifest lz4_frame payloads npz array_encoding csv jsonl; do
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus"
  args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -max_len="${max_len[$t]}"
        -artifact_prefix="$build/fuzz-crashes/$t-" -print_final_stats=1)
  [[ -f "$here/$t.dict" ]] && args+=(-dict="$here/$t.dict")
  echo "== fuzz_$t for ${seconds}s"
  if ! "$bin/fuzz_$t" "${args[@]}" "$corpus" "$build/fuzz-seeds/$t"; then
    failed+=("fuzz_$t")
  fi
done

if ((${#failed[@]})); then
  echo "fuzzing found problems in: ${failed[*]} (inputs in $build/fuzz-crashes/)" >&2
  exit 1
fi
echo "fuzzing: no crashes in ${seconds}s per target"
