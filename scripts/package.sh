#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Debian package, build/vramflow_<version>_amd64.deb (cpack -G DEB;
# packaging/CMakeLists.txt), from the Release build in build/: configures it if
# needed and builds what the package holds first, so that it never packs a
# stale binary. Prints the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/CMakeCache.txt ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build --target vramflow amdgpu_plugin vramflow_completion >/dev/null
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' build/CMakeCache.txt)
rm -f build/vramflow_*.deb
(cd build && cpack -G DEB >/dev/null)
deb=build/vramflow_${version}_amd64.deb
[ -f "$deb" ] || { echo "package.sh: cpack made no $deb" >&2; exit 1; }
echo "$deb"
