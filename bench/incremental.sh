#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Incremental checkpoints (pack --base) against full ones, in one run.
# Benchmarks only; CI never runs this.
#
#   bench/incremental.sh [SIZE]       SIZE of each checkpoint, default 512M
#   REPEAT=5 bench/incremental.sh     runs per timing (median; default 3)
#   VRAMFLOW_BIN=build-x/vramflow bench/incremental.sh
#
# 1. Inference-like: model weights (bf16, static) plus a KV cache of 10% of the
#    memory that is rewritten between two checkpoints. The second checkpoint
#    packed with the first as its base, against packed in full, and against the
#    changed bytes packed on their own (target: the incremental stream within
#    1.1x of those, and its pack at least as fast as the full one).
# 2. Training-like: the generator's training state (vramflow gen --step: fp32
#    weights, their bf16 copy, Adam's moments) one and ten AdamW steps after the
#    base: stream size with the base against without.
# 3. Restore: unpack of the incremental stream (with its base) into files
#    against unpack of the full one.
# 4. Live migration over a 1 Gbit/s veth link (root; else loopback) with the
#    first checkpoint in the receiver's base store, against a full migration
#    (bench/incremental_net.sh).
# Files live in /dev/shm when it is writable, so the disk does not set the pace.
set -euo pipefail
cd "$(dirname "$0")/.."
size="${1:-512M}"
repeat="${REPEAT:-3}"
bin="${VRAMFLOW_BIN:-build/vramflow}"
[ -x "$bin" ] || ./scripts/build.sh >/dev/null
bin=$(realpath "$bin")
work=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/vramflow-incremental-XXXXXX")
trap 'rm -rf "$work"' EXIT

bytes() { numfmt --from=iec "${1%B}"; }
total=$(bytes "$size")
mib() { echo "scale=1; $1 / 1048576" | bc -l; }

# median CMD...: median wall seconds of REPEAT runs of CMD.
median() {
  local runs=() start end
  for _ in $(seq "$repeat"); do
    start=$(date +%s.%N)
    "$@" >/dev/null
    end=$(date +%s.%N)
    runs+=("$(echo "$end - $start" | bc -l)")
  done
  printf "%s\n" "${runs[@]}" | sort -n | sed -n "$(( (repeat + 1) / 2 ))p" | xargs printf "%.3f"
}

pack() { "$bin" pack -q -f "$@"; }

echo "== 1. inference-like: $size of bf16 weights (static) and a KV cache of 10% rewritten"
kv=$(( total / 10 / 4096 * 4096 ))
weights=$(( total - kv ))
mkdir -p "$work/c1" "$work/c2" "$work/changed"
"$bin" gen -k bf16 -s "$weights" --seed 1 -o "$work/c1/weights.bf16"
cp "$work/c1/weights.bf16" "$work/c2/weights.bf16"
"$bin" gen -k fp16 -s "$kv" --seed 2 -o "$work/c1/kv-cache.fp16"
"$bin" gen -k fp16 -s "$kv" --seed 3 -o "$work/c2/kv-cache.fp16"
cp "$work/c2/kv-cache.fp16" "$work/changed/kv-cache.fp16"
# With its chunk digests, so that a later --base-refs-only pack can match by them alone.
(cd "$work/c1" && pack weights.bf16 kv-cache.fp16 --digests -o "$work/c1.vfs")
full_s=$(cd "$work/c2" && median pack weights.bf16 kv-cache.fp16 -o "$work/c2-full.vfs")
inc_s=$(cd "$work/c2" && median pack weights.bf16 kv-cache.fp16 --base "$work/c1.vfs" -o "$work/c2-inc.vfs")
refs_s=$(cd "$work/c2" && median pack weights.bf16 kv-cache.fp16 --base "$work/c1.vfs" --base-refs-only -o "$work/c2-refs.vfs" 2>/dev/null || echo "n/a")
(cd "$work/changed" && pack kv-cache.fp16 -o "$work/changed.vfs")
full_b=$(stat -c %s "$work/c2-full.vfs") inc_b=$(stat -c %s "$work/c2-inc.vfs") changed_b=$(stat -c %s "$work/changed.vfs")
refs_b=$( [ -f "$work/c2-refs.vfs" ] && stat -c %s "$work/c2-refs.vfs" || echo 0)
printf "%-34s %12s %9s %10s\n" "second checkpoint" "stream MiB" "pack s" "vs changed"
printf "%-34s %12s %9s %10s\n" "full" "$(mib "$full_b")" "$full_s" "$(echo "scale=2; $full_b / $changed_b" | bc -l)x"
printf "%-34s %12s %9s %10s\n" "--base (full mode)" "$(mib "$inc_b")" "$inc_s" "$(echo "scale=3; $inc_b / $changed_b" | bc -l)x"
[ "$refs_b" -gt 0 ] && printf "%-34s %12s %9s %10s\n" "--base --base-refs-only" "$(mib "$refs_b")" "$refs_s" \
  "$(echo "scale=3; $refs_b / $changed_b" | bc -l)x"
printf "%-34s %12s %9s\n" "changed bytes packed alone" "$(mib "$changed_b")" "-"

echo
echo "== 2. training-like: the generator's training state, $size per kind"
printf "%-8s %6s %14s %14s %10s %10s\n" kind steps "full MiB" "--base MiB" "full x" "--base x"
for kind in fp32 bf16 adam-m adam-v; do
  # The same object name in every checkpoint (objects match their base by name).
  mkdir -p "$work/s0" "$work/s"
  "$bin" gen -k "$kind" -s "$size" --step 0 -o "$work/s0/state" -f
  (cd "$work/s0" && pack state --digests -o "$work/$kind-0.vfs")
  for steps in 1 10; do
    "$bin" gen -k "$kind" -s "$size" --step "$steps" -o "$work/s/state" -f
    (cd "$work/s" && pack state -o "$work/$kind-$steps-full.vfs" &&
      pack state --base "$work/$kind-0.vfs" -o "$work/$kind-$steps-inc.vfs")
    f=$(stat -c %s "$work/$kind-$steps-full.vfs") i=$(stat -c %s "$work/$kind-$steps-inc.vfs")
    printf "%-8s %6s %14s %14s %10s %10s\n" "$kind" "$steps" "$(mib "$f")" "$(mib "$i")" \
      "$(echo "scale=3; $total / $f" | bc -l)" "$(echo "scale=3; $total / $i" | bc -l)"
  done
  rm -f "$work/s0/state" "$work/s/state"
done

echo
echo "== 3. restore of the inference-like second checkpoint (unpack to a directory in $(dirname "$work"))"
restore() { rm -rf "$work/restored"; "$bin" unpack -q "$@" -o "$work/restored/"; }
full_r=$(median restore "$work/c2-full.vfs")
inc_r=$(median restore "$work/c2-inc.vfs" --base "$work/c1.vfs")
rm -rf "$work/restored"
printf "%-34s %9s\n" "second checkpoint ($(mib "$total") MiB)" "unpack s"
printf "%-34s %9s\n" "full stream" "$full_r"
printf "%-34s %9s\n" "incremental, with its base" "$inc_r"

echo
echo "== 4. live migration with the first checkpoint already at the receiver (bench/incremental_net.sh)"
weights_size=$(( weights / 1048576 ))M kv_size=$(( kv / 1048576 ))M
WEIGHTS="$weights_size" KV="$kv_size" VRAMFLOW="$bin" bench/incremental_net.sh
