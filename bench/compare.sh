#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Pipeline benchmark: vramflow's dump and restore graphs beside pzstd, zstd
# and lz4 on the same bytes, in the same run, with peak RSS from
# /usr/bin/time -v, and the CPU each GiB costs (user + system seconds per GiB:
# the pipeline's from its own report, with the simulated rings' copies shown
# apart; the peers' from /usr/bin/time). Prints tables and writes
# bench/results/compare.json.
#
#   bench/compare.sh [SIZE_PER_GPU] [GPUS]     default 512M, 2
#   BIG=1 bench/compare.sh                     also the 8 GiB/--max-memory 64M
#                                              and 4 GiB zero-BO checks
#   VRAMFLOW_BIN=build-x/vramflow bench/compare.sh   measures that binary
#   DMA_CPUS=4 taskset -c 2,3 bench/compare.sh       also runs the pipeline with the
#                                              simulated rings on CPU 4 only, so that
#                                              their copies cost the measured CPUs
#                                              nothing (as SDMA's do not)
set -euo pipefail
cd "$(dirname "$0")/.."
size="${1:-512M}"
gpus="${2:-2}"
threads=$(nproc)
bin="${VRAMFLOW_BIN:-build/vramflow}"  # VRAMFLOW_BIN: measure another build
[ -x "$bin" ] || ./scripts/build.sh >/dev/null
for tool in pzstd zstd lz4 /usr/bin/time python3; do
  command -v "$tool" >/dev/null || { echo "compare: $tool is missing (run scripts/setup.sh)" >&2; exit 1; }
done
mkdir -p bench/results
work=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/vramflow-compare-XXXXXX")
trap 'rm -rf "$work"' EXIT

# timed NAME CMD...: runs CMD under /usr/bin/time -v into $work/NAME.time
# (wall time, peak RSS and user + system CPU, read back by the summary below).
timed() {
  local name=$1; shift
  /usr/bin/time -v -o "$work/$name.time" "$@"
}

echo "== vramflow pipeline ($gpus simulated GPUs x $size, $threads threads; also exports the raw bytes)"
timed vramflow "$bin" bench pipeline --gpus "$gpus" --size-per-gpu "$size" --threads "$threads" \
  --export-raw "$work/raw.bin" --json "$work/ours.json" | tee "$work/ours.txt"
raw=$(stat -c %s "$work/raw.bin")

echo "== peers on the same $(numfmt --to=iec "$raw") of raw VRAM bytes"
# Best of three, like vramflow's own figures (this VM backs fresh memory
# lazily, so a first run can be slow for reasons that are not the tool's).
for run in 1 2 3; do
  timed pzstd_c$run pzstd -q -1 -p "$threads" -f "$work/raw.bin" -o "$work/raw.pzst"
  timed pzstd_d$run pzstd -q -d -p "$threads" -f "$work/raw.pzst" -o /dev/null
  timed zstd_c$run zstd -q -1 -T"$threads" -f "$work/raw.bin" -o "$work/raw.zst"
  timed zstd_d$run zstd -q -d -f "$work/raw.zst" -o /dev/null
  timed lz4_c$run lz4 -q -1 -f "$work/raw.bin" "$work/raw.lz4"
  timed lz4_d$run lz4 -q -d -f "$work/raw.lz4" /dev/null
done
for f in raw.pzst raw.zst raw.lz4; do echo "$f $(stat -c %s "$work/$f")"; done > "$work/sizes"
# Peer timings include reading raw.bin from /dev/shm (page cache), which
# costs them about what DMA from simulated VRAM costs us.

dma_json="null"
if [ -n "${DMA_CPUS:-}" ]; then
  echo "== the same pipeline with the simulated rings on CPU $DMA_CPUS only"
  "$bin" bench pipeline --gpus "$gpus" --size-per-gpu "$size" --threads "$threads" --dma-cpus "$DMA_CPUS" \
    --json "$work/dma.json" | tee "$work/dma.txt"
  dma_json=$(cat "$work/dma.json")
fi

