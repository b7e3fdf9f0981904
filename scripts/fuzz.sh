#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fuzzes every parser of untrusted bytes with libFuzzer under ASan+UBSan, for
# a bounded time in all (shared equally among the targets):
#   stream_reader_fuzz   chunk streams (tests/fuzz/stream_reader_fuzz.cc)
#   net_protocol_fuzz    the network protocol (tests/fuzz/net_protocol_fuzz.cc)
#   kfd_image_fuzz       the CRIU plugin's metadata images (tests/fuzz/kfd_image_fuzz.cc)
#   s3_xml_fuzz          S3 servers' XML replies (tests/fuzz/s3_xml_fuzz.cc)
#   seek_index_fuzz      seek indexes and stored streams' tails (tests/fuzz/seek_index_fuzz.cc)
#   criu_files_img_fuzz  CRIU's files.img under --tcp-listen-remap (tests/fuzz/criu_files_img_fuzz.cc;
#                        a small parser: a fixed 5 s share)
#   codec_fuzz           the huffman and bitpack decoders on bare payloads, and sparse-words chunks (tests/fuzz/codec_fuzz.cc)
#   aws_credentials_fuzz what AWS credential sources send: their JSON, credential_process output, STS XML,
#                        Expiration times (tests/fuzz/aws_credentials_fuzz.cc; small parsers: a fixed 5 s share)
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default 60 seconds in all, every target
#
# Builds build-fuzz/ with clang (-DVRAMFLOW_FUZZ=ON), writes seed corpora to
# build-fuzz/corpus/TARGET/seeds (valid inputs, so mutations start past the
# checksums), keeps what libFuzzer finds in build-fuzz/corpus/TARGET/found
# (reused by the next run), and writes crash/timeout/OOM inputs and the logs
# to build-fuzz/fuzz-out/. Exits non-zero when libFuzzer reports a crash (or
# the build fails). Reproduce a finding with: build-fuzz/tests/fuzz/TARGET FILE
#
# Environment: CXX (default clang++), FUZZ_JOBS (parallel fuzzing processes,
# default 1; more uses libFuzzer's -fork), FUZZ_ARGS (extra libFuzzer flags).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2; }
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(stream_reader_fuzz net_protocol_fuzz kfd_image_fuzz s3_xml_fuzz seek_index_fuzz
  criu_files_img_fuzz codec_fuzz aws_credentials_fuzz)
# The time is a total: small parsers get 5 s each, the other targets equal
# shares of the rest (at least 5 s).
small_seconds=5
is_small() { [ "$1" = criu_files_img_fuzz ] || [ "$1" = aws_credentials_fuzz ]; }
large=0
small=0
for target in "${targets[@]}"; do
  if is_small "$target"; then small=$((small + 1)); else large=$((large + 1)); fi
done
per_target=5
[ "$large" -eq 0 ] || per_target=$(( (seconds - small * small_seconds) / large ))
[ "$per_target" -ge 5 ] || per_target=5
build=build-fuzz
cxx="${CXX:-clang++}"
command -v "$cxx" >/dev/null || { echo "fuzz: $cxx not found (Debian: apt-get install clang libclang-rt-dev)" >&2; exit 1; }

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DVRAMFLOW_FUZZ=ON -DVRAMFLOW_SANITIZE=address,undefined -DVRAMFLOW_BUILD_TESTS=ON >/dev/null
cmake --build "$build" --target "${targets[@]}" vramflow

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
out="$build/fuzz-out"
mkdir -p "$out"
jobs="${FUZZ_JOBS:-1}"
parallel=()
[ "$jobs" -gt 1 ] && parallel=(-fork="$jobs")
failed=0
for target in "${targets[@]}"; do
  fuzzer="$build/tests/fuzz/$target"
  seeds="$build/corpus/$target/seeds"
  found="$build/corpus/$target/found"
  mkdir -p "$found"
  rm -rf "$seeds"
  mkdir -p "$seeds"
  case "$target" in
    stream_reader_fuzz) scripts/fuzz_corpus.sh "$build/vramflow" "$seeds" "$fuzzer" ;;
    *) VRAMFLOW_FUZZ_WRITE_SEEDS="$seeds" "$fuzzer" ;;
  esac
  log="$out/$target.log"
  stamp="$out/.started-$target"
  touch "$stamp"
  target_seconds=$per_target
  is_small "$target" && target_seconds=$small_seconds
  echo "fuzz: running $target for ${target_seconds}s ($jobs job(s)); log in $log"
  set +e
  # The first corpus directory receives new inputs; the seeds stay as generated.
  # shellcheck disable=SC2086
  "$fuzzer" "$found" "$seeds" -max_total_time="$target_seconds" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$out/$target-" -print_final_stats=1 "${parallel[@]}" ${FUZZ_ARGS:-} >"$log" 2>&1
  rc=$?
  set -e
  tail -n 12 "$log"
  artifacts=$(find "$out" -maxdepth 1 -type f -name "$target-*" \( -name '*crash-*' -o -name '*leak-*' -o -name '*timeout-*' \
    -o -name '*oom-*' \) -newer "$stamp" | sort)
  if [ "$rc" -ne 0 ] || [ -n "$artifacts" ]; then
    echo "fuzz: $target FAILED (libFuzzer exit status $rc)" >&2
    for a in $artifacts; do echo "fuzz: reproduce with: $fuzzer $a" >&2; done
    failed=1
  else
    echo "fuzz: $target: no crash in ${target_seconds}s; corpus: $(ls "$found" | wc -l) inputs found + $(ls "$seeds" | wc -l) seeds"
  fi
done
exit "$failed"
