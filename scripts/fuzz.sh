#!/usr/bin/env bash
# Fuzzes the chunk-stream reader (tests/fuzz/stream_reader_fuzz.cc) with
# libFuzzer under ASan+UBSan, for a bounded time.
#
#   scripts/fuzz.sh [SECONDS]       default 60
#
# Builds build-fuzz/ with clang (-DVRAMFLOW_FUZZ=ON), writes a seed corpus of
# valid streams (scripts/fuzz_corpus.sh) to build-fuzz/corpus/seeds, keeps
# what libFuzzer finds in build-fuzz/corpus/found (reused by the next run),
# and writes crash/timeout/OOM inputs and the log to build-fuzz/fuzz-out/.
# Exits non-zero when libFuzzer reports a crash (or the build fails).
# Reproduce a finding with: build-fuzz/tests/fuzz/stream_reader_fuzz FILE
#
# Environment: CXX (default clang++), FUZZ_JOBS (parallel fuzzing processes,
# default 1; more uses libFuzzer's -fork), FUZZ_ARGS (extra libFuzzer flags).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS]" >&2; exit 2; }
build=build-fuzz
cxx="${CXX:-clang++}"
command -v "$cxx" >/dev/null || { echo "fuzz: $cxx not found (Debian: apt-get install clang libclang-rt-dev)" >&2; exit 1; }

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DVRAMFLOW_FUZZ=ON -DVRAMFLOW_SANITIZE=address,undefined -DVRAMFLOW_BUILD_TESTS=ON >/dev/null
cmake --build "$build" --target stream_reader_fuzz vramflow

fuzzer="$build/tests/fuzz/stream_reader_fuzz"
seeds="$build/corpus/seeds"
found="$build/corpus/found"
out="$build/fuzz-out"
mkdir -p "$found" "$out"
rm -rf "$seeds"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
scripts/fuzz_corpus.sh "$build/vramflow" "$seeds" "$fuzzer"

jobs="${FUZZ_JOBS:-1}"
parallel=()
[ "$jobs" -gt 1 ] && parallel=(-fork="$jobs")
log="$out/fuzz.log"
stamp="$out/.started"
touch "$stamp"
echo "fuzz: running $fuzzer for ${seconds}s ($jobs job(s)); log in $log"
set +e
# The first corpus directory receives new inputs; the seeds stay as generated.
# shellcheck disable=SC2086
"$fuzzer" "$found" "$seeds" -max_total_time="$seconds" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/" -print_final_stats=1 "${parallel[@]}" ${FUZZ_ARGS:-} >"$log" 2>&1
rc=$?
set -e
tail -n 25 "$log"
artifacts=$(find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) \
  -newer "$stamp" | sort)
if [ "$rc" -ne 0 ] || [ -n "$artifacts" ]; then
  echo "fuzz: FAILED (libFuzzer exit status $rc)" >&2
  for a in $artifacts; do echo "fuzz: reproduce with: $fuzzer $a" >&2; done
  exit 1
fi
echo "fuzz: no crash in ${seconds}s; corpus: $(ls "$found" | wc -l) inputs found + $(ls "$seeds" | wc -l) seeds"
