#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Float codecs side by side: vramflow against ZipNN (the compressor built for
# neural-network weights), zstd -1, pzstd and lz4, on the generator's
# model-like data of each float dtype and on any raw files given, in one run:
# ratio, compress and decompress MB/s. Benchmarks only; CI never runs this.
#
#   bench/peers.sh [SIZE] [FILE:DTYPE ...]    SIZE per generated kind, default 256M;
#                                              DTYPE float32, bfloat16, float16 or float8_e4m3fn
#   REPEAT=5 bench/peers.sh                    runs per measurement (best of them; default 3)
#   VRAMFLOW_BIN=build-x/vramflow bench/peers.sh
#
# How each tool is timed:
# - vramflow: `pack FILE -o STREAM -j T` (file to file, both in /dev/shm) and
#   `unpack STREAM -o - > /dev/null` (no file system on the output side), wall
#   clock, best of REPEAT runs;
# - ZipNN: ../shared/peers/zipnn's zipnn_measure.py, in memory (its compress()
#   and decompress() on a bytearray), each run after one of vramflow's, best of
#   REPEAT; built on first use into build-zipnn/ (ZIPNN_DIR overrides);
# - zstd, pzstd, lz4: the command-line tools file to file (output to
#   /dev/null when decompressing), best of REPEAT runs.
# Every tool is given its best run: on a shared machine, other tenants only
# ever slow a run down, so the best is the least disturbed. Medians and
# spreads are printed beside it. Ratios are exact.
set -euo pipefail
cd "$(dirname "$0")/.."
size="${1:-256M}"
shift || true
repeat="${REPEAT:-3}"
bin="${VRAMFLOW_BIN:-build/vramflow}"
[ -x "$bin" ] || ./scripts/build.sh >/dev/null
peers="${PEERS_DIR:-$(cd .. && pwd)/shared/peers}"
zipnn_dir="${ZIPNN_DIR:-build-zipnn}"
for tool in zstd pzstd lz4 /usr/bin/python3; do
  command -v "$tool" >/dev/null || { echo "peers: $tool is missing (run scripts/setup.sh)" >&2; exit 1; }
done
zipnn=$(bash "$peers/zipnn/build.sh" "$zipnn_dir")
mkdir -p bench/results
work=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/vramflow-peers-XXXXXX")
trap 'rm -rf "$work"' EXIT

inputs=()  # "PATH DTYPE LABEL"
for kind in fp32 bf16 fp16 fp8 adam-m adam-v; do
  case $kind in bf16) dtype=bfloat16 ;; fp16) dtype=float16 ;; fp8) dtype=float8_e4m3fn ;; *) dtype=float32 ;; esac
  "$bin" gen -k "$kind" -s "$size" -o "$work/$kind.bin"
  inputs+=("$work/$kind.bin $dtype $kind")
