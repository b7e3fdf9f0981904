// SPDX-License-Identifier: MIT
// BlockCompressor / BlockDecompressor: one lz4 or zstd block in, one out.
//
// Each owns its zstd context so repeated calls allocate nothing; use one per
// thread. Raw is handled by callers (it is a copy, or no copy at all).
#pragma once

#include <cstddef>

#include <zstd.h>
#include <cstdint>
#include <span>

#include "codecs/codec_ids.h"
#include "codecs/huffman.h"
#include "common/status.h"

namespace vramflow {

class BlockCompressor {
 public:
  BlockCompressor();
  ~BlockCompressor();
  BlockCompressor(const BlockCompressor&) = delete;
  BlockCompressor& operator=(const BlockCompressor&) = delete;

  // Worst-case output size of Compress() for `size` input bytes, any codec.
  static size_t Bound(size_t size);
  // Compresses `src` with `codec` (kLz4, kZstd or kHuffman; `level` is zstd's level,
  // negative levels allowed) into `dst`, returning the compressed size.
  Result<size_t> Compress(CodecId codec, int level, std::span<const uint8_t> src, std::span<uint8_t> dst);

 private:
  ZSTD_CCtx* zstd_ = nullptr;
  int zstd_level_ = 0;      // level last set on zstd_, 0 = not yet set
  HuffmanEncoder huffman_;  // keeps its pair table from plane to plane
};

class BlockDecompressor {
 public:
  BlockDecompressor();
  ~BlockDecompressor();
  BlockDecompressor(const BlockDecompressor&) = delete;
  BlockDecompressor& operator=(const BlockDecompressor&) = delete;

  // Decodes `src` into exactly dst.size() bytes; anything else (short output,
  // trailing input, malformed block) is a corruption error.
  Status Decompress(CodecId codec, std::span<const uint8_t> src, std::span<uint8_t> dst);

 private:
  ZSTD_DCtx* zstd_ = nullptr;
  HuffmanDecoder huffman_;  // keeps its table from plane to plane
};

// Memory a BlockCompressor / BlockDecompressor holds after working on blocks
// of up to `block_size` bytes (zstd contexts, the Huffman tables), for
// memory budgets.
size_t CompressorStateBytes(int zstd_level, size_t block_size);
size_t DecompressorStateBytes();

// zstd's supported level range (negative levels are the fast ones).
int MinZstdLevel();
int MaxZstdLevel();

}  // namespace vramflow
