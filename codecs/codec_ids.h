// SPDX-License-Identifier: MIT
// Codec and transform identifiers as they appear on the wire.
//
// DO NOT CHANGE THESE VALUES: they are recorded in every frame of every
// stream ever written (see docs/FORMAT.md, "Codecs").
#pragma once

#include <cstdint>
#include <string>

namespace vramflow {

enum class CodecId : uint8_t {
  kRaw = 0,      // payload is the raw bytes
  kLz4 = 1,      // one LZ4 block (LZ4_compress_default format)
  kZstd = 2,     // one zstd frame
  kHuffman = 3,  // order-0 canonical Huffman, four streams (codecs/huffman.h)
  kBitPack = 4,  // bits constant across the block dropped, the rest at fixed width (codecs/bit_pack.h)
  kPlanar = 16,  // byte-grouped payload: plane table, then one payload per plane
};

// How a planar payload's planes are made from the chunk's words.
// 2 and 4: byte grouping; the value is the word size.
// 0x10: sign planes for 1-byte floats (fp8): the top bit of every byte
// leaves the other seven (docs/FORMAT.md, section 8.5).
// 0x21..0x27 and 0x41..0x47: bit planes for floats. The high nibble is the
// word size (2 or 4) and the low three bits a rotation r (1..7): the 16 bits
// that hold sign and exponent (the whole word for bf16/fp16, the upper half
// for fp32) are rotated left by r before byte grouping, so that the sign bit
// leaves the exponent's byte and the exponent shares a byte only with its
// neighbouring mantissa bits (docs/FORMAT.md, section 8.3).
// 0x28..0x2f and 0x48..0x4f: sparse words. Bit 3 set, the low three bits a
// rotation r (0..7, 0 = plain byte grouping): the words that are all zero
// (unused embedding rows, their gradients and Adam moments) are left out and
// marked in a bitmap plane; the others are grouped as the transform without
// bit 3 groups them (docs/FORMAT.md, section 8.6).
enum class TransformId : uint8_t {
  kNone = 0,
  kByteGroup2 = 2,       // bf16 / fp16: planes of low and high bytes
  kByteGroup4 = 4,       // fp32: four planes, one per byte position
  kSignPlanes1 = 0x10,   // fp8: plane 0 the low seven bits of each byte, plane 1 its top (sign) bit, 0 or 1
  kBitPlanes2R1 = 0x21,  // 2-byte words rotated left by 1 (bf16: exponent byte, sign+mantissa byte) ... R7 = 0x27
  kBitPlanes4R1 = 0x41,  // 4-byte words, upper half rotated left by 1 (fp32: exponent byte) ... R7 = 0x47
  kSparse2 = 0x28,       // 2-byte words, zero words left out, the others byte-grouped ... rotated by 7: 0x2f
  kSparse4 = 0x48,       // 4-byte words, zero words left out, the others byte-grouped ... rotated by 7: 0x4f
};

inline constexpr unsigned kSparseBit = 0x08;

// The bit-plane transform for `word` (2 or 4) and rotation r (1..7).
inline TransformId BitPlanesTransform(unsigned word, unsigned rotation) {
  return static_cast<TransformId>(word << 4 | rotation);
}

// The sparse-words transform for `word` (2 or 4) whose non-zero words are
// grouped with rotation r (0..7).
inline TransformId SparseTransform(unsigned word, unsigned rotation) {
  return static_cast<TransformId>(word << 4 | kSparseBit | rotation);
}

bool IsKnownCodec(uint8_t id);
bool IsPlaneCodec(uint8_t id);  // a codec allowed inside a planar payload
bool IsKnownTransform(uint8_t id);
std::string CodecName(CodecId id);
std::string TransformName(TransformId id);
// Word size of a known transform: 1 for none and sign planes, else 2 or 4.
unsigned WordSize(TransformId t);
// Planes of a planar payload with transform t, each of raw_size / WordSize(t)
// bytes: the word size for byte grouping and bit planes, 2 for sign planes,
// 1 for none (no planar payload). Sparse words: the bitmap plane and one
// plane per byte of a word, w + 1.
unsigned PlaneCount(TransformId t);
// Rotation of a bit-plane or sparse transform (0..7); 0 for the others.
unsigned RotationBits(TransformId t);
// Whether t is a sparse-words transform (0x28..0x2f, 0x48..0x4f).
bool IsSparse(TransformId t);
// The transform that groups a sparse transform's non-zero words (byte
// grouping or bit planes of the same word and rotation); t itself otherwise.
TransformId DenseTransform(TransformId t);

}  // namespace vramflow
