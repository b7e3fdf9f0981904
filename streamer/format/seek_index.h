// SPDX-License-Identifier: MIT
// SEEK_INDEX and INDEX_BLOCK: where every object's frames lie in a stored
// stream.
//
// A writer whose output can later be read at any offset (a file, an S3
// object) announces an index in the stream header (kStreamFlagSeekIndex and
// kStreamFlagIndexBlocks). As it writes, it lists its chunk frames in
// INDEX_BLOCK frames, at least every kMaxUnlistedChunks chunk frames and at
// the latest before each OBJECT_END; just before STREAM_END it writes one
// SEEK_INDEX frame naming every object and its blocks. Neither writer nor
// reader ever holds more than kMaxUnlistedChunks chunk records plus one small
// entry per object and per block, whatever the stream's size. With the index
// a reader lists the objects (names, sizes, attributes) from the tail of the
// stream and their blocks, and fetches one object's frames, in parallel
// ranges, without reading the rest. docs/FORMAT.md sections 4.7 and 4.8
// define the bytes.
//
// The index is a statement about the frames, so every sequential reader
// rebuilds it from what it read (SeekIndexBuilder) and rejects a stream
// whose stored blocks or index differ; `vramflow verify` therefore checks it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "common/status.h"
#include "streamer/format/frame_format.h"
#include "transport/core/random_access.h"

namespace vramflow {

// At any point of a stream with index blocks, at most this many chunk frames
// may not yet be listed in an INDEX_BLOCK (FORMAT.md 4.8): what bounds the
// index records a writer or reader holds (48 bytes each, 192 KiB in all).
inline constexpr uint32_t kMaxUnlistedChunks = 4096;
inline constexpr uint32_t kChunkRecordSize = 48;
// Sizes in a SEEK_INDEX (FORMAT.md 4.7): an object entry before its
// metadata, and one block reference.
inline constexpr uint32_t kSeekIndexObjectEntryBytes = 56;
inline constexpr uint32_t kSeekIndexBlockRefBytes = 16;

// One chunk frame of an object (IsChunkKind).
struct SeekIndexChunk {
  uint64_t stream_offset = 0;  // of the frame header; the payload follows it
  uint64_t object_offset = 0;  // the frame's `offset`
  uint64_t raw_size = 0;
  uint32_t payload_size = 0;
  FrameKind kind = FrameKind::kData;
  // DEDUP_REF: the DATA frame whose bytes these are; BASE_REF and
  // BASE_DELTA: the base object and offset they name; (0, 0) otherwise.
  uint32_t source_object_id = 0;
  uint64_t source_offset = 0;

  uint64_t frame_bytes() const { return kFrameHeaderSize + payload_size; }
  bool operator==(const SeekIndexChunk&) const = default;
};

// An INDEX_BLOCK frame of an object, as the SEEK_INDEX names it.
struct IndexBlockRef {
  uint64_t stream_offset = 0;  // of the frame header
  uint32_t chunk_count = 0;    // records in it

  uint64_t frame_bytes() const { return kFrameHeaderSize + uint64_t{chunk_count} * kChunkRecordSize; }
  bool operator==(const IndexBlockRef&) const = default;
};

struct SeekIndexObject {
  uint32_t id = 0;
  ObjectMetadata metadata;
  uint64_t size = 0;
  uint64_t digest = 0;        // the OBJECT_END digest
  uint64_t begin_offset = 0;  // stream offset of the OBJECT_BEGIN frame header
  uint32_t begin_payload_size = 0;
  uint64_t end_offset = 0;            // stream offset of the OBJECT_END frame header
  uint64_t chunk_count = 0;           // chunk frames of the object, the sum of its blocks' counts
  std::vector<IndexBlockRef> blocks;  // in stream order
  // Filled by ReadSeekIndex from the blocks, sorted by object_offset; empty
  // in the index that the SEEK_INDEX payload alone gives.
  std::vector<SeekIndexChunk> chunks;

  bool operator==(const SeekIndexObject& o) const {
    return id == o.id && metadata.name == o.metadata.name && metadata.attributes == o.metadata.attributes &&
           size == o.size && digest == o.digest && begin_offset == o.begin_offset &&
           begin_payload_size == o.begin_payload_size && end_offset == o.end_offset && chunk_count == o.chunk_count &&
           blocks == o.blocks && chunks == o.chunks;
  }
};

struct SeekIndex {
  std::vector<SeekIndexObject> objects;  // in the order of their OBJECT_BEGIN frames
  bool operator==(const SeekIndex&) const = default;

