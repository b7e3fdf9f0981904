#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Copies the built vramflow, the peer tools the benchmarks compare against
# (zstd, pzstd, lz4, socat) and GNU time, with the shared libraries they load
# (glibc's own excepted), into one directory. The benchmarks can then run on
# a machine that lacks Debian's packages, such as a lent test machine with a
# newer glibc:
#
#   bench/bundle.sh [DIR]          (default build-bundle)
#   on the other machine:
#     export PATH=$DIR/bin:$PATH
#     VRAMFLOW_BIN=$DIR/bin/vramflow bench/compare.sh
#
# Each tool in DIR/bin is a small wrapper that points only that tool at
# DIR/lib, so the other machine's own programs keep their own libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build-bundle}"
bin="${VRAMFLOW:-build/vramflow}"
[ -x "$bin" ] || { echo "bundle: $bin is not built (run scripts/build.sh)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/libexec"
tools=("$bin")
for t in zstd pzstd lz4 socat ss /usr/bin/time; do
  p=$(command -v "$t") || { echo "bundle: $t is missing (run scripts/setup.sh)" >&2; exit 1; }
  tools+=("$p")
done
for t in "${tools[@]}"; do
  name=${t##*/}
  cp -L "$t" "$out/libexec/"
  printf '#!/bin/sh\nd=$(dirname "$(readlink -f "$0")")/..\nLD_LIBRARY_PATH="$d/lib" exec "$d/libexec/%s" "$@"\n' \
    "$name" >"$out/bin/$name"
  chmod +x "$out/bin/$name"
  # ldd prints "name => path (address)"; glibc's libraries must come from the
  # machine that runs the tools, with its own loader.
  ldd "$t" | awk '$2 == "=>" && $3 ~ /^\// && $3 !~ /\/(libc|libm|libdl|libpthread|librt|libresolv)\.so/ { print $3 }' |
    while read -r lib; do cp -Ln "$lib" "$out/lib/" 2>/dev/null || true; done
done
du -sh "$out"