big_json="null"
if [ "${BIG:-0}" = 1 ]; then
  rm -f "$work"/raw.*  # the peers are done; 8 GiB twice (source and restored GPUs) needs the room
  echo "== 8 GiB of simulated VRAM, --max-memory 64M (private memory must stay <= 96 MiB; stream on disk)"
  "$bin" bench pipeline --gpus 2 --size-per-gpu 4G --max-memory 64M --threads "$threads" --no-scaling \
    --repeat 1 --work-dir "${TMPDIR:-/tmp}" --json "$work/big.json" | tee "$work/big.txt"
  echo "== one zero-filled 4 GiB BO"
  "$bin" bench pipeline --gpus 1 --size-per-gpu 4G --layout zeros --threads "$threads" --no-scaling \
    --json "$work/zeros.json" | tee "$work/zeros.txt"
  big_json="{\"budget64m\": $(cat "$work/big.json"), \"zero_bo\": $(cat "$work/zeros.json")}"
fi

python3 - "$work" "$raw" "$threads" "$big_json" "$dma_json" <<'PY'
import json, os, sys
work, raw, threads, big, dma = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
ours = json.load(open(f"{work}/ours.json"))
runs = {r["threads"]: r for r in ours["runs"]}
best = runs[max(runs)]
def t(name):
    if os.path.exists(f"{work}/{name}1.time"):  # best of the repeated runs
        runs = [t(f"{name}{i}") for i in (1, 2, 3)]
        return min(r[0] for r in runs), max(r[1] for r in runs)
    d = {}
    for line in open(f"{work}/{name}.time"):
        k, _, v = line.strip().partition(": ")
        d[k] = v
    wall = d["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")
    secs = 0.0
    for part in wall: secs = secs * 60 + float(part)
    return secs, int(d["Maximum resident set size (kbytes)"]) * 1024
def cpu(name):  # user + system seconds, lowest of the repeated runs
    if os.path.exists(f"{work}/{name}1.time"):
        return min(cpu(f"{name}{i}") for i in (1, 2, 3))
    d = dict(line.strip().partition(": ")[::2] for line in open(f"{work}/{name}.time"))
    return float(d["User time (seconds)"]) + float(d["System time (seconds)"])
sizes = dict(line.split() for line in open(f"{work}/sizes"))
size = lambda f: int(sizes[f])
rows = []
def row(name, stored, comp_s, decomp_s, rss):
    rows.append({"tool": name, "ratio": raw / stored, "compress_gbps": raw / comp_s / 1e9,
                 "decompress_gbps": raw / decomp_s / 1e9 if decomp_s else None, "peak_rss": rss})
row(f"vramflow ({threads} threads)", best["stream_bytes"], best["dump_seconds"], best["restore_seconds"], t("vramflow")[1])
if 1 in runs and max(runs) != 1:
    one = runs[1]
    row("vramflow (1 thread)", one["stream_bytes"], one["dump_seconds"], one["restore_seconds"], None)
row(f"pzstd -1 -p {threads}", size("raw.pzst"), t("pzstd_c")[0], t("pzstd_d")[0], t("pzstd_c")[1])
row(f"zstd -1 -T{threads} / zstd -d", size("raw.zst"), t("zstd_c")[0], t("zstd_d")[0], t("zstd_c")[1])
row("lz4 -1", size("raw.lz4"), t("lz4_c")[0], t("lz4_d")[0], t("lz4_c")[1])
print(f"\n{'tool':28} {'ratio':>7} {'compress':>12} {'decompress':>12} {'peak RSS':>10}")
for r in rows:
    d = f"{r['decompress_gbps']:.2f} GB/s" if r["decompress_gbps"] else "-"
    m = f"{r['peak_rss']/2**20:.0f} MiB" if r["peak_rss"] else "-"
    print(f"{r['tool']:28} {r['ratio']:7.3f} {r['compress_gbps']:7.2f} GB/s {d:>12} {m:>10}")
print("(vramflow's peak RSS counts the simulated VRAM it maps, twice: source and restored GPUs;"
      " its private memory is the rss-anon column above)")
