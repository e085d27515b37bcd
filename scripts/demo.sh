#!/usr/bin/env bash
# What `make demo` shows: the document-frequency pipeline (examples/docfreq)
# run three times against one store. The second run must come entirely from
# the cache; the third changes top_k, and only the steps it reaches rerun.
#
#   scripts/demo.sh [BUILD_DIR]
#
# The store is $AMPHORA_STORE when set (kept, and possibly already holding
# earlier runs), else a fresh BUILD_DIR/demo-store.
set -euo pipefail

build=${1:-build}
docfreq=$build/bin/amphora_docfreq
amphora=$build/bin/amphora
for program in "$docfreq" "$amphora"; do
  [[ -x $program ]] || { echo "demo: $program is not built; run make first" >&2; exit 2; }
done
if [[ -n ${AMPHORA_STORE:-} ]]; then
  store=$AMPHORA_STORE
  fresh=0  # earlier runs may have computed anything already
else
  store=$build/demo-store
  rm -rf "$store"
  fresh=1
fi

section() { printf '\n== %s\n' "$*"; }
# Runs the pipeline, echoing its output (also when it fails), and fails
# unless the summary line reports `expect` (e.g. "0 ran, 5 cached").
run() {
  local expect=$1 output status=0
  shift
  output=$("$docfreq" --store "$store" --init "$@") || status=$?
  printf '%s\n' "$output"
  ((status == 0)) || exit "$status"
  if [[ -n $expect ]] && ! grep -qF "($expect)" <<<"$output"; then
    echo "demo: expected this run to end with ($expect)" >&2
    exit 1
  fi
}

section "1. docfreq over the bundled corpus, store $store"
run "" --sizes
section "2. The same again: every step comes from the cache"
run "0 ran, 5 cached"
section "3. top_k 1000 -> 500: the model step reruns, and what it feeds"
third=""
((fresh)) && third="2 ran, 3 cached"
run "$third" --set model.top_k=500
section "Why each step of the last run ran (amphora why docfreq)"
"$amphora" --store "$store" why docfreq
section "Where the report came from (amphora lineage docfreq.report.report)"
"$amphora" --store "$store" lineage docfreq.report.report
section "The step outputs, named PIPELINE.STEP.OUTPUT (amphora ls)"
"$amphora" --store "$store" ls
