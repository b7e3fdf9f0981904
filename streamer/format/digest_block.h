// SPDX-License-Identifier: MIT
// DIGEST_BLOCK (FORMAT.md 4.12): the SHA-256 of every chunk an INDEX_BLOCK
// lists, in the frame right after it. ReadSeekIndex, asked for digests,
// reads each block together with the bytes its DIGEST_BLOCK would take (one
// ranged read) and hands those bytes here to be checked. A reader that
// decodes the chunks in order checks each DIGEST_BLOCK against their bytes
// (UncoveredDigests).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/seek_index.h"

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

// The SHA-256 of the decoded chunks that no DIGEST_BLOCK has covered yet,
// by object and offset, for checking each DIGEST_BLOCK against the bytes
// read (ReadStream, the decode-ahead reader). The chunks an INDEX_BLOCK
// lists are noted before its DIGEST_BLOCK comes, and dropped as it is
// checked: at most a block's worth per object is held.
class UncoveredDigests {
 public:
  void Note(uint32_t object_id, uint64_t offset, const Sha256Digest& sha256) { digests_[{object_id, offset}] = sha256; }
  void Clear() { digests_.clear(); }
  // Checks the DIGEST_BLOCK payload `stored` of object `object_id`, whose
  // entries pair with `records` (the INDEX_BLOCK's, StreamValidator::
  // digest_records), against the digests noted: Corruption naming the first
  // entry that differs. ZERO_RUN and DEDUP_REF entries are the validator's.
  Status Check(uint32_t object_id, std::span<const SeekIndexChunk> records, std::span<const uint8_t> stored);

 private:
  std::map<std::pair<uint32_t, uint64_t>, Sha256Digest> digests_;
};

}  // namespace vramflow
