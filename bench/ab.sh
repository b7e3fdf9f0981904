#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two vramflow builds side by side on the generator's model-like data: pack
# (file to file in /dev/shm) and unpack (`-o - > /dev/null`) with -j 1 and
# -j 2, the two builds' runs interleaved so that a load that comes and goes
# on a shared machine hits both alike. Prints, per data kind and command,
# the median wall time and the median CPU time (user + system) of each
# build, and new/old. Checks that both builds' streams decode to the input.
# Benchmarks only; CI never runs this.
#
#   bench/ab.sh OLD_BIN NEW_BIN [SIZE] [KINDS]    SIZE default 64M, KINDS default fp32,bf16,fp16,adam-v
#   REPEAT=7 bench/ab.sh ...                      runs per build and measurement (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
old="${1:?usage: bench/ab.sh OLD_BIN NEW_BIN [SIZE] [KINDS]}"
new="${2:?usage: bench/ab.sh OLD_BIN NEW_BIN [SIZE] [KINDS]}"
size="${3:-64M}"
kinds="${4:-fp32,bf16,fp16,adam-v}"
work=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/vramflow-ab-XXXXXX")
trap 'rm -rf "$work"' EXIT
for kind in ${kinds//,/ }; do "$new" gen -k "$kind" -s "$size" -o "$work/$kind.bin" -f; done
REPEAT="${REPEAT:-5}" /usr/bin/python3 - "$old" "$new" "$work" "$kinds" <<'PY'
import os, statistics, subprocess, sys, time
old, new, work, kinds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
repeat = int(os.environ["REPEAT"])

def run(argv, stdout=subprocess.DEVNULL):
    """Wall seconds and CPU seconds (user + system) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"ab: {' '.join(argv)} failed with status {status}")
    return wall, usage.ru_utime + usage.ru_stime

print(f"{'data':7} {'command':10} {'old wall':>9} {'new wall':>9} {'new/old':>8}   {'old cpu':>8} {'new cpu':>8} {'new/old':>8}   ratio old/new")
for kind in kinds:
    src = f"{work}/{kind}.bin"
    size = os.path.getsize(src)
    ratios = {}
    for j in (1, 2):
        times = {(b, c): ([], []) for b in ("old", "new") for c in ("pack", "unpack")}
        for _ in range(repeat):
            for name, binary in (("old", old), ("new", new)):
                stream = f"{work}/{kind}.{name}.vfs"
                w, c = run([binary, "pack", src, "-o", stream, "-f", "-q", "-j", str(j)])
                times[(name, "pack")][0].append(w), times[(name, "pack")][1].append(c)
                w, c = run([binary, "unpack", stream, "-o", "-", "-q", "-j", str(j)])
                times[(name, "unpack")][0].append(w), times[(name, "unpack")][1].append(c)
                ratios[name] = size / os.path.getsize(stream)
        for name, binary in (("old", old), ("new", new)):
            with open(f"{work}/{kind}.back", "wb") as back:
                subprocess.run([binary, "unpack", f"{work}/{kind}.{name}.vfs", "-o", "-", "-q"], stdout=back, check=True)
            if open(f"{work}/{kind}.back", "rb").read() != open(src, "rb").read():
                sys.exit(f"ab: {name} build's stream of {kind} does not decode to its input")
        for command in ("pack", "unpack"):
            ow, oc = (statistics.median(v) for v in times[("old", command)])
            nw, nc = (statistics.median(v) for v in times[("new", command)])
            mb = size / 1e6
            print(f"{kind:7} {command + ' -j' + str(j):10} {mb / ow:6.0f} MB/s {mb / nw:6.0f} MB/s {nw / ow:8.3f}   "
                  f"{oc:7.3f}s {nc:7.3f}s {nc / oc:8.3f}   {ratios['old']:.4f}/{ratios['new']:.4f}")
PY