done
for arg in "$@"; do
  file=${arg%:*} dtype=${arg##*:}
  [ -f "$file" ] && [ "$file" != "$arg" ] || { echo "peers: expected FILE:DTYPE, got '$arg'" >&2; exit 2; }
  inputs+=("$(realpath "$file") $dtype $(basename "$file")")
done

# seconds CMD...: wall seconds of one run of CMD (stdout to /dev/null unless redirected inside).
seconds() {
  local start end
  start=$(date +%s.%N)
  "$@"
  end=$(date +%s.%N)
  printf "%.6f" "$(echo "$end - $start" | bc -l)"
}

results="$work/results.jsonl"
: >"$results"
# record LABEL TOOL BYTES STORED "COMPRESS_SECONDS..." "DECOMPRESS_SECONDS..."
record() {
  echo "{\"input\": \"$1\", \"tool\": \"$2\", \"bytes\": $3, \"stored\": $4, \"comp_s\": [${5// /, }], \"decomp_s\": [${6// /, }]}" >>"$results"
}

for input in "${inputs[@]}"; do
  read -r file dtype label <<<"$input"
  bytes=$(stat -c %s "$file")
  echo "== $label ($dtype, $(numfmt --to=iec "$bytes"))" >&2
  for threads in 1 2; do
    # vramflow's and ZipNN's runs alternate, so that a slow spell of the
    # machine falls on both.
    c="" d="" zc="" zd="" zstored=""
    for _ in $(seq "$repeat"); do
      # A fresh output each run: overwriting makes rename() free the old
      # stream's pages inside the timed pack (about 8 ms per 64 MiB here),
      # a cost of the benchmark's reuse, not of packing.
      rm -f "$work/s.vfs"
      c+="$(seconds "$bin" pack "$file" -o "$work/s.vfs" -q -j "$threads") "
      d+="$(seconds sh -c "\"$bin\" unpack \"$work/s.vfs\" -o - -q -j $threads > /dev/null") "
      z=$(/usr/bin/python3 "$zipnn" "$file" "$dtype" "$threads" 1)
      read -r zstored zcs zds < <(echo "$z" | /usr/bin/python3 -c '
import json, sys
z = json.loads(sys.stdin.read())
assert z["exact"], "ZipNN round trip is not byte-exact"
mb = z["bytes"] / 1e6
print(z["compressed"], mb / z["compress_MBps"], mb / z["decompress_MBps"])')
      zc+="$zcs " zd+="$zds "
    done
    record "$label" "vramflow -j $threads" "$bytes" "$(stat -c %s "$work/s.vfs")" "${c% }" "${d% }"
    record "$label" "zipnn threads=$threads" "$bytes" "$zstored" "${zc% }" "${zd% }"
  done
  for tool in "zstd -1" "pzstd -1 -p 2" "lz4 -1"; do
    c="" d=""
    for _ in $(seq "$repeat"); do
      case $tool in
        zstd*) c+="$(seconds zstd -q -1 -f "$file" -o "$work/p.out") "; d+="$(seconds zstd -q -d -f "$work/p.out" -o /dev/null) " ;;
        pzstd*) c+="$(seconds pzstd -q -1 -p 2 -f "$file" -o "$work/p.out") "; d+="$(seconds pzstd -q -d -p 2 -f "$work/p.out" -o /dev/null) " ;;
        lz4*) c+="$(seconds lz4 -q -1 -f "$file" "$work/p.out") "; d+="$(seconds lz4 -q -d -f "$work/p.out" /dev/null) " ;;
      esac
    done
    record "$label" "$tool" "$bytes" "$(stat -c %s "$work/p.out")" "${c% }" "${d% }"
  done
done

/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
json.dump(rows, open("bench/results/peers.json", "w"), indent=1)
speeds = lambda r, key: [r["bytes"] / s / 1e6 for s in r[key]]
best = lambda r, key: max(speeds(r, key))
def shown(r, key):
    xs = speeds(r, key)
    if len(xs) == 1:
        return f"{max(xs):6.0f}"
    return f"{max(xs):6.0f} ({statistics.median(xs):.0f}; {min(xs):.0f}-{max(xs):.0f})"
print(f"{'input':10} {'tool':18} {'ratio':>7}  {'compress MB/s':>26}  {'decompress MB/s':>26}")
for r in rows:
    print(f"{r['input']:10} {r['tool']:18} {r['bytes'] / r['stored']:7.4f}  "
          f"{shown(r, 'comp_s'):>26}  {shown(r, 'decomp_s'):>26}")
print("(every tool: best of its runs, in brackets their median and spread; ZipNN in memory, the others file to file)")
inputs = dict.fromkeys(r["input"] for r in rows)
for i in inputs:
    by = {r["tool"]: r for r in rows if r["input"] == i}
    for t in (1, 2):
        v, z = by[f"vramflow -j {t}"], by[f"zipnn threads={t}"]
        print(f"{i:10} threads {t}: ratio vs ZipNN {v['bytes'] / v['stored'] / (z['bytes'] / z['stored']):.4f}x, "
              f"pack {best(v, 'comp_s') / best(z, 'comp_s'):.2f}x ZipNN's compress, "
              f"unpack {best(v, 'decomp_s') / best(z, 'decomp_s'):.2f}x ZipNN's decompress (best against best)")
PY
echo "results: bench/results/peers.json"
