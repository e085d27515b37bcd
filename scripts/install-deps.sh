#!/usr/bin/env bash
# Installs the Debian packages Amphora builds, tests and benchmarks with, when missing.
set -euo pipefail

# Files and directories go through std::filesystem (Boost.Filesystem's
# standardised successor), so no Boost. yaml-cpp reads pipeline run
# configurations; Graphviz renders `amphora lineage --dot` in the tests;
# Eigen (header-only) is the third-party library the Eigen example plugin
# teaches Amphora from outside (plugins/eigen). Ceph's monitor, OSD and
# RADOS Gateway are the S3 server the remote tier's tests start
# (scripts/rgw.sh, which waits for the gateway with curl); boto3 is the S3
# client they compare with.
packages=(
  build-essential cmake pkg-config ccache
  nlohmann-json3-dev libsimdjson-dev liblz4-dev libzstd-dev libssl-dev libcli11-dev libzip-dev libyaml-cpp-dev catch2 graphviz
  libeigen3-dev
  python3-numpy python3-scipy python3-pandas python3-lz4 lz4 python3-zstandard zstd
  libcurl4-openssl-dev libexpat1-dev
  ceph-mon ceph-osd radosgw ceph-common python3-boto3 curl
)

# `make fuzz` and `make test` (test-fuzz) also need clang and its libFuzzer
# runtime: clang-16, as Debian 12's default clang 14 has no
# std::source_location with GCC 12's library.
# `make bench` (--bench) compares with HDF5 and PyTables too: Debian's
# libhdf5 (C API), its Blosc filter plugin, and PyTables for
# DataFrame.to_hdf. Benchmark-only: `make test` never needs them.
for flag in "$@"; do
  case "$flag" in
    --fuzz) packages+=(clang-16 libclang-rt-16-dev) ;;
    --bench) packages+=(libhdf5-dev hdf5-filter-plugin hdf5-filter-plugin-blosc-serial python3-tables) ;;
    *) echo "usage: install-deps.sh [--fuzz] [--bench]" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "installing missing packages: ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  apt_get=(apt-get)
elif command -v sudo >/dev/null 2>&1; then
  apt_get=(sudo apt-get)
else
  echo "error: missing packages (${missing[*]}) and not root; install them with apt-get" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${apt_get[@]}" update -qq
"${apt_get[@]}" install -y -qq --no-install-recommends "${missing[@]}"
