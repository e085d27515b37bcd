#!/usr/bin/env bash
# Keeps what fuzzing found for the next machine:
#   save_corpus.sh BUILD_DIR [CORPUS_ROOT] [TARGET...]   (make fuzz-save-corpus)
# For each target with a corpus in CORPUS_ROOT/TARGET (default
# BUILD_DIR/fuzz-corpus), merges it with what fuzz/corpus/TARGET.tar.gz already
# holds into the smallest set of inputs libFuzzer finds to cover the same
# features (-merge=1, run by BUILD_DIR's build of the target), and writes that
# set to fuzz/corpus/TARGET.tar.gz (sorted names, no times or owners). The set
# chosen can differ between two merges of the same inputs: the worker threads
# make a few coverage features vary from run to run.
# fuzz/run.sh adds these inputs to a normal or long run's own corpus; a smoke
# run (make test) starts from the generated seeds alone.
set -euo pipefail

build=${1:?usage: fuzz/save_corpus.sh BUILD_DIR [CORPUS_ROOT] [TARGET...]}
root=${2:-$build/fuzz-corpus}
shift $(($# >= 2 ? 2 : 1))
here=$(cd "$(dirname "$0")" && pwd)
out="$here/corpus"
mkdir -p "$out"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if (($#)); then
  targets=("$@")
else
  targets=()
  for d in "$root"/*/; do
    [[ -d "$d" ]] && targets+=("$(basename "$d")")
  done
fi
((${#targets[@]})) || { echo "save_corpus.sh: no corpus under $root" >&2; exit 1; }

for t in "${targets[@]}"; do
  bin="$build/bin/fuzz_$t"
  [[ -x "$bin" ]] || { echo "save_corpus.sh: no target $bin" >&2; exit 2; }
  [[ -d "$root/$t" ]] || { echo "save_corpus.sh: no corpus $root/$t" >&2; exit 2; }
  inputs=("$root/$t")
  if [[ -f "$out/$t.tar.gz" ]]; then
    mkdir -p "$work/old/$t"
    tar -xzf "$out/$t.tar.gz" -C "$work/old/$t"
    inputs+=("$work/old/$t")
  fi
  mkdir -p "$work/merged/$t" "$work/tmp"
  # The targets write their scratch files under TMPDIR; the merge runs each
  # input once (and again in a child process should one crash).
  TMPDIR="$work/tmp" "$bin" -merge=1 -timeout=25 -rss_limit_mb=2048 "$work/merged/$t" "${inputs[@]}" \
    >"$work/$t.log" 2>&1 || { tail -n 30 "$work/$t.log" >&2; echo "save_corpus.sh: merging $t failed" >&2; exit 1; }
  count=$(find "$work/merged/$t" -type f | wc -l)
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/merged/$t" -cf - . | gzip -n -9 >"$out/$t.tar.gz"
  printf '%-12s %6d inputs (from %s) -> fuzz/corpus/%s.tar.gz, %s bytes\n' "$t" "$count" "${inputs[*]}" "$t" \
    "$(stat -c %s "$out/$t.tar.gz")"
done
