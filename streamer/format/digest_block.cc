// SPDX-License-Identifier: MIT
#include "streamer/format/digest_block.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/hash.h"

namespace vramflow {

uint64_t DigestBlockReadBytes(uint64_t block_end, uint32_t chunk_count, uint64_t limit) {
  if (block_end >= limit) return 0;
  return std::min<uint64_t>(kFrameHeaderSize + uint64_t{chunk_count} * kDigestEntrySize, limit - block_end);
}

Result<bool> TakeDigestBlock(std::span<const uint8_t> after, const FrameHeader& block,
                             std::span<const SeekIndexChunk> records, const std::string& where,
                             std::vector<Sha256Digest>* digests) {
  FrameHeader dh;
  if (after.size() < kFrameHeaderSize || !DecodeFrameHeader(after.data(), &dh).ok() ||
      dh.kind != static_cast<uint8_t>(FrameKind::kDigestBlock))
    return false;
  const uint64_t entries_bytes = uint64_t{records.size()} * kDigestEntrySize;
  if (dh.flags != kFlagSkippable || dh.object_id != block.object_id || dh.payload_size != entries_bytes ||
      dh.codec != 0 || dh.transform != 0 || dh.offset != 0 || dh.raw_size != 0 || dh.sequence != block.sequence + 1 ||
      after.size() != kFrameHeaderSize + entries_bytes)
    return Status::Corruption(where + ": the DIGEST_BLOCK after the INDEX_BLOCK of object " +
                              std::to_string(block.object_id) + " does not match it (it must be skippable, of the " +
                              "same object, the next frame, with 32 bytes for each of its " +
                              std::to_string(records.size()) + " records)");
  const uint8_t* entries = after.data() + kFrameHeaderSize;
  if (Hash64(entries, entries_bytes) != dh.raw_hash)
    return Status::Corruption(where + ": DIGEST_BLOCK payload hash mismatch");
  for (size_t i = 0; i < records.size(); ++i) {
    Sha256Digest d;
    std::copy(entries + i * kDigestEntrySize, entries + (i + 1) * kDigestEntrySize, d.begin());
    if (records[i].kind == FrameKind::kZeroRun && d != Sha256Digest{})
      return Status::Corruption(where + ": DIGEST_BLOCK entry " + std::to_string(i) +
                                " is for a ZERO_RUN and must be zero");
    digests->push_back(d);
  }
  return true;
}

Status UncoveredDigests::Check(uint32_t object_id, std::span<const SeekIndexChunk> records,
                               std::span<const uint8_t> stored) {
  for (size_t i = 0; i < records.size(); ++i) {
    const SeekIndexChunk& r = records[i];
    if (r.kind == FrameKind::kZeroRun || r.kind == FrameKind::kDedupRef) continue;
    auto it = digests_.find({object_id, r.object_offset});
    if (it == digests_.end()) return Status::Internal("no digest kept for a chunk a DIGEST_BLOCK lists");
    const bool same = std::memcmp(it->second.data(), stored.data() + i * kDigestEntrySize, kDigestEntrySize) == 0;
    digests_.erase(it);
    if (!same)
      return Status::Corruption("DIGEST_BLOCK entry " + std::to_string(i) + " (object offset " +
                                std::to_string(r.object_offset) + ") does not match the SHA-256 of the chunk's bytes");
  }
  return Status::Ok();
}

}  // namespace vramflow
