#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds oneTBB with ThreadSanitizer from Debian 12's own source package
# (same version as libtbb-dev) into build-deps/tbb-tsan. TSan must see
# TBB's synchronisation, or every task hand-off looks like a data race; the
# stock libtbb.so is not instrumented. Prints the install prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
version=2021.8.0
sha256=7e9111b8bb59c8800bf6d0b06afe7b0891937443d2dae1ee1101c8e2ede6a7ef
prefix="$PWD/build-deps/tbb-tsan"
if [ -f "$prefix/.done-$version" ]; then echo "$prefix"; exit 0; fi
work="$PWD/build-deps/tbb-src"
mkdir -p "$work"
tarball="$work/onetbb_$version.orig.tar.xz"
if [ ! -f "$tarball" ]; then
  curl -fsS -m 120 -o "$tarball.part" "http://deb.debian.org/debian/pool/main/o/onetbb/onetbb_$version.orig.tar.xz"
  mv "$tarball.part" "$tarball"
fi
echo "$sha256  $tarball" | sha256sum -c --quiet - >&2
rm -rf "$work/src" && mkdir -p "$work/src"
tar -xf "$tarball" -C "$work/src" --strip-components=1
cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBB_TEST=OFF -DTBB_EXAMPLES=OFF \
  -DTBB_STRICT=OFF -DTBB_SANITIZE=thread -DTBBMALLOC_BUILD=OFF -DCMAKE_INSTALL_PREFIX="$prefix" >&2
cmake --build "$work/build" >&2
cmake --install "$work/build" >&2
touch "$prefix/.done-$version"
echo "$prefix"
