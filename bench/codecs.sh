#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Single-core codec benchmark: vramflow's codecs beside zstd -1, zstd --fast=1
# and lz4 -1 (the command-line tools' in-memory benchmarks, same bytes, same
# run). Prints the table and writes bench/results/codecs.json.
#   bench/codecs.sh [SIZE]      SIZE per data kind, default 64M
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/vramflow ] || ./scripts/build.sh
mkdir -p bench/results
build/vramflow bench codecs --size "${1:-64M}" --json bench/results/codecs.json
echo "results: bench/results/codecs.json"