  const SeekIndexObject* Find(uint32_t id) const;
  // The DATA chunk at (object, offset), as a DEDUP_REF names it; null if none.
  const SeekIndexChunk* FindData(uint32_t object_id, uint64_t offset) const;
};

// The payload of a SEEK_INDEX frame (FORMAT.md 4.7), and back: objects and
// their blocks, without chunks. Decode checks what the index says about
// itself: counts against the payload size, ids, block counts adding up.
// Errors say which object is wrong. Where the blocks' chunks cover each
// object is checked by ReadSeekIndex, which reads them.
Result<std::vector<uint8_t>> EncodeSeekIndex(const SeekIndex& index);
Result<SeekIndex> DecodeSeekIndex(std::span<const uint8_t> payload);

// The payload of an INDEX_BLOCK frame (FORMAT.md 4.8): chunk records in
// stream order, and back. Decode checks the record count and each record on
// its own (kind, sizes, reserved bytes), naming the record in errors.
std::vector<uint8_t> EncodeIndexBlock(std::span<const SeekIndexChunk> chunks);
Result<std::vector<SeekIndexChunk>> DecodeIndexBlock(std::span<const uint8_t> payload);

// Builds the index from the frames as they are written or read, in stream
// order. The writer feeds it what it writes and asks it when to write an
// INDEX_BLOCK; the validator feeds it what it reads and compares. Holds one
// entry per object and per block, and the records not yet in a block.
class SeekIndexBuilder {
 public:
  void ObjectBegin(uint32_t id, const ObjectMetadata& metadata, uint64_t stream_offset, uint32_t payload_size);
  // A chunk frame of an open object.
  void Chunk(uint32_t object_id, const SeekIndexChunk& chunk);
  // Chunk frames not yet listed in a block, over all objects.
  size_t unlisted() const { return unlisted_; }
  // The open object with the most unlisted chunk frames (0 if none has any).
  uint32_t FullestObject() const;
  // The unlisted chunk frames of an open object, in stream order: the records
  // of its next INDEX_BLOCK. Empty for an unknown object.
  std::span<const SeekIndexChunk> Unlisted(uint32_t object_id) const;
  // An INDEX_BLOCK listing Unlisted(object_id) was written at `stream_offset`.
  void BlockWritten(uint32_t object_id, uint64_t stream_offset);
  void ObjectEnd(uint32_t id, uint64_t size, uint64_t digest, uint64_t stream_offset);
  // The index of everything so far (objects and blocks); objects must have ended.
  SeekIndex Build() const { return SeekIndex{objects_}; }

 private:
  std::vector<SeekIndexObject> objects_;
  struct Open {
    size_t position = 0;  // in objects_
    std::vector<SeekIndexChunk> unlisted;
  };
  std::map<uint32_t, Open> open_;
  size_t unlisted_ = 0;
};

// What a reader with random access learns from the stream's two ends.
struct StoredStreamIndex {
  StreamHeader header;
  StreamTotals totals;
  SeekIndex index;
  uint64_t index_offset = 0;  // stream offset of the SEEK_INDEX frame header
  uint64_t stream_size = 0;
  // The stream id (FORMAT.md 4.12), hashed from the bytes read for the index.
  StreamId id{};
  // With SeekIndexReadOptions::digests, where the stream has DIGEST_BLOCKs:
  // per object of the index (same order), the SHA-256 of each chunk in the
  // order of SeekIndexObject::chunks (zeros for ZERO_RUNs). Else empty.
  bool has_digests = false;
  std::vector<std::vector<Sha256Digest>> digests;
  uint64_t bytes_read = 0;  // what finding it cost (for "reads only the index")
  uint64_t reads = 0;       // in how many reads
};

struct SeekIndexReadOptions {
  // The most the index may take to hold (see ReadSeekIndex).
  uint64_t max_bytes = UINT64_MAX;
  // Also read and check the DIGEST_BLOCK after each INDEX_BLOCK (FORMAT.md
  // 4.12: all blocks have one or none does), in the same read as its block.
  bool digests = false;
  // INDEX_BLOCKs outside the tail read, read at once (on S3, GETs in
  // flight); 0: what the source asks for (ConcurrentReads()).
  unsigned concurrency = 0;
};

// Reads the stream header, STREAM_END, the SEEK_INDEX frame and every
// INDEX_BLOCK of a stored stream: ranged reads, never the chunk frames. The
// last 256 KiB come in one read; blocks before them each in one of their
// own, as many in flight as the source asks for (on S3, its concurrency).
// The objects come back with their chunks and the stream id, and the whole
// is checked: each object covered exactly, no two frames overlapping,
// DEDUP_REF sources naming earlier DATA frames. Fails with NotSupported when
// the stream has no index it can use (written to a pipe or socket, or by a
// vramflow before index blocks): the caller falls back to reading it all.
// NotSupported too when holding the index would take more than `max_bytes`
// (the SEEK_INDEX payload, every chunk record and digest, counted before any
// is read): a stored stream, perhaps crafted, with a huge index is then read
// whole, within the reader's budget, instead of growing memory with the
// index.
Result<StoredStreamIndex> ReadSeekIndex(RandomAccessSource& source, const SeekIndexReadOptions& options);
inline Result<StoredStreamIndex> ReadSeekIndex(RandomAccessSource& source, uint64_t max_bytes = UINT64_MAX) {
  return ReadSeekIndex(source, SeekIndexReadOptions{.max_bytes = max_bytes});
}

}  // namespace vramflow
