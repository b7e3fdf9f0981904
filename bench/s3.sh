#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# S3 benchmark against a local Ceph RGW that this script starts (scripts/rgw.sh) and stops:
#   1. upload a model-like checkpoint: `vramflow pack FILES -o s3://...` (compress + multipart
#      upload, overlapped) beside `aws s3 cp` of the packed stream (the same bytes on the wire)
#      with the same part size and concurrency (a temporary AWS_CONFIG_FILE sets
#      s3.multipart_chunksize and s3.max_concurrent_requests), and `vramflow send` of that
#      stream (the transport alone);
#   2. peak RSS (/usr/bin/time -v) of `vramflow pack` of a BIG checkpoint to s3:// with
#      --max-memory MEM_LIMIT; target: peak RSS <= MEM_LIMIT + 32 MiB;
#   3. restore of one GPU of a two-GPU checkpoint (`vramflow demo -g 2 --to s3://`, the simulator's
#      model-like layout): `unpack --gpu 1` (through the seek index) beside a full `unpack`: bytes
#      fetched against the object size and against GPU 1's own frames, and the time.
# Prints a table and writes bench/results/s3.json.
#
#   bench/s3.sh
#   SIZE=1G          checkpoint for the upload comparison (bf16 weights 1/2, adam-m 1/4, adam-v 1/4)
#   BIG=4G           checkpoint for the peak-RSS run (same mix; 0 skips it)
#   MEM=256M         --max-memory of the upload comparison
#   MEM_LIMIT=128M   --max-memory of the peak-RSS run
#   GPU_SIZE=512M    VRAM per simulated GPU of the two-GPU checkpoint (0 skips case 3)
#   REPEAT=1         runs per upload case; the fastest counts
#   WORK=DIR         where the inputs are generated (default: a temporary directory in /tmp)
#   VRAMFLOW=PATH    binary to measure (default build/vramflow)
#
# RGW runs on this machine, so the numbers measure client CPU and RGW together, not a network.
# Without root, Ceph (radosgw, ceph-mon, ceph-osd) or awscli it says what is missing and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
size="${SIZE:-1G}"
big="${BIG:-4G}"
mem="${MEM:-256M}"
mem_limit="${MEM_LIMIT:-128M}"
gpu_size="${GPU_SIZE:-512M}"
repeat="${REPEAT:-1}"
bin="${VRAMFLOW:-build/vramflow}"

