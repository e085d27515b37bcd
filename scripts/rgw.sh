#!/usr/bin/env bash
# A single-node Ceph cluster with a RADOS Gateway on 127.0.0.1, for the
# remote tier's tests and for developers (make remote-up / remote-down):
#   scripts/rgw.sh up DIR [PORT]   start it under DIR (created; must not hold a cluster)
#   scripts/rgw.sh down DIR        stop it and remove DIR
# `up` prints, and writes to DIR/env (shell syntax), AMPHORA_TEST_S3_ENDPOINT,
# the test user's fixed keys as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, and
# AMPHORA_TEST_S3_BUCKET, an empty bucket it creates (with boto3, from
# Debian's python3-boto3).
# One monitor, one memstore OSD (data in memory, size-1 pools), no manager,
# no cephx: a test server, never a place for data. Needs Debian's ceph-mon,
# ceph-osd, radosgw and ceph-common (scripts/install-deps.sh installs them).
set -euo pipefail

readonly ACCESS_KEY=AMPHORATESTACCESSKEY
readonly SECRET_KEY=amphora-test-secret-key-not-for-real-use
readonly BUCKET=amphora

usage() {
  echo "usage: scripts/rgw.sh up DIR [PORT] | down DIR" >&2
  exit 2
}

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# All three told to stop at once, then given 2 s before they are killed
# (radosgw often outlasts that; its data is in memory and thrown away).
stop() {
  local dir=$1 pids=() pid
  for name in client.rgw.test osd.0 mon.a; do
    [[ -f "$dir/run/$name.pid" ]] && pids+=("$(cat "$dir/run/$name.pid")")
  done
  [[ ${#pids[@]} -gt 0 ]] || return 0
  kill "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 20); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive == 1 ]] || return 0
    sleep 0.1
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
}

up() {
  local dir=$1 port=${2:-} mon fsid
  for tool in monmaptool ceph-mon ceph-osd radosgw radosgw-admin ceph; do
    command -v "$tool" >/dev/null || { echo "rgw.sh: $tool is missing: run scripts/install-deps.sh" >&2; exit 1; }
  done
  [[ -e "$dir/ceph.conf" ]] && { echo "rgw.sh: $dir already holds a cluster (rgw.sh down $dir first)" >&2; exit 1; }
  mkdir -p "$dir"/{run,log,mon/ceph-a,osd/ceph-0,rgw}
  dir=$(cd "$dir" && pwd)
  mon=$(free_port)
  [[ -n "$port" ]] || port=$(free_port)
  fsid=$(cat /proc/sys/kernel/random/uuid)
  # No cephx: with auth "none" only CRC connection modes work, so every
  # messenger mode list allows crc. Size-1 pools on one OSD, CRUSH choosing
  # OSDs rather than hosts, and a short Paxos interval for a start in seconds.
  cat > "$dir/ceph.conf" <<CONF
[global]
fsid = $fsid
mon_host = v2:127.0.0.1:$mon
mon_initial_members = a
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
ms_mon_cluster_mode = crc secure
ms_mon_service_mode = crc secure
ms_mon_client_mode = crc secure
ms_cluster_mode = crc secure
ms_service_mode = crc secure
ms_client_mode = crc secure
ms_bind_ipv6 = false
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_crush_chooseleaf_type = 0
paxos_propose_interval = 0.05
# No debug logs: at the default levels every request writes three log lines,
# which costs the gateway 7-17% of its small-request rate on two cores.
debug_rgw = 0/0
debug_ms = 0/0
debug_osd = 0/0
debug_objecter = 0/0
debug_rados = 0/0
debug_filestore = 0/0
debug_memstore = 0/0
debug_monc = 0/0
osd_objectstore = memstore
# Memory only as objects use it; room for the remote benchmark's 1 GiB
# transfers, side by side with boto3's, repeated.
memstore_device_bytes = 12884901888
run_dir = $dir/run
pid_file = $dir/run/\$name.pid
log_file = $dir/log/\$name.log
admin_socket = $dir/run/\$name.asok
mon_data = $dir/mon/\$cluster-\$id
osd_data = $dir/osd/\$cluster-\$id
[client.rgw.test]
# tcp_nodelay: an answer written as headers, then body (a listing) would
# otherwise wait 40 ms for the client's delayed acknowledgement.
rgw_frontends = beast endpoint=127.0.0.1:$port tcp_nodelay=1
# Deleted objects' data freed within seconds, not hours, so a long test or
# benchmark run does not fill the in-memory OSD.
rgw_gc_obj_min_wait = 1
rgw_gc_processor_period = 2
rgw_data = $dir/rgw
CONF
  local conf=(-c "$dir/ceph.conf")
  trap 'echo "rgw.sh: start failed; logs in $dir/log" >&2; stop "$dir"' ERR
  monmaptool --create --addv a "[v2:127.0.0.1:$mon]" --fsid "$fsid" "$dir/monmap" >/dev/null
  ceph-mon "${conf[@]}" --mkfs -i a --monmap "$dir/monmap"
  ceph-mon "${conf[@]}" -i a
  timeout 30 ceph "${conf[@]}" osd create >/dev/null
  timeout 60 ceph-osd "${conf[@]}" -i 0 --mkfs 2>/dev/null
  ceph-osd "${conf[@]}" -i 0 2>/dev/null
  radosgw "${conf[@]}" -n client.rgw.test
  local code=000
  for _ in $(seq 300); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" || true)
    [[ "$code" != 000 ]] && break
    sleep 0.1
  done
  [[ "$code" != 000 ]] || { echo "rgw.sh: the gateway did not answer on port $port" >&2; false; }
  timeout 60 radosgw-admin "${conf[@]}" user create --uid=amphora-test --display-name="Amphora tests" \
    --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >/dev/null
  timeout 60 /usr/bin/python3 -c "
import boto3, botocore.config
boto3.client('s3', endpoint_url='http://127.0.0.1:$port', aws_access_key_id='$ACCESS_KEY',
             aws_secret_access_key='$SECRET_KEY', region_name='us-east-1',
             config=botocore.config.Config(s3={'addressing_style': 'path'})).create_bucket(Bucket='$BUCKET')"
  trap - ERR
  cat > "$dir/env" <<ENV
AMPHORA_TEST_S3_ENDPOINT=http://127.0.0.1:$port
AWS_ACCESS_KEY_ID=$ACCESS_KEY
AWS_SECRET_ACCESS_KEY=$SECRET_KEY
AWS_DEFAULT_REGION=us-east-1
AMPHORA_TEST_S3_BUCKET=$BUCKET
ENV
  cat "$dir/env"
}

case "${1:-}" in
  up) [[ $# -ge 2 && $# -le 3 ]] || usage; up "$2" "${3:-}" ;;
  down)
    [[ $# -eq 2 ]] || usage
    [[ -e "$2/ceph.conf" ]] || { echo "rgw.sh: $2 holds no cluster" >&2; exit 1; }
    stop "$2"
    rm -rf "$2"
    ;;
  *) usage ;;
esac
