// SPDX-License-Identifier: MIT
#include "codecs/codec_ids.h"

namespace vramflow {

bool IsKnownCodec(uint8_t id) {
  return id == static_cast<uint8_t>(CodecId::kRaw) || id == static_cast<uint8_t>(CodecId::kLz4) ||
         id == static_cast<uint8_t>(CodecId::kZstd) || id == static_cast<uint8_t>(CodecId::kHuffman) ||
         id == static_cast<uint8_t>(CodecId::kBitPack) || id == static_cast<uint8_t>(CodecId::kPlanar);
}

bool IsPlaneCodec(uint8_t id) { return IsKnownCodec(id) && id != static_cast<uint8_t>(CodecId::kPlanar); }

bool IsKnownTransform(uint8_t id) {
  if (id == static_cast<uint8_t>(TransformId::kNone) || id == static_cast<uint8_t>(TransformId::kByteGroup2) ||
      id == static_cast<uint8_t>(TransformId::kByteGroup4) || id == static_cast<uint8_t>(TransformId::kSignPlanes1))
    return true;
  const unsigned word = id >> 4, rotation = id & 0x0f;
  if (rotation & kSparseBit) return word == 2 || word == 4;  // sparse words, rotation 0..7
  return (word == 2 || word == 4) && rotation >= 1 && rotation <= 7;
}

bool IsSparse(TransformId t) {
  const auto id = static_cast<unsigned>(t);
  return (id >> 4 == 2 || id >> 4 == 4) && (id & kSparseBit);
}

TransformId DenseTransform(TransformId t) {
  if (!IsSparse(t)) return t;
  const unsigned word = WordSize(t), r = RotationBits(t);
  return r == 0 ? static_cast<TransformId>(word) : BitPlanesTransform(word, r);
}

unsigned WordSize(TransformId t) {
  const auto id = static_cast<unsigned>(t);
  if (id == 0) return 1;
  return id < 0x10 ? id : id >> 4;
}

unsigned PlaneCount(TransformId t) {
  if (t == TransformId::kSignPlanes1) return 2;
  return IsSparse(t) ? WordSize(t) + 1 : WordSize(t);
}

unsigned RotationBits(TransformId t) {
  const auto id = static_cast<unsigned>(t);
  return id < 0x10 ? 0 : id & 0x07;
}

std::string CodecName(CodecId id) {
  switch (id) {
    case CodecId::kRaw:
      return "raw";
    case CodecId::kLz4:
      return "lz4";
    case CodecId::kZstd:
      return "zstd";
    case CodecId::kHuffman:
      return "huffman";
    case CodecId::kBitPack:
      return "bitpack";
    case CodecId::kPlanar:
      return "planar";
  }
  return "codec#" + std::to_string(static_cast<int>(id));
}

std::string TransformName(TransformId id) {
  switch (id) {
    case TransformId::kNone:
      return "none";
    case TransformId::kByteGroup2:
      return "bytegroup2";
    case TransformId::kByteGroup4:
      return "bytegroup4";
    case TransformId::kSignPlanes1:
      return "signplanes1";
    default:
      break;
  }
  if (IsKnownTransform(static_cast<uint8_t>(id)) && IsSparse(id))
    return "sparse" + std::to_string(WordSize(id)) + "r" + std::to_string(RotationBits(id));
  if (IsKnownTransform(static_cast<uint8_t>(id)))
    return "bitplanes" + std::to_string(WordSize(id)) + "r" + std::to_string(RotationBits(id));
  return "transform#" + std::to_string(static_cast<int>(id));
}

}  // namespace vramflow
