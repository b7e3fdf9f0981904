// SPDX-License-Identifier: MIT
// DIGEST_BLOCK (FORMAT.md 4.12): the SHA-256 of every chunk an INDEX_BLOCK
// lists, in the frame right after it. ReadSeekIndex, asked for digests,
// reads each block together with the bytes its DIGEST_BLOCK would take (one
// ranged read) and hands those bytes here to be checked.
#pragma once

#include <span>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "streamer/frame_format.h"
#include "streamer/seek_index.h"

namespace vramflow {

// The bytes a reader fetches after an INDEX_BLOCK of `chunk_count` records
// that ends at `block_end`, to find its DIGEST_BLOCK too: a frame header and
// 32 bytes per record, cut at `limit` (the SEEK_INDEX's offset).
uint64_t DigestBlockReadBytes(uint64_t block_end, uint32_t chunk_count, uint64_t limit);

// Looks for the DIGEST_BLOCK of an INDEX_BLOCK (header `block`, decoded
// records `records`) in `after`, the bytes that follow the block. Returns
// false if they do not start with a DIGEST_BLOCK frame; true, with one
// digest per record appended to `digests`, if they hold a valid one: right
// after its block (next sequence), of the same object, skippable, 32 bytes
// per record, its raw_hash right, zeros for a ZERO_RUN. A DIGEST_BLOCK that
// breaks a rule is Corruption; `where` names the place for errors.
Result<bool> TakeDigestBlock(std::span<const uint8_t> after, const FrameHeader& block,
                             std::span<const SeekIndexChunk> records, const std::string& where,
                             std::vector<Sha256Digest>* digests);

}  // namespace vramflow
