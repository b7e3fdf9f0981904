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
  kPlanar = 16,  // byte-grouped payload: plane table, then one payload per plane
};

// Word size of the byte-grouping transform; the value is the word size.
enum class TransformId : uint8_t {
  kNone = 0,
  kByteGroup2 = 2,  // bf16 / fp16: planes of low and high bytes
  kByteGroup4 = 4,  // fp32: four planes, one per byte position
};

bool IsKnownCodec(uint8_t id);
bool IsPlaneCodec(uint8_t id);  // a codec allowed inside a planar payload
bool IsKnownTransform(uint8_t id);
std::string CodecName(CodecId id);
std::string TransformName(TransformId id);
inline unsigned WordSize(TransformId t) { return t == TransformId::kNone ? 1u : static_cast<unsigned>(t); }

}  // namespace vramflow
