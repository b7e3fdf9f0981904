#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds and runs the test suite.
#   scripts/test.sh            Release build in build/
#   scripts/test.sh asan       ASan+UBSan build in build-asan/
#   scripts/test.sh tsan       TSan build in build-tsan/ (pipeline, network and TLS tests, against a
#                              TSan-instrumented oneTBB built by scripts/tbb-tsan.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-release}"
filter=()
case "$mode" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  # Real CRIU runs the release build's plugin only: an ASan plugin cannot load into a CRIU built
  # without ASan. ASan keeps covering the plugin through the CRIU host harness.
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRAMFLOW_SANITIZE=address,undefined)
        filter=(-E '^RealCriu') ;;
  tsan)
    dir=build-tsan
    tbb=$(./scripts/tbb-tsan.sh)
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRAMFLOW_SANITIZE=thread -DCMAKE_PREFIX_PATH="$tbb" -DTBB_DIR="$tbb/lib/cmake/TBB")
    # Not the CriuHost tests either (CriuHost.IncrementalDump* matches): the host counts the process's
    # threads around each plugin hook, and TSan's own background thread counts as one the plugin left.
    filter=(-R 'Pipeline|CopyRings|DmaCompleter|NetTransport|NetReceiverLimits|Tls|Socket|RangeReader|SubStream|ConcurrentDump|StreamerCapture|ServeTest|ImageFileStore|IncrementalDump|BaseStream|DecodeAhead|RestoreGraph|IncrementalNet|BackgroundSink|LentSlots|ParallelWrites' -E '^(RealCriu|CriuHost)') ;;
  *) echo "usage: $0 [release|asan|tsan]" >&2; exit 2 ;;
esac
# The RealCriu.* tests run a real CRIU 4.2 and criu-image-streamer, built from the source
# snapshots in ../shared/criu into build-criu/ (kept between runs). Dumping and restoring needs
# root; elsewhere, or without ../shared/criu, those tests skip and say why.
criu_src="$(pwd)/../shared/criu"
if [ "$mode" = release ] && [ "$(id -u)" -eq 0 ] && [ -x "$criu_src/build.sh" ]; then
  if ! "$criu_src/build.sh" build-criu >build-criu.log 2>&1; then
    tail -20 build-criu.log >&2
    echo "test.sh: building the real CRIU failed (build-criu.log); RealCriu tests will skip" >&2
  fi
fi
cmake -S . -B "$dir" -G Ninja "${flags[@]}"
cmake --build "$dir"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# The S3Rgw tests' Ceph RGW (tests/CMakeLists.txt, fixture rgw): stopped even if ctest is cut
# short, and if it could not start, the reason is the last line.
rm -f "$dir/rgw.skipped"
rgw_done() {
  ./scripts/rgw.sh stop "$dir/rgw" 2>/dev/null || true
  [ ! -s "$dir/rgw.skipped" ] || echo "test.sh: S3Rgw tests skipped: $(cat "$dir/rgw.skipped")"
}
trap rgw_done EXIT
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "${filter[@]}"
