#!/usr/bin/env bash
# Installs everything vramflow builds, tests and benchmarks with, from
# Debian 12 packages. Safe to run again. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libtbb-dev libzstd-dev liblz4-dev libxxhash-dev libprotobuf-dev protobuf-compiler libdrm-dev
  libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libssl-dev
  libcurl4-openssl-dev       # s3:// (libcurl, OpenSSL flavour)
  clang libclang-rt-14-dev   # libFuzzer and sanitizer runtimes
  zstd lz4 time socat        # peer tools for benchmarks, /usr/bin/time for peak RSS
  iproute2                   # ip netns, veth and tc for the network tests and benchmark
  criu                       # criu/criu-plugin.h: the plugin ABI amdgpu_plugin.so is built against
  curl xz-utils              # scripts/tbb-tsan.sh fetches Debian's oneTBB source for the TSan build
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup: installing ${missing[*]}"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
