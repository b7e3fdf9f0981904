#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Float codecs side by side: vramflow against ZipNN (the compressor built for
# neural-network weights), zstd -1, pzstd and lz4, on the generator's
# model-like data of each float dtype and on any raw files given, in one run:
# ratio, compress and decompress MB/s, and the CPU each GiB costs (user + system
# seconds, every thread and child; bench/cputime.py, ZipNN: bench/zipnn_cpu.py)
# with the issue's targets. Benchmarks only; CI never runs this.
#
#   bench/peers.sh [SIZE] [FILE:DTYPE ...]    SIZE per generated kind, default 256M;
#                                              DTYPE float32, bfloat16, float16 or float8_e4m3fn
#   REPEAT=5 bench/peers.sh                    runs per measurement (best of them; default 3)
#   TRAIN_STATE=DIR bench/peers.sh [SIZE]      real training state too: DIR's weights, gradients,
#                                              Adam moments (fp32), bf16 and fp16 weights, which
#                                              bench/train_state.py writes there first if missing
#                                              (needs python3-torch); SIZE 0: no generated kinds
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
# CPU per GiB: vramflow and the command-line tools whole processes (wait4's
# rusage), file to file as timed; ZipNN its compress() and decompress() calls
# alone (one more run each, in a process of its own). Lowest of the runs.
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
  [ "$size" != 0 ] || break
  case $kind in bf16) dtype=bfloat16 ;; fp16) dtype=float16 ;; fp8) dtype=float8_e4m3fn ;; *) dtype=float32 ;; esac
  "$bin" gen -k "$kind" -s "$size" -o "$work/$kind.bin"
  inputs+=("$work/$kind.bin $dtype $kind")
done
if [ -n "${TRAIN_STATE:-}" ]; then
  [ -f "$TRAIN_STATE/weights.f16" ] || /usr/bin/python3 bench/train_state.py "$TRAIN_STATE" >&2
  for f in weights.f32:float32 grads.f32:float32 adam-m.f32:float32 adam-v.f32:float32 weights.bf16:bfloat16 \
    weights.f16:float16; do
    set -- "$@" "$TRAIN_STATE/$f"
  done
