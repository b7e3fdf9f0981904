#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs everything vramflow builds, tests and benchmarks with, from
# Debian 12 packages. Safe to run again. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libtbb-dev libzstd-dev liblz4-dev libxxhash-dev libprotobuf-dev protobuf-compiler libdrm-dev
  libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libssl-dev
  libcurl4-openssl-dev       # s3:// (libcurl, OpenSSL flavour)
  libexpat1-dev              # s3://: S3 and STS XML replies
  clang libclang-rt-14-dev   # libFuzzer and sanitizer runtimes
  zstd lz4 time socat        # peer tools for benchmarks (socat: the S3 tests' TLS front), /usr/bin/time for peak RSS
  iproute2                   # ip netns, veth and tc for the network tests and benchmark
  criu                       # criu/criu-plugin.h: the plugin ABI amdgpu_plugin.so is built against
  curl xz-utils              # scripts/tbb-tsan.sh fetches Debian's oneTBB source for the TSan build
  openssl                    # the TLS tests' other end (s_client, s_server) and their certificates
  python3 bc                 # tests measuring peak RSS; bench/recv_flood.sh's connection flood and timings
  zsh man-db systemd         # packaging tests: zsh completion, man page rendering, systemd-analyze verify
  mmdebstrap file            # CI: the .deb in a clean Debian 12 root (tests/packaging/deb_test.sh); file: cpack's shlibdeps
)
# Optional: the local Ceph RGW that the S3Rgw tests run against (scripts/rgw.sh) and Debian's
# S3 CLI they exchange objects with. Where these cannot be installed, those tests skip and say why.
optional=(radosgw ceph-mon ceph-osd awscli)

absent() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(absent "${packages[@]}")
mapfile -t missing_optional < <(absent "${optional[@]}")
if [ ${#missing[@]} -eq 0 ] && [ ${#missing_optional[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
apt() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
echo "setup: installing ${missing[*]} ${missing_optional[*]}"
apt update -q || [ ${#missing[@]} -eq 0 ]
[ ${#missing[@]} -eq 0 ] || apt install -y -q --no-install-recommends "${missing[@]}"
if [ ${#missing_optional[@]} -gt 0 ] &&
   ! apt install -y -q --no-install-recommends "${missing_optional[@]}"; then
  for p in "${missing_optional[@]}"; do  # one at a time: what can be installed, is
    apt install -y -q --no-install-recommends "$p" ||
      echo "setup: WARNING: could not install $p; S3Rgw tests that need it will skip" >&2
  done
fi
