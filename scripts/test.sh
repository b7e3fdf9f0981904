#!/usr/bin/env bash
# Builds and runs the test suite.
#   scripts/test.sh            Release build in build/
#   scripts/test.sh asan       ASan+UBSan build in build-asan/
#   scripts/test.sh tsan       TSan build in build-tsan/
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-release}"
case "$mode" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRAMFLOW_SANITIZE=address,undefined) ;;
  tsan) dir=build-tsan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRAMFLOW_SANITIZE=thread) ;;
  *) echo "usage: $0 [release|asan|tsan]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -G Ninja "${flags[@]}"
cmake --build "$dir"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)"
