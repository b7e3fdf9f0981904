// SPDX-License-Identifier: MIT
// The bytes a BASE_REF or BASE_DELTA frame stands for (docs/FORMAT.md 4.10,
// 4.11): the base's chunk as it is, or XORed with the delta the frame's
// payload codes, checked against the frame's raw_hash. Every reader that
// decodes incremental streams resolves them here: ReadStream, the restore
// graph's decode stage and the decode-ahead reader's threads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/status.h"
#include "streamer/format/base_stream.h"
#include "streamer/format/frame_format.h"

namespace vramflow {

// One thread's buffers for ResolveBaseFrame (not thread-safe, hence one per
// thread): the base reader's scratch and, for a delta, the base's chunk.
struct BaseFrameBuffers {
  BaseScratch scratch;
  std::vector<uint8_t> base_bytes;
};

// What ResolveBaseFrame holds for a chunk of `raw_size` bytes beyond `out`:
// the base's chunk, and a frame and its decoded bytes per stream of the
// base's chain (BaseStream::ReadChunk's scratch; `chain_streams` is its
// DescriptorForDependent().chain_length, at most kMaxBaseChain), with that
// scratch's decoder.
uint64_t BaseFrameBufferBytes(uint64_t raw_size, uint32_t chain_streams = kMaxBaseChain);

// Writes the chunk that a BASE_REF (`kind`) or BASE_DELTA frame with this
// codec, transform and raw_hash stands for into `out` (its raw size):
// `payload` is the frame's payload (BaseChunkRef, then for a delta the coded
// XOR bytes), `ref` the BaseChunkRef decoded from it. `decoder` decodes the
// delta. Thread-safe as BaseStream::ReadChunk is, given buffers and a decoder
// per thread. A hash mismatch is Corruption saying whether the bytes were
// taken from the base or coded against it.
Status ResolveBaseFrame(const BaseStream& base, FrameKind kind, CodecId codec, TransformId transform, uint64_t raw_hash,
                        std::span<const uint8_t> payload, const BaseChunkRef& ref, ChunkDecoder& decoder,
                        BaseFrameBuffers& buffers, std::span<uint8_t> out);

}  // namespace vramflow
