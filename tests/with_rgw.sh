#!/usr/bin/env bash
# Runs a command with a Ceph RADOS Gateway of its own: scripts/rgw.sh starts
# one under DIR (removed first if a killed run left it), the command runs
# with its environment (AMPHORA_TEST_S3_ENDPOINT, AMPHORA_TEST_S3_BUCKET and
# the test keys), and the gateway is stopped whatever the command did.
#   tests/with_rgw.sh DIR COMMAND [ARG...]
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: tests/with_rgw.sh DIR COMMAND [ARG...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
dir=$1
shift
[[ -e "$dir" ]] && "$here/../scripts/rgw.sh" down "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
"$here/../scripts/rgw.sh" up "$dir" >/dev/null
trap '"$here/../scripts/rgw.sh" down "$dir" >/dev/null 2>&1 || true' EXIT
set -a
# shellcheck disable=SC1091
. "$dir/env"
set +a
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3
"$@"
