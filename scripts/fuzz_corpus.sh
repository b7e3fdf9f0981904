#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Writes a seed corpus for tests/fuzz/stream_reader_fuzz: small valid streams
# made by `vramflow gen` + `vramflow pack`, covering every codec, both
# byte-grouping transforms, zero runs, several objects, an object of unknown
# size (stdin), an empty object, nested names and a legacy amdgpu-pages image.
# Every stream uses 4K chunks and stays well under the fuzzer's -max_len.
#
# With a third argument, the fuzz target itself adds the streams the CLI
# cannot make (DEDUP_REF frames, interleaved objects, base frames of a base
# that does not exist).
#
#   scripts/fuzz_corpus.sh VRAMFLOW_BINARY CORPUS_DIR [FUZZ_TARGET]
set -euo pipefail
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 VRAMFLOW_BINARY CORPUS_DIR [FUZZ_TARGET]" >&2; exit 2; }
[ -x "$1" ] || { echo "fuzz_corpus: '$1' is not an executable" >&2; exit 1; }
bin=$(realpath "$1")
fuzzer=""
if [ $# -eq 3 ]; then
  [ -x "$3" ] || { echo "fuzz_corpus: '$3' is not an executable" >&2; exit 1; }
  fuzzer=$(realpath "$3")
fi
mkdir -p "$2"
corpus=$(realpath "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/vramflow-corpus-XXXXXX")
trap 'rm -rf "$work"' EXIT

gen() { "$bin" gen --kind "$1" --size "$2" --seed "${3:-1}" -o "$work/$1.bin"; }
gen bf16 24K
gen fp16 12K 2
gen fp32 20K 3
gen adam-m 8K 4
gen adam-v 8K 5
gen zeros 12K
gen random 6K 6
gen fp8 12K 7
# Zeros in the middle of data: a zero run between DATA frames.
cat "$work/bf16.bin" "$work/zeros.bin" "$work/random.bin" > "$work/mixed.bin"
# Text: compressible by every codec (model-like data often is not, for lz4).
seq 1 2500 > "$work/text.bin"
# A tail that is not a whole word or chunk.
head -c 9001 "$work/fp32.bin" > "$work/odd.bin"

pack() {  # pack NAME [pack args...]
  local name="$1"
  shift
  "$bin" pack -q --force --chunk-size 4K -o "$corpus/$name.vfs" "$@"
}
cd "$work"
for codec in auto raw lz4 zstd zstd:-5 zstd:9 huffman auto:3; do
  pack "codec-${codec/:/_}" --codec "$codec" bf16.bin text.bin mixed.bin
done
pack bg2-zstd --codec zstd --transform bytegroup2 bf16.bin fp16.bin odd.bin
pack bg4-lz4 --codec lz4 --transform bytegroup4 fp32.bin odd.bin text.bin
pack bg4-huffman --codec huffman --transform bytegroup4 fp32.bin adam-v.bin
pack bg2-raw --codec raw --transform bytegroup2 fp16.bin
pack signplanes-auto fp8.bin
pack signplanes-lz4 --codec lz4 --transform fp8 fp8.bin
pack auto-all --codec auto adam-m.bin adam-v.bin zeros.bin random.bin odd.bin text.bin
pack single-zeros zeros.bin
pack single-random --codec auto random.bin
# DIGEST_BLOCKs in a stream that needs no base: checked by every reader, decoding ahead too.
pack digests --digests bf16.bin mixed.bin odd.bin
"$bin" pack -q --force --chunk-size 4K --name 'weights/layer.0/bf16' -o "$corpus/stdin.vfs" - < bf16.bin
"$bin" pack -q --force --chunk-size 4K --name empty -o "$corpus/empty-object.vfs" - < /dev/null
mkdir -p legacy
# Legacy CRIU image: 8-byte little-endian content size, then the content.
le64() { local i; for i in 0 1 2 3 4 5 6 7; do printf "\\$(printf '%03o' $((($1 >> (8 * i)) & 255)))"; done; }
{ le64 "$(stat -c %s fp16.bin)"; cat fp16.bin; } > legacy/amdgpu-pages-1-0001.img
pack legacy legacy/amdgpu-pages-1-0001.img random.bin
# An incremental stream and its base (BASE, BASE_REF, BASE_DELTA, DIGEST_BLOCK frames): the
# base's bf16.bin again, fp32.bin with a few bytes changed.
mkdir -p inc
cp bf16.bin fp32.bin inc/
(cd inc && pack incremental-base bf16.bin fp32.bin)
printf 'changed' | dd of=inc/fp32.bin bs=1 seek=5000 conv=notrunc status=none
(cd inc && pack incremental --base "$corpus/incremental-base.vfs" bf16.bin fp32.bin)
# A truncated stream and one with a flipped payload byte: seeds for the error paths.
head -c 3000 "$corpus/codec-auto.vfs" > "$corpus/truncated.vfs"
cp "$corpus/codec-raw.vfs" "$corpus/flipped.vfs"
printf '\x55' | dd of="$corpus/flipped.vfs" bs=1 seek=500 conv=notrunc status=none

if [ -n "$fuzzer" ]; then
  VRAMFLOW_FUZZ_WRITE_SEEDS="$corpus" "$fuzzer" || { echo "fuzz_corpus: $fuzzer could not write its seeds" >&2; exit 1; }
fi

for f in "$corpus"/*.vfs; do
  case "$f" in
    */truncated.vfs|*/flipped.vfs) continue ;;
    # The fuzz target's own incremental seed names a base that does not exist: read it without.
    */incremental-frames.vfs) "$bin" inspect "$f" >/dev/null || { echo "fuzz_corpus: $f cannot be read" >&2; exit 1; }
      continue ;;
  esac
  "$bin" verify -q "$f" || { echo "fuzz_corpus: $f does not verify" >&2; exit 1; }
done
echo "fuzz_corpus: $(ls "$corpus" | wc -l) seeds in $corpus ($(du -sh "$corpus" | cut -f1))"