skip() { echo "s3 bench: skipped: $*" >&2; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root to run a local Ceph RGW (scripts/rgw.sh)"
for b in radosgw ceph-mon ceph-osd; do
  command -v "$b" >/dev/null || skip "$b is not installed (scripts/setup.sh installs radosgw ceph-mon ceph-osd awscli)"
done
# Debian's awscli; a pip-installed aws may come first on PATH.
aws=/usr/bin/aws
[ -x "$aws" ] || aws=$(command -v aws || true)
[ -n "$aws" ] || skip "the aws CLI is not installed (scripts/setup.sh installs Debian's awscli)"
[ -x /usr/bin/time ] || skip "/usr/bin/time is missing (apt-get install time)"
command -v python3 >/dev/null || skip "python3 is missing"

[ -x "$bin" ] || ./scripts/build.sh >/dev/null
bin=$(realpath "$bin")
mkdir -p bench/results

# Sizes in bytes, as vramflow reads them (binary suffixes).
bytes() { python3 -c 'import re,sys
m=re.fullmatch(r"(?i)\s*([0-9.]+)\s*([kmgt]?)(i?b)?\s*",sys.argv[1]); assert m, sys.argv[1]
print(int(float(m.group(1))*1024**" kmgt".index((m.group(2) or " ").lower())))' "$1"; }
size_b=$(bytes "$size"); big_b=$(bytes "$big"); mem_b=$(bytes "$mem"); mem_limit_b=$(bytes "$mem_limit")
gpu_size_b=$(bytes "$gpu_size")

work_made=0
if [ -z "${WORK:-}" ]; then WORK=$(mktemp -d /tmp/vramflow-s3bench-XXXXXX); work_made=1; fi
mkdir -p "$WORK"
rgw_dir=$(mktemp -u /tmp/vramflow-s3bench-rgw-XXXXXX)  # rgw.sh makes it
cleanup() {
  local rc=$?
  scripts/rgw.sh stop "$rgw_dir" 2>/dev/null || true
  [ "$work_made" = 1 ] && rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "s3 bench: starting a local Ceph RGW in $rgw_dir" >&2
eval "$(scripts/rgw.sh start "$rgw_dir")"
bucket=$VRAMFLOW_TEST_S3_BUCKET
s3() { "$aws" --endpoint-url "$AWS_ENDPOINT_URL" "$@"; }

# The part size vramflow uses (docs/S3.md): pack gives s3:// a quarter of --max-memory (at most
# 256 MiB, at least 10 MiB); the first part is that / (8 + 1) in whole MiB, at least 5 MiB.
# `send` keeps the default 64 MiB budget: 7 MiB parts.
concurrency=8
part_for() {
  python3 -c 'import sys
b=int(sys.argv[1]); share=max(min(b//4, 256<<20), 10<<20)
print(max(5<<20, (share//9)>>20<<20))' "$1"
}
part_b=$(part_for "$mem_b")
send_part_b=$(( 7 << 20 ))
[ "$part_b" = "$send_part_b" ] || echo "s3 bench: note: send uploads 7 MiB parts, pack and aws $((part_b >> 20)) MiB" >&2
export AWS_CONFIG_FILE="$WORK/aws-config"
cat >"$AWS_CONFIG_FILE" <<EOF
[default]
region = $AWS_REGION
s3 =
  multipart_chunksize = $((part_b >> 20))MB
  multipart_threshold = $((part_b >> 20))MB
  max_concurrent_requests = $concurrency
EOF

# gen_ckpt DIR BYTES: a model-like checkpoint (bf16 weights 1/2, adam-m 1/4, adam-v 1/4).
gen_ckpt() {
  local d=$1 n=$2
  mkdir -p "$d"
  "$bin" gen -f -k bf16 -s $((n / 2)) --seed 1 -o "$d/weights.bin"
  "$bin" gen -f -k adam-m -s $((n / 4)) --seed 2 -o "$d/adam_m.bin"
  "$bin" gen -f -k adam-v -s $((n - n / 2 - n / 4)) --seed 3 -o "$d/adam_v.bin"
}

# timed CMD...: seconds (wall) of the fastest of $repeat runs.
timed() {
  local best="" i t0 t1 s
  for i in $(seq "$repeat"); do
    t0=$(date +%s.%N)
    "$@" >"$WORK/last.log" 2>&1 || { cat "$WORK/last.log" >&2; echo "s3 bench: failed: $*" >&2; exit 1; }
    t1=$(date +%s.%N)
    s=$(python3 -c "print(f'{$t1 - $t0:.3f}')")
    if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if $s < $best else 1)"; then best=$s; fi
  done
  echo "$best"
}

echo "s3 bench: generating a $size checkpoint in $WORK/ckpt" >&2
gen_ckpt "$WORK/ckpt" "$size_b"
inputs=("$WORK/ckpt/weights.bin" "$WORK/ckpt/adam_m.bin" "$WORK/ckpt/adam_v.bin")
"$bin" pack "${inputs[@]}" -o "$WORK/ckpt.vfs" -f -q --max-memory "$mem"
stored_b=$(stat -c %s "$WORK/ckpt.vfs")

echo "s3 bench: uploading (part size $((part_b >> 20)) MiB, $concurrency in flight, $repeat run(s) each)" >&2
t_aws=$(timed s3 s3 cp --only-show-errors "$WORK/ckpt.vfs" "s3://$bucket/bench/aws.vfs")
# send refuses an existing object (there is no --force): a fresh key per run.
send_fresh() { "$bin" send -q "$WORK/ckpt.vfs" "s3://$bucket/bench/send-$RANDOM$RANDOM.vfs"; }
t_send=$(timed send_fresh)
t_pack=$(timed "$bin" pack "${inputs[@]}" -o "s3://$bucket/bench/pack.vfs" --max-memory "$mem" -q -f)
# The three objects are the same bytes.
s3 s3 cp --only-show-errors "s3://$bucket/bench/pack.vfs" "$WORK/check.vfs"
cmp -s "$WORK/check.vfs" "$WORK/ckpt.vfs" || { echo "s3 bench: the packed object differs from pack -o FILE" >&2; exit 1; }
rm -f "$WORK/check.vfs"
s3 s3 rm --only-show-errors --recursive "s3://$bucket/bench/"

rss_kb=0; t_big=0; big_stored=0
if [ "$big_b" -gt 0 ]; then
  rm -rf "$WORK/ckpt" "$WORK/ckpt.vfs"
  echo "s3 bench: generating a $big checkpoint for the peak-RSS run" >&2
  gen_ckpt "$WORK/big" "$big_b"
  t0=$(date +%s.%N)
  /usr/bin/time -v "$bin" pack "$WORK/big/weights.bin" "$WORK/big/adam_m.bin" "$WORK/big/adam_v.bin" \
    -o "s3://$bucket/bench/big.vfs" --max-memory "$mem_limit" -q 2>"$WORK/time.log" ||
    { cat "$WORK/time.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  t_big=$(python3 -c "print(f'{$t1 - $t0:.3f}')")
  rss_kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$WORK/time.log")
  big_stored=$(s3 s3api head-object --bucket "$bucket" --key bench/big.vfs --query ContentLength --output text)
  s3 s3 rm --only-show-errors "s3://$bucket/bench/big.vfs"
  rm -rf "$WORK/big"
fi

# 3. One GPU of two, restored from S3 through the seek index, beside the full restore.
gpus_json=""; t_gpus_all=0; t_gpu_one=0; gpu_one_read=0
if [ "$gpu_size_b" -gt 0 ]; then
  echo "s3 bench: dumping two simulated GPUs of $gpu_size each to s3://" >&2
  gpus_uri="s3://$bucket/bench/gpus.vfs"
  "$bin" demo -q -f -g 2 -s "$gpu_size" --to "$gpus_uri" --max-memory "$mem" >/dev/null
  gpus_json=$("$bin" inspect --json "$gpus_uri")
  echo "s3 bench: restoring both GPUs, then GPU 1 alone (--gpu 1)" >&2
  t_gpus_all=$(timed "$bin" unpack -q -f "$gpus_uri" -o "$WORK/gpus-all/" --max-memory "$mem")
  t_gpu_one=$(timed "$bin" unpack -f "$gpus_uri" --gpu 1 -o "$WORK/gpu-one/" --max-memory "$mem")
  gpu_one_read=$(sed -n 's/.*, \([0-9]*\) of [0-9]* bytes).*/\1/p' "$WORK/last.log")
  [ -n "$gpu_one_read" ] || { cat "$WORK/last.log" >&2; echo "s3 bench: unpack --gpu 1 reported no bytes read" >&2; exit 1; }
  for f in "$WORK"/gpu-one/gpu1/*; do
    cmp -s "$f" "$WORK/gpus-all/gpu1/$(basename "$f")" || { echo "s3 bench: $f differs from the full restore" >&2; exit 1; }
  done
  s3 s3 rm --only-show-errors "$gpus_uri"
  rm -rf "$WORK/gpus-all" "$WORK/gpu-one"
fi

python3 - "$size_b" "$stored_b" "$t_aws" "$t_send" "$t_pack" "$part_b" "$concurrency" "$mem_b" \
  "$big_b" "$big_stored" "$t_big" "$rss_kb" "$mem_limit_b" "$("$aws" --version 2>&1)" "$("$bin" --version)" \
  "$gpu_size_b" "$t_gpus_all" "$t_gpu_one" "$gpu_one_read" "$gpus_json" <<'EOF'
import json, sys
(raw, stored, t_aws, t_send, t_pack, part, conc, mem, big, big_stored, t_big, rss_kb, limit) = (
    float(x) for x in sys.argv[1:14])
aws_version, vf_version = sys.argv[14], sys.argv[15]
gpu_size, t_gpus_all, t_gpu_one, gpu_one_read = (float(x) for x in sys.argv[16:20])
gpus = json.loads(sys.argv[20]) if sys.argv[20] else None
MiB = 1 << 20
rows = [
    ("aws s3 cp (packed stream)", stored, stored, t_aws),
    ("vramflow send (packed stream)", stored, stored, t_send),
    ("vramflow pack -o s3:// (raw in)", raw, stored, t_pack),
]
print(f"\nS3 upload to a local Ceph RGW: {raw / MiB:.0f} MiB model-like checkpoint -> {stored / MiB:.1f} MiB stream "
      f"(ratio {raw / stored:.3f}); parts {part / MiB:.0f} MiB, {conc:.0f} in flight")
print(f"{'case':<34} {'in MiB':>8} {'wire MiB':>9} {'seconds':>8} {'in MB/s':>8} {'wire MB/s':>9} {'vs aws':>7}")
out = []
for name, inb, wire, t in rows:
    print(f"{name:<34} {inb / MiB:>8.1f} {wire / MiB:>9.1f} {t:>8.2f} {inb / t / 1e6:>8.1f} {wire / t / 1e6:>9.1f} "
          f"{t_aws / t:>6.2f}x")
    out.append({"case": name, "input_bytes": int(inb), "wire_bytes": int(wire), "seconds": t,
                "input_mbps": inb / t / 1e6, "wire_mbps": wire / t / 1e6, "speed_vs_aws": t_aws / t})
print("  (vs aws: aws seconds / these seconds, >1 is faster; MB = 10^6 bytes)")
result = {"raw_bytes": int(raw), "stream_bytes": int(stored), "part_size": int(part), "concurrency": int(conc),
          "max_memory": int(mem), "aws": aws_version, "vramflow": vf_version, "upload": out}
if big > 0:
    rss = rss_kb * 1024
    ok = rss <= limit + 32 * MiB
    print(f"\npeak RSS, vramflow pack of {big / MiB:.0f} MiB to s3:// with --max-memory {limit / MiB:.0f}M: "
          f"{rss / MiB:.1f} MiB (target <= {(limit + 32 * MiB) / MiB:.0f} MiB: {'met' if ok else 'MISSED'}); "
          f"{t_big:.1f} s, {big / t_big / 1e6:.1f} MB/s in, stream {big_stored / MiB:.1f} MiB")
    result["peak_rss"] = {"raw_bytes": int(big), "stream_bytes": int(big_stored), "max_memory": int(limit),
                          "peak_rss_bytes": int(rss), "target_bytes": int(limit + 32 * MiB), "met": ok,
                          "seconds": t_big}
if gpus:
    obj = gpus["stream_bytes"]
    own = sum(o["frame_bytes"] for o in gpus["objects"] if o["attributes"].get("gpu") == "1")
    own_raw = sum(o["size"] for o in gpus["objects"] if o["attributes"].get("gpu") == "1")
    beyond = gpu_one_read - own - gpus["bytes_read"]
    print(f"\nrestore from s3:// of a two-GPU checkpoint ({gpu_size / MiB:.0f} MiB of simulated VRAM per GPU, "
          f"dedup on): object {obj / MiB:.1f} MiB, GPU 1's own frames {own / MiB:.1f} MiB ({100 * own / obj:.1f}%)")
    print(f"{'case':<34} {'read MiB':>9} {'of object':>9} {'seconds':>8} {'restored MiB':>13} {'MB/s':>8}")
    cases = [("vramflow unpack (both GPUs)", obj, t_gpus_all, gpus["raw_bytes"]),
             ("vramflow unpack --gpu 1", gpu_one_read, t_gpu_one, own_raw)]
    rows3 = []
    for name, read, t, restored in cases:
        print(f"{name:<34} {read / MiB:>9.1f} {100 * read / obj:>8.1f}% {t:>8.2f} {restored / MiB:>13.1f} "
              f"{restored / t / 1e6:>8.1f}")
        rows3.append({"case": name, "bytes_read": int(read), "seconds": t, "restored_bytes": int(restored)})
    print(f"  --gpu 1 read = the seek index ({gpus['bytes_read'] / 1024:.0f} KiB) + GPU 1's frames "
          f"({own / MiB:.1f} MiB) + {beyond / MiB:.1f} MiB of GPU 0's DATA frames that its dedup references name")
    result["restore_one_gpu"] = {"gpu_bytes": int(gpu_size), "object_bytes": obj, "index_bytes": gpus["bytes_read"],
                                 "gpu1_frame_bytes": own, "dedup_source_bytes": int(beyond), "cases": rows3}
json.dump(result, open("bench/results/s3.json", "w"), indent=2)
print("wrote bench/results/s3.json")
EOF
