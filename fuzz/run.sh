#!/usr/bin/env bash
# Runs each fuzz target for a bounded time:
#   run.sh BUILD_DIR [SECONDS_EACH]           (make fuzz)
#   run.sh --smoke BUILD_DIR [SECONDS_EACH]   (make test: test-fuzz)
# Seeds are regenerated into BUILD_DIR/fuzz-seeds. A normal run keeps what
# libFuzzer finds interesting in BUILD_DIR/fuzz-corpus across runs and also
# starts from the inputs saved in fuzz/corpus/TARGET.tar.gz (make
# fuzz-save-corpus); a smoke run starts from the seeds alone, in a scratch
# corpus removed afterwards, with a fixed random seed, so that it depends on
# nothing a previous run left.
# Crashing inputs go to BUILD_DIR/fuzz-crashes (TARGET-crash-..., -oom-, ...).
# libFuzzer's output for each target is kept in BUILD_DIR/fuzz-logs/TARGET.log.
# Prints each target's executions per second at the end; exits nonzero if
# any target found a crash, leak, timeout, out-of-memory, invariant failure
# or sanitizer report. FUZZ_TARGETS="csv jsonl" runs only those;
# FUZZ_RUNS=N runs each for N executions instead of a time (0: each input of
# the corpus and seeds once, a replay); FUZZ_CORPUS_DIR=DIR keeps the corpus
# in DIR/TARGET instead (make fuzz-long grows build-fuzz's with other
# builds of the targets); FUZZ_ARGS adds libFuzzer options;
# FUZZ_SEGMENT_RUNS=N spends a time budget in consecutive processes of at
# most N executions each, every one starting from the corpus the last grew
# (make fuzz-long: the LeakSanitizer build's resident memory grows about 4
# KiB per execution, which would end one long process at the memory limit).
set -uo pipefail

smoke=0
if [[ "${1:-}" == "--smoke" ]]; then
  smoke=1
  shift
fi
build=${1:?usage: fuzz/run.sh [--smoke] BUILD_DIR [SECONDS_EACH]}
seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
bin="$build/bin"

"$bin/amphora_fuzz_seeds" "$build/fuzz-seeds" || exit 1
mkdir -p "$build/fuzz-crashes"

# Longest input per target: enough for what each parses to show its
# structure, short enough to keep executions fast.
declare -A max_len=([npy]=16384 [manifest]=16384 [lz4_frame]=131072 [zstd_frame]=131072 [payloads]=8192 [npz]=16384 [array_encoding]=8192
                    [csv]=4096 [jsonl]=4096 [composite]=2048 [run_config]=8192 [s3_listing]=8192)
all=(npy manifest lz4_frame zstd_frame payloads npz array_encoding csv jsonl composite run_config s3_listing)
targets=(${FUZZ_TARGETS:-${all[@]}})

# Reports name functions and lines: clang-16's own symbolizer where the
# llvm-16 package is installed, else the one Debian's llvm (14) installs.
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" ]]; then
  for s in llvm-symbolizer-16 llvm-symbolizer-14 llvm-symbolizer; do
    if command -v "$s" >/dev/null 2>&1; then
      export ASAN_SYMBOLIZER_PATH=$(command -v "$s")
      break
    fi
  done
fi
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# The targets' scratch files (and a smoke run's corpus) go in a directory of
# this run's own (another run may share the build directory), removed when
# the run ends: in /dev/shm where that is a writable tmpfs, since rewriting a
# file on a disk file system can wait for the disk (ext4 flushes a file
# truncated and written again), which halved some targets' rate; else in the
# build directory.
if [[ -d /dev/shm && -w /dev/shm ]]; then
  scratch=$(mktemp -d /dev/shm/amphora-fuzz.XXXXXX) || exit 1
else
  scratch=$(mktemp -d "$(cd "$build" && pwd)/fuzz-tmp.XXXXXX") || exit 1
fi
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/files"
export TMPDIR="$scratch/files"

if [[ "${FUZZ_RUNS:-}" == 0 ]]; then
  budget="each input of the corpus and seeds once"
elif [[ -n "${FUZZ_RUNS:-}" ]]; then
  budget="$FUZZ_RUNS runs"
