// SPDX-License-Identifier: MIT
#include "streamer/stream_id.h"

#include <algorithm>

#include "common/hash.h"
#include "common/printable.h"
#include "streamer/base_stream.h"

namespace vramflow {
namespace {

std::string Where(const RandomAccessSource& source, uint64_t offset) {
  return source.Describe() + ", stream offset " + std::to_string(offset);
}

}  // namespace

Result<StreamIdAndDigests> ReadStreamIdAndDigests(RandomAccessSource& source, const StoredStreamIndex& stored,
                                                  bool want_digests) {
  constexpr uint64_t kEndBytes = kFrameHeaderSize + kStreamEndPayloadSize;
  if (stored.stream_size != source.Size() || stored.stream_size < kStreamHeaderSize + kEndBytes)
    return Status::Corruption(source.Describe() + " changed size since its index was read");
  StreamIdAndDigests result;
  Sha256Hasher hasher;
  std::vector<uint8_t> buffer(kStreamHeaderSize);
  VF_RETURN_IF_ERROR(ReadExactly(source, 0, buffer));
  hasher.Update(buffer);

  const uint64_t end_offset = stored.stream_size - kEndBytes;
  const uint64_t index_payload = stored.index_offset + kFrameHeaderSize;
  if (index_payload > end_offset) return Status::Corruption(Where(source, stored.index_offset) + ": no SEEK_INDEX here");
  buffer.resize(end_offset - index_payload);
  VF_RETURN_IF_ERROR(ReadExactly(source, index_payload, buffer));
  hasher.Update(buffer);

  bool first_block = true;
  for (const SeekIndexObject& o : stored.index.objects) {
    std::vector<Sha256Digest>* digests = nullptr;
    if (want_digests) {
      result.digests.emplace_back(o.chunks.size());
      digests = &result.digests.back();
    }
    for (const IndexBlockRef& b : o.blocks) {
      // The block, and (when asked) the frame after it with room for its digests.
      const uint64_t block_end = b.stream_offset + b.frame_bytes();
      uint64_t want = b.frame_bytes();
      if (want_digests)
        want = std::min<uint64_t>(want + kFrameHeaderSize + uint64_t{b.chunk_count} * kDigestEntrySize,
                                  stored.index_offset - b.stream_offset);
      buffer.resize(want);
      VF_RETURN_IF_ERROR(ReadExactly(source, b.stream_offset, buffer));
      FrameHeader bh;
      VF_RETURN_IF_ERROR(DecodeFrameHeader(buffer.data(), &bh).WithContext(Where(source, b.stream_offset)));
      std::span<const uint8_t> records(buffer.data() + kFrameHeaderSize, b.frame_bytes() - kFrameHeaderSize);
      if (bh.kind != static_cast<uint8_t>(FrameKind::kIndexBlock) || bh.object_id != o.id ||
          bh.payload_size != records.size() || Hash64(records.data(), records.size()) != bh.raw_hash)
        return Status::Corruption(Where(source, b.stream_offset) + ": the INDEX_BLOCK changed since it was read");
      hasher.Update(records);
      if (!want_digests) continue;

      FrameHeader dh;
      const bool digest_follows = buffer.size() >= b.frame_bytes() + kFrameHeaderSize &&
                                  DecodeFrameHeader(buffer.data() + b.frame_bytes(), &dh).ok() &&
                                  dh.kind == static_cast<uint8_t>(FrameKind::kDigestBlock);
      if (first_block) {
        result.has_digests = digest_follows;
        first_block = false;
      } else if (digest_follows != result.has_digests) {
        return Status::Corruption(Where(source, block_end) + ": " +
                                  (digest_follows ? "a DIGEST_BLOCK follows this INDEX_BLOCK but not the first one"
                                                  : "no DIGEST_BLOCK follows the INDEX_BLOCK of object " +
                                                        std::to_string(o.id) + ", though the first one has one"));
      }
      if (!digest_follows) continue;
      const uint64_t entries_bytes = uint64_t{b.chunk_count} * kDigestEntrySize;
      if (dh.flags != kFlagSkippable || dh.object_id != o.id || dh.payload_size != entries_bytes || dh.codec != 0 ||
          dh.transform != 0 || dh.offset != 0 || dh.raw_size != 0 || dh.sequence != bh.sequence + 1 ||
          buffer.size() != b.frame_bytes() + kFrameHeaderSize + entries_bytes)
        return Status::Corruption(Where(source, block_end) + ": the DIGEST_BLOCK after the INDEX_BLOCK of object " +
                                  std::to_string(o.id) + " does not match it (it must be skippable, of the same "
                                  "object, the next frame, with 32 bytes for each of its " +
                                  std::to_string(b.chunk_count) + " records)");
      const uint8_t* entries = buffer.data() + b.frame_bytes() + kFrameHeaderSize;
      if (Hash64(entries, entries_bytes) != dh.raw_hash)
        return Status::Corruption(Where(source, block_end) + ": DIGEST_BLOCK payload hash mismatch");
      VF_ASSIGN_OR_RETURN(std::vector<SeekIndexChunk> listed, DecodeIndexBlock(records));
      for (size_t i = 0; i < listed.size(); ++i) {
        auto it = std::lower_bound(o.chunks.begin(), o.chunks.end(), listed[i].object_offset,
                                   [](const SeekIndexChunk& c, uint64_t offset) { return c.object_offset < offset; });
        if (it == o.chunks.end() || !(*it == listed[i]))
          return Status::Corruption(Where(source, b.stream_offset) + ": the INDEX_BLOCK changed since it was read");
        Sha256Digest& d = (*digests)[static_cast<size_t>(it - o.chunks.begin())];
        std::copy(entries + i * kDigestEntrySize, entries + (i + 1) * kDigestEntrySize, d.begin());
        if (listed[i].kind == FrameKind::kZeroRun && d != Sha256Digest{})
          return Status::Corruption(Where(source, block_end) + ": DIGEST_BLOCK entry " + std::to_string(i) +
                                    " is for a ZERO_RUN and must be zero");
      }
    }
  }

  buffer.resize(kStreamEndPayloadSize);
  VF_RETURN_IF_ERROR(ReadExactly(source, end_offset + kFrameHeaderSize, buffer));
  hasher.Update(buffer);
  result.id = hasher.Final();
  if (!result.has_digests) result.digests.clear();
  return result;
}

Result<StreamId> ComputeStreamId(RandomAccessSource& source, const StoredStreamIndex& stored) {
  VF_ASSIGN_OR_RETURN(StreamIdAndDigests read, ReadStreamIdAndDigests(source, stored, false));
  return read.id;
}

}  // namespace vramflow