pz = next(r for r in rows if r["tool"].startswith("pzstd"))
zd = next(r for r in rows if r["tool"].startswith("zstd"))
targets = {
    "dump >= 2.5x pzstd -1": rows[0]["compress_gbps"] / pz["compress_gbps"],
    "stream smaller than pzstd's": pz["ratio"] < rows[0]["ratio"],
    "restore >= 2x zstd -d": rows[0]["decompress_gbps"] / zd["decompress_gbps"],
}
targets["dump >= 3x pzstd -1 (floats issue)"] = targets["dump >= 2.5x pzstd -1"]
targets["restore >= 4x zstd -d (floats issue)"] = targets["restore >= 2x zstd -d"]
# The numbers the targets name (issue 3, and the later floats issue's higher
# bars), for bench/compare-runs.sh to count runs that met them.
thresholds = {"dump >= 2.5x pzstd -1": 2.5, "restore >= 2x zstd -d": 2.0,
              "dump >= 3x pzstd -1 (floats issue)": 3.0, "restore >= 4x zstd -d (floats issue)": 4.0,
              "dump scaling 1 -> N threads": 1.8, "restore scaling 1 -> N threads": 1.8}
if 1 in runs and max(runs) != 1:
    targets["dump scaling 1 -> N threads"] = runs[1]["dump_seconds"] / best["dump_seconds"]
    targets["restore scaling 1 -> N threads"] = runs[1]["restore_seconds"] / best["restore_seconds"]
# CPU per GiB of raw bytes: the pipeline's (its report's dump_cpu and
# restore_cpu, the simulated rings' copies apart) and the peers' whole processes.
gib = raw / 2**30
print(f"\n{'CPU seconds per GiB':28} {'dump':>8} {'less DMA':>9} {'per core':>12} {'restore':>8} {'less DMA':>9}"
      f" {'per core':>12}")
cpu_rows = []
def cpu_row(name, comp, comp_less, decomp, decomp_less):
    cpu_rows.append({"tool": name, "dump_cpu_s_per_gib": comp, "dump_cpu_s_per_gib_without_dma": comp_less,
                     "restore_cpu_s_per_gib": decomp, "restore_cpu_s_per_gib_without_dma": decomp_less})
    less = lambda v: f"{v:9.3f}" if v is not None else f"{'-':>9}"
    print(f"{name:28} {comp:8.3f} {less(comp_less)} {1 / (comp_less or comp):6.2f} GiB/s {decomp:8.3f}"
          f" {less(decomp_less)} {1 / (decomp_less or decomp):6.2f} GiB/s")
for r in sorted(runs.values(), key=lambda r: -r["threads"]):
    d, x = r["dump_cpu"], r["restore_cpu"]
    cpu_row(f"vramflow ({r['threads']} thread{'s' if r['threads'] > 1 else ''})", d["cpu_s_per_gib"],
            d["cpu_s_per_gib_without_dma"], x["cpu_s_per_gib"], x["cpu_s_per_gib_without_dma"])
cpu_row(f"pzstd -1 -p {threads}", cpu("pzstd_c") / gib, None, cpu("pzstd_d") / gib, None)
cpu_row(f"zstd -1 -T{threads} / zstd -d", cpu("zstd_c") / gib, None, cpu("zstd_d") / gib, None)
cpu_row("lz4 -1", cpu("lz4_c") / gib, None, cpu("lz4_d") / gib, None)
print("(less DMA: without the simulated rings' copies, which SDMA does without the CPU; per core: 1 / the CPU per GiB,"
      " less DMA for vramflow; peers: whole processes reading raw.bin from /dev/shm, zstd -d and lz4 -d to /dev/null)")
stages = best["dump_cpu"]["serial_stages"] + best["restore_cpu"]["serial_stages"]
print("serial stages (CPU s per GiB -> the bound each puts on any number of cores): " +
      ", ".join(f"{s['stage']} {s['cpu_s_per_gib']:.4f} -> {s['bound_gbps']:.1f} GB/s" for s in stages))
for g in ("dump", "restore"):
    b = best[f"{g}_cpu"]["bounds_on_cores"]
    print(f"  {g} bound on " + ", ".join(f"{c} cores {b[c]['gbps']:.1f} GB/s ({b[c]['limited_by']})" for c in b))
