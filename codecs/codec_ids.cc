#include "codecs/codec_ids.h"

namespace vramflow {

bool IsKnownCodec(uint8_t id) {
  return id == static_cast<uint8_t>(CodecId::kRaw) || id == static_cast<uint8_t>(CodecId::kLz4) ||
         id == static_cast<uint8_t>(CodecId::kZstd) || id == static_cast<uint8_t>(CodecId::kHuffman) ||
         id == static_cast<uint8_t>(CodecId::kPlanar);
}

bool IsPlaneCodec(uint8_t id) { return IsKnownCodec(id) && id != static_cast<uint8_t>(CodecId::kPlanar); }

bool IsKnownTransform(uint8_t id) {
  return id == static_cast<uint8_t>(TransformId::kNone) || id == static_cast<uint8_t>(TransformId::kByteGroup2) ||
         id == static_cast<uint8_t>(TransformId::kByteGroup4);
}

std::string CodecName(CodecId id) {
  switch (id) {
    case CodecId::kRaw: return "raw";
    case CodecId::kLz4: return "lz4";
    case CodecId::kZstd: return "zstd";
    case CodecId::kHuffman: return "huffman";
    case CodecId::kPlanar: return "planar";
  }
  return "codec#" + std::to_string(static_cast<int>(id));
}

std::string TransformName(TransformId id) {
  switch (id) {
    case TransformId::kNone: return "none";
    case TransformId::kByteGroup2: return "bytegroup2";
    case TransformId::kByteGroup4: return "bytegroup4";
  }
  return "transform#" + std::to_string(static_cast<int>(id));
}

}  // namespace vramflow
