// SPDX-License-Identifier: MIT
#include "streamer/format/base_frame.h"

#include "common/hash.h"

namespace vramflow {

uint64_t BaseFrameBufferBytes(uint64_t raw_size, uint32_t chain_streams) {
  return raw_size + ChunkDecoder::MemoryBytes(raw_size) +
         2 * uint64_t{chain_streams} * (raw_size + kFrameHeaderSize + kBaseChunkRefSize);
}

Status ResolveBaseFrame(const BaseStream& base, FrameKind kind, CodecId codec, TransformId transform, uint64_t raw_hash,
                        std::span<const uint8_t> payload, const BaseChunkRef& ref, ChunkDecoder& decoder,
                        BaseFrameBuffers& buffers, std::span<uint8_t> out) {
  if (kind == FrameKind::kBaseRef) {
    VF_RETURN_IF_ERROR(base.ReadChunk(ref.base_object_id, ref.base_offset, out, buffers.scratch, &ref.base_sha256));
  } else {  // the delta decoded into place, then XORed with the base's bytes
    if (payload.size() < kBaseChunkRefSize)
      return Status::Corruption("a BASE_DELTA payload without its chunk reference");
    VF_RETURN_IF_ERROR(decoder.Decode(codec, transform, payload.subspan(kBaseChunkRefSize), out));
    buffers.base_bytes.resize(out.size());
    VF_RETURN_IF_ERROR(
        base.ReadChunk(ref.base_object_id, ref.base_offset, buffers.base_bytes, buffers.scratch, &ref.base_sha256));
    for (size_t i = 0; i < out.size(); ++i) out[i] ^= buffers.base_bytes[i];
  }
  const uint64_t got = Hash64(out.data(), out.size());
  if (got != raw_hash)
    return Status::Corruption(std::string("payload hash mismatch: the bytes ") +
                              (kind == FrameKind::kBaseRef ? "taken from" : "coded against") + " the base hash to " +
                              HexHash(got) + ", frame says " + HexHash(raw_hash));
  return Status::Ok();
}

}  // namespace vramflow