fi
for arg in "$@"; do
  file=${arg%:*} dtype=${arg##*:}
  [ -f "$file" ] && [ "$file" != "$arg" ] || { echo "peers: expected FILE:DTYPE, got '$arg'" >&2; exit 2; }
  inputs+=("$(realpath "$file") $dtype $(basename "$file")")
done

# timed WALL_VAR CPU_VAR [-o OUT] CMD...: runs CMD (stdout to OUT with -o), appending its wall
# seconds to WALL_VAR and its CPU seconds (user + system, children included) to CPU_VAR.
timed() {
  local -n wall_=$1 cpu_=$2
  shift 2
  local w u s
  /usr/bin/python3 bench/cputime.py -r "$work/cpu" "$@"
  read -r w u s <"$work/cpu"
  wall_+="$w "
  cpu_+="$(printf "%.6f" "$(echo "$u + $s" | bc -l)") "
}

results="$work/results.jsonl"
: >"$results"
# record LABEL TOOL BYTES STORED "COMPRESS_SECONDS..." "DECOMPRESS_SECONDS..." "COMPRESS_CPU..." "DECOMPRESS_CPU..."
record() {
  echo "{\"input\": \"$1\", \"tool\": \"$2\", \"bytes\": $3, \"stored\": $4," \
    "\"comp_s\": [${5// /, }], \"decomp_s\": [${6// /, }]," \
    "\"comp_cpu\": [${7// /, }], \"decomp_cpu\": [${8// /, }]}" >>"$results"
}

for input in "${inputs[@]}"; do
  read -r file dtype label <<<"$input"
  bytes=$(stat -c %s "$file")
  echo "== $label ($dtype, $(numfmt --to=iec "$bytes"))" >&2
  for threads in 1 2; do
    # vramflow's and ZipNN's runs alternate, so that a slow spell of the
    # machine falls on both.
    c="" d="" cc="" dc="" zc="" zd="" zstored=""
    for _ in $(seq "$repeat"); do
      # A fresh output each run: overwriting makes rename() free the old
      # stream's pages inside the timed pack (about 8 ms per 64 MiB here),
      # a cost of the benchmark's reuse, not of packing.
      rm -f "$work/s.vfs"
      timed c cc "$bin" pack "$file" -o "$work/s.vfs" -q -j "$threads"
      timed d dc -o /dev/null "$bin" unpack "$work/s.vfs" -o - -q -j "$threads"
      z=$(/usr/bin/python3 "$zipnn" "$file" "$dtype" "$threads" 1)
      read -r zstored zcs zds < <(echo "$z" | /usr/bin/python3 -c '
import json, sys
z = json.loads(sys.stdin.read())
assert z["exact"], "ZipNN round trip is not byte-exact"
mb = z["bytes"] / 1e6
print(z["compressed"], mb / z["compress_MBps"], mb / z["decompress_MBps"])')
      zc+="$zcs " zd+="$zds "
    done
    record "$label" "vramflow -j $threads" "$bytes" "$(stat -c %s "$work/s.vfs")" "${c% }" "${d% }" "${cc% }" "${dc% }"
    zcpu=$(/usr/bin/python3 bench/zipnn_cpu.py "$zipnn" "$file" "$dtype" "$threads")
    read -r zcc zdc < <(echo "$zcpu" |
      /usr/bin/python3 -c 'import json, sys; z = json.load(sys.stdin); print(z["comp_cpu"], z["decomp_cpu"])')
    record "$label" "zipnn threads=$threads" "$bytes" "$zstored" "${zc% }" "${zd% }" "$zcc" "$zdc"
  done
  for tool in "zstd -1" "pzstd -1 -p 2" "lz4 -1"; do
    c="" d="" cc="" dc=""
    for _ in $(seq "$repeat"); do
      case $tool in
        zstd*) timed c cc zstd -q -1 -f "$file" -o "$work/p.out"; timed d dc zstd -q -d -f "$work/p.out" -o /dev/null ;;
        pzstd*) timed c cc pzstd -q -1 -p 2 -f "$file" -o "$work/p.out"
                timed d dc pzstd -q -d -p 2 -f "$work/p.out" -o /dev/null ;;
        lz4*) timed c cc lz4 -q -1 -f "$file" "$work/p.out"; timed d dc lz4 -q -d -f "$work/p.out" /dev/null ;;
      esac
    done
    record "$label" "$tool" "$bytes" "$(stat -c %s "$work/p.out")" "${c% }" "${d% }" "${cc% }" "${dc% }"
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
# CPU per GiB: the lowest of the runs; per core: the GiB/s that one core gives at that cost.
gib = lambda r, key: min(r[key]) / (r["bytes"] / 2**30)
print(f"\n{'input':10} {'tool':18} {'compress CPU s/GiB':>19} {'per core':>12}"
      f"  {'decompress CPU s/GiB':>21} {'per core':>12}")
for r in rows:
    c, d = gib(r, "comp_cpu"), gib(r, "decomp_cpu")
    print(f"{r['input']:10} {r['tool']:18} {c:19.3f} {1 / c:7.2f} GiB/s  {d:21.3f} {1 / d:7.2f} GiB/s")
print("(vramflow, zstd, pzstd, lz4: whole processes, file to file, reading and writing included;"
      " ZipNN: its calls alone)")
print("\ntargets: pack CPU/GiB at most 1/2.5 of zstd -1's with a better ratio; unpack CPU/GiB at most zstd -d's")
for i in dict.fromkeys(r["input"] for r in rows):
    by = {r["tool"]: r for r in rows if r["input"] == i}
    z = by["zstd -1"]
    for t in (1, 2):
        v = by[f"vramflow -j {t}"]
        dump_x = gib(z, "comp_cpu") / gib(v, "comp_cpu")
        better = v["stored"] < z["stored"]
        restore_x = gib(z, "decomp_cpu") / gib(v, "decomp_cpu")
        print(f"{i:10} -j {t}: pack {gib(v, 'comp_cpu'):.3f} s/GiB, zstd -1 {gib(z, 'comp_cpu'):.3f}:"
              f" x{dump_x:.2f} less ({'holds' if dump_x >= 2.5 and better else 'misses'}: >= 2.5,"
              f" ratio {'better' if better else 'not better'});"
              f" unpack {gib(v, 'decomp_cpu'):.3f}, zstd -d {gib(z, 'decomp_cpu'):.3f}: x{restore_x:.2f}"
              f" ({'holds' if restore_x >= 1 else 'misses'}: >= 1)")
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