else
  budget="${seconds}s"
fi

failed=()
summary=()
for t in "${targets[@]}"; do
  if [[ -z "${max_len[$t]:-}" ]]; then
    echo "fuzz/run.sh: no target '$t' (targets: ${all[*]})" >&2
    exit 2
  fi
  if ((smoke)); then
    corpus="$scratch/corpus/$t"
  else
    corpus="${FUZZ_CORPUS_DIR:-$build/fuzz-corpus}/$t"
  fi
  mkdir -p "$corpus"
  # Inputs earlier machines found (read only: libFuzzer adds what it finds
  # to the first directory alone).
  saved=()
  if ((!smoke)) && [[ -f "$here/corpus/$t.tar.gz" ]]; then
    mkdir -p "$scratch/saved/$t"
    tar -xzf "$here/corpus/$t.tar.gz" -C "$scratch/saved/$t" || exit 1
    saved=("$scratch/saved/$t")
  fi
  # -timeout: one input taking this long is a finding (a hang); -rss_limit_mb
  # also limits single allocations (malloc_limit_mb) to as much.
  args=(-timeout=25 -rss_limit_mb=2048 -max_len="${max_len[$t]}"
        -artifact_prefix="$build/fuzz-crashes/$t-" -print_final_stats=1)
  ((smoke)) && args+=(-seed=1)
  args+=(${FUZZ_ARGS:-})
  [[ -f "$here/$t.dict" ]] && args+=(-dict="$here/$t.dict")
  echo "== fuzz_$t: $budget$( ((smoke)) && echo ' (smoke: seeds only, -seed=1)')"
  # The whole of libFuzzer's output goes to a log; shown here are its
  # start and end, or, when it found something, the report.
  log="$build/fuzz-logs/$t.log"
  mkdir -p "$build/fuzz-logs"
  : >"$log"
  started=$SECONDS
  runs=0
  segments=0
  while :; do
    if [[ -n "${FUZZ_RUNS:-}" ]]; then
      limit=(-runs="$FUZZ_RUNS")
    else
      left=$((started + seconds - SECONDS))
      ((left > 0 || segments == 0)) || break
      limit=(-max_total_time=$((left > 0 ? left : 1)))
      [[ -n "${FUZZ_SEGMENT_RUNS:-}" ]] && limit+=(-runs="$FUZZ_SEGMENT_RUNS")
    fi
    ((segments > 0)) && echo "== $(date -u +%FT%TZ): segment $((segments + 1)), $runs executions so far" >>"$log"
    "$bin/fuzz_$t" "${limit[@]}" "${args[@]}" "$corpus" "$build/fuzz-seeds/$t" "${saved[@]}" >"$log.segment" 2>&1
    status=$?
    cat "$log.segment" >>"$log"
    segments=$((segments + 1))
    done_here=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log.segment" | tail -1)
    rm -f "$log.segment"
    runs=$((runs + ${done_here:-0}))
    # A segment ends on its run count with time to spare: the next one
    # goes on from the corpus. Anything else (a finding, the time) ends it.
    ((status == 0)) && [[ -n "${FUZZ_SEGMENT_RUNS:-}" && -z "${FUZZ_RUNS:-}" ]] || break
    [[ "${done_here:-0}" -ge "$FUZZ_SEGMENT_RUNS" ]] || break
  done
  elapsed=$((SECONDS - started))
  rate=$((runs / (elapsed > 0 ? elapsed : 1)))
  summary+=("$(printf '%-22s %10s runs %8s exec/s%s' "fuzz_$t" "$runs" "$rate" \
               "$( ((segments > 1)) && echo " in $segments segments")")")
  if ((status != 0)); then
    failed+=("fuzz_$t")
    grep -v -E $'^#[0-9]+\t(NEW|REDUCE|pulse)|^\tNEW_FUNC' "$log" | tail -n 60
  else
    grep -E $'^#[0-9]+\t(INITED|DONE)' "$log"
  fi
done

echo "== executions"
printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzzing found problems in: ${failed[*]} (inputs in $build/fuzz-crashes/; replay one with $bin/fuzz_TARGET FILE)" >&2
  exit 1
fi
echo "fuzzing: no findings ($budget per target)"
