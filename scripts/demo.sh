#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The engine demo: model-like data through pack -> inspect -> verify ->
# unpack, checked byte for byte. (The simulated-GPU `vramflow demo` with the
# parallel pipeline arrives with the pipeline work; this exercises the
# format and codecs it is built on.)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/vramflow
[ -x "$bin" ] || { echo "demo: build first (scripts/build.sh)" >&2; exit 1; }
size="${1:-64M}"
work=$(mktemp -d "${TMPDIR:-/tmp}/vramflow-demo-XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== generating model-like data, $size per kind, in $work"
for kind in bf16 fp16 fp32 adam-m adam-v zeros random; do
  "$bin" gen --kind "$kind" --size "$size" -o "$work/$kind.bin"
done
echo "== pack (codec auto)"
"$bin" pack "$work"/*.bin -o "$work/checkpoint.vfs"
echo "== inspect"
"$bin" inspect "$work/checkpoint.vfs"
echo "== verify"
"$bin" verify "$work/checkpoint.vfs"
echo "== unpack and compare"
"$bin" unpack -q "$work/checkpoint.vfs" -o "$work/restored/"
for f in "$work"/*.bin; do
  cmp "$f" "$work/restored/$(basename "$f")"
done
echo "all $(ls "$work"/*.bin | wc -l) objects restored byte for byte"
