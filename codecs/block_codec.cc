// SPDX-License-Identifier: MIT
#define ZSTD_STATIC_LINKING_ONLY  // context size estimates
#include "codecs/block_codec.h"

#include <lz4.h>

#include "codecs/bit_pack.h"
#include "codecs/huffman.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>

namespace vramflow {

BlockCompressor::BlockCompressor() : zstd_(ZSTD_createCCtx()) {
  if (!zstd_) throw std::bad_alloc();
}
BlockCompressor::~BlockCompressor() { ZSTD_freeCCtx(zstd_); }

size_t BlockCompressor::Bound(size_t size) {
  size_t lz4 = size <= static_cast<size_t>(LZ4_MAX_INPUT_SIZE)
                   ? static_cast<size_t>(LZ4_compressBound(static_cast<int>(size)))
                   : 0;
  return std::max({lz4, ZSTD_compressBound(size), HuffmanBound(size), BitPackBound(size)}) + 64;
}

Result<size_t> BlockCompressor::Compress(CodecId codec, int level, std::span<const uint8_t> src,
                                         std::span<uint8_t> dst) {
  switch (codec) {
    case CodecId::kLz4: {
      if (src.size() > static_cast<size_t>(LZ4_MAX_INPUT_SIZE))
        return Status::InvalidArgument("lz4 block of " + std::to_string(src.size()) + " bytes is too large");
      int cap = static_cast<int>(std::min(dst.size(), static_cast<size_t>(INT_MAX)));
      int n = LZ4_compress_default(reinterpret_cast<const char*>(src.data()), reinterpret_cast<char*>(dst.data()),
                                   static_cast<int>(src.size()), cap);
      if (n <= 0) return Status::Internal("lz4 compression failed (output buffer too small)");
      return static_cast<size_t>(n);
    }
    case CodecId::kZstd: {
      if (level == 0) level = ZSTD_CLEVEL_DEFAULT;
      if (level != zstd_level_) {
        size_t r = ZSTD_CCtx_setParameter(zstd_, ZSTD_c_compressionLevel, level);
        if (ZSTD_isError(r)) return Status::InvalidArgument(std::string("zstd level: ") + ZSTD_getErrorName(r));
        zstd_level_ = level;
      }
      size_t n = ZSTD_compress2(zstd_, dst.data(), dst.size(), src.data(), src.size());
      if (ZSTD_isError(n)) return Status::Internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
      return n;
    }
    case CodecId::kHuffman:
      return huffman_.Compress(src, dst);
    case CodecId::kBitPack:
      return BitPackCompress(src, dst);
    default:
      return Status::InvalidArgument("codec " + CodecName(codec) + " is not a block compressor");
  }
}

BlockDecompressor::BlockDecompressor() : zstd_(ZSTD_createDCtx()) {
  if (!zstd_) throw std::bad_alloc();
}
BlockDecompressor::~BlockDecompressor() { ZSTD_freeDCtx(zstd_); }

Status BlockDecompressor::Decompress(CodecId codec, std::span<const uint8_t> src, std::span<uint8_t> dst) {
  switch (codec) {
    case CodecId::kRaw:
      if (src.size() != dst.size())
        return Status::Corruption("raw payload is " + std::to_string(src.size()) + " bytes, expected " +
                                  std::to_string(dst.size()));
      if (!dst.empty()) std::memcpy(dst.data(), src.data(), dst.size());
      return Status::Ok();
    case CodecId::kLz4: {
      if (src.size() > static_cast<size_t>(INT_MAX) || dst.size() > static_cast<size_t>(INT_MAX))
        return Status::Corruption("lz4 block too large");
      int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src.data()), reinterpret_cast<char*>(dst.data()),
                                  static_cast<int>(src.size()), static_cast<int>(dst.size()));
      if (n < 0) return Status::Corruption("lz4 block is malformed");
      if (static_cast<size_t>(n) != dst.size())
        return Status::Corruption("lz4 block decodes to " + std::to_string(n) + " bytes, expected " +
                                  std::to_string(dst.size()));
      return Status::Ok();
    }
    case CodecId::kZstd: {
      // Exactly one frame: ZSTD_decompressDCtx would also accept several.
      size_t frame = ZSTD_findFrameCompressedSize(src.data(), src.size());
      if (ZSTD_isError(frame)) return Status::Corruption(std::string("zstd frame: ") + ZSTD_getErrorName(frame));
      if (frame != src.size())
        return Status::Corruption("zstd payload holds " + std::to_string(src.size() - frame) +
                                  " bytes after its frame");
      size_t n = ZSTD_decompressDCtx(zstd_, dst.data(), dst.size(), src.data(), src.size());
      if (ZSTD_isError(n)) return Status::Corruption(std::string("zstd frame: ") + ZSTD_getErrorName(n));
      if (n != dst.size())
        return Status::Corruption("zstd frame decodes to " + std::to_string(n) + " bytes, expected " +
                                  std::to_string(dst.size()));
      return Status::Ok();
    }
    case CodecId::kHuffman:
      return huffman_.Decompress(src, dst);
    case CodecId::kBitPack:
      return BitPackDecompress(src, dst);
    default:
      return Status::Corruption("codec " + CodecName(codec) + " cannot appear here");
  }
}

size_t CompressorStateBytes(int zstd_level, size_t block_size) {
  if (zstd_level == 0) zstd_level = ZSTD_CLEVEL_DEFAULT;
  return ZSTD_estimateCCtxSize_usingCParams(ZSTD_getCParams(zstd_level, block_size, 0)) + HuffmanEncoder::kMemoryBytes;
}

size_t DecompressorStateBytes() { return ZSTD_estimateDCtxSize() + HuffmanDecoder::kMemoryBytes; }

int MinZstdLevel() { return std::max(ZSTD_minCLevel(), -131072); }
int MaxZstdLevel() { return ZSTD_maxCLevel(); }

}  // namespace vramflow
