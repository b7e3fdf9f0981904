#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs bench/compare.sh several times and summarises each target over the
# runs: every value, the median, and in how many runs it was met. One run on
# a shared or virtual machine can land on either side of a threshold; this
# says how often it does.
#
#   bench/compare-runs.sh [RUNS] [SIZE_PER_GPU] [GPUS]    default 5, 512M, 2
#   (VRAMFLOW_BIN and DMA_CPUS are passed on to compare.sh)
#
# Writes bench/results/compare-N.json per run and bench/results/compare-runs.json.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
size="${2:-512M}"
gpus="${3:-2}"
mkdir -p bench/results
for i in $(seq 1 "$runs"); do
  echo "== run $i of $runs"
  bench/compare.sh "$size" "$gpus" | sed -n '/^targets:/,$p'
  cp bench/results/compare.json "bench/results/compare-$i.json"
done
python3 - "$runs" <<'PY'
import json, statistics, sys
runs = int(sys.argv[1])
results = [json.load(open(f"bench/results/compare-{i}.json")) for i in range(1, runs + 1)]
thresholds = results[0]["thresholds"]  # as bench/compare.sh names them
summary = {}
print(f"\nover {runs} runs of bench/compare.sh:")
print(f"  {'target':34} {'median':>7} {'met':>6}   values")
for name in results[0]["targets"]:
    values = [r["targets"][name] for r in results]
    if isinstance(values[0], bool):
        met = sum(values)
        print(f"  {name:34} {'':>7} {met:>3}/{runs}   {' '.join(str(v) for v in values)}")
        summary[name] = {"values": values, "met": met}
        continue
    median = statistics.median(values)
    line = f"  {name:34} {median:7.2f}"
    entry = {"values": values, "median": median}
    if name in thresholds:
        met = sum(v >= thresholds[name] for v in values)
        entry["met"] = met
        line += f" {met:>3}/{runs}"
    else:
        line += f" {'':>6}"
    print(line + "   " + " ".join(f"{v:.2f}" for v in values))
    summary[name] = entry
for key, label in (("pipeline_dma_cpus", "with the rings on CPUs of their own"),):
    scal = [r[key]["scaling"] for r in results if r.get(key) and r[key].get("scaling")]
    if scal:
        for what in ("dump", "restore"):
            values = [s[what] for s in scal]
            needed = thresholds[f"{what} scaling 1 -> N threads"]
            print(f"  {what + ' scaling, ' + label:34} {statistics.median(values):7.2f}"
                  f" {sum(v >= needed for v in values):>3}/{len(values)}   " + " ".join(f"{v:.2f}" for v in values))
            summary[f"{what} scaling, {label}"] = {"values": values, "median": statistics.median(values)}
json.dump({"runs": runs, "targets": summary}, open("bench/results/compare-runs.json", "w"), indent=2)
print("results: bench/results/compare-runs.json")
PY