zc = next(r for r in cpu_rows if r["tool"].startswith("zstd"))
ours_cpu = cpu_rows[0]
# Issue 54: CPU per GiB (the pipeline's less the simulated DMA) against zstd's, as how many times
# less CPU ours takes; the bounds on 16 cores over 10 GB/s.
targets["dump CPU/GiB <= zstd -1's / 2.5"] = zc["dump_cpu_s_per_gib"] / ours_cpu["dump_cpu_s_per_gib_without_dma"]
targets["dump ratio better than zstd -1's"] = zd["ratio"] < rows[0]["ratio"]
targets["restore CPU/GiB <= zstd -d's"] = zc["restore_cpu_s_per_gib"] / ours_cpu["restore_cpu_s_per_gib_without_dma"]
for g in ("dump", "restore"):
    targets[f"{g} bound >= 10 GB/s on 16 cores"] = best[f"{g}_cpu"]["bounds_on_cores"]["16"]["gbps"] / 10
    thresholds[f"{g} bound >= 10 GB/s on 16 cores"] = 1.0
thresholds["dump CPU/GiB <= zstd -1's / 2.5"] = 2.5
thresholds["restore CPU/GiB <= zstd -d's"] = 1.0

print("\ntargets:")
for k, v in targets.items():
    need = f"  (needs >= {thresholds[k]:g}: {'holds' if v >= thresholds[k] else 'misses'})" if k in thresholds else ""
    print(f"  {k:40} {v:.2f}{need}" if isinstance(v, float) else f"  {k:40} {v}")
sc = ours.get("scaling")
if sc:  # what the measured CPU use leaves room for (vramflow bench pipeline's CPU table)
    print(f"  (room the measured CPU use leaves on {sc['usable_cpus']} CPUs, approximately: dump x{sc['dump_cpu_estimate']:.2f},"
          f" restore x{sc['restore_cpu_estimate']:.2f}; with hardware DMA, whose copies cost no CPU:"
          f" dump x{sc['dump_cpu_estimate_without_dma']:.2f}, restore x{sc['restore_cpu_estimate_without_dma']:.2f})")
dma = json.loads(dma) if dma != "null" else None
if dma and dma.get("scaling"):
    print(f"  (with the simulated rings on CPU {','.join(map(str, dma['dma_cpus']))} only, as SDMA costs no CPU:"
          f" dump scaling x{dma['scaling']['dump']:.2f}, restore scaling x{dma['scaling']['restore']:.2f})")
if dma and dma.get("runs"):
    # The same targets for that run, against the same peers' figures: what
    # hardware DMA, whose copies cost the host no CPU, would leave.
    dma_best = max(dma["runs"], key=lambda r: r["threads"])
    dma_dump = raw / dma_best["dump_seconds"] / 1e9
    dma_restore = raw / dma_best["restore_seconds"] / 1e9
    targets["dump >= 3x pzstd -1, rings off these CPUs"] = dma_dump / pz["compress_gbps"]
    targets["restore >= 4x zstd -d, rings off these CPUs"] = dma_restore / zd["decompress_gbps"]
    thresholds["dump >= 3x pzstd -1, rings off these CPUs"] = 3.0
    thresholds["restore >= 4x zstd -d, rings off these CPUs"] = 4.0
    print(f"  with the rings on CPU {','.join(map(str, dma['dma_cpus']))} only: dump {dma_dump:.2f} GB/s,"
          f" x{targets['dump >= 3x pzstd -1, rings off these CPUs']:.2f} pzstd -1; restore {dma_restore:.2f} GB/s,"
          f" x{targets['restore >= 4x zstd -d, rings off these CPUs']:.2f} zstd -d")
result = {"raw_bytes": raw, "threads": threads, "rows": rows, "cpu_rows": cpu_rows, "targets": targets,
          "thresholds": thresholds,
          "pipeline": ours,
          "pipeline_dma_cpus": dma, "big": json.loads(big) if big != "null" else None}
json.dump(result, open("bench/results/compare.json", "w"), indent=2)
print("results: bench/results/compare.json")
PY
