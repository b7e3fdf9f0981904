// SEEK_INDEX: where every object's frames lie in a stored stream.
//
// A writer whose output can later be read at any offset (a file, an S3
// object) ends the stream with one SEEK_INDEX frame, just before STREAM_END,
// and announces it with kStreamFlagSeekIndex in the stream header. With the
// index a reader lists the objects (names, sizes, attributes) from the tail
// of the stream alone, and fetches one object's frames, in parallel ranges,
// without reading the rest. docs/FORMAT.md section 4.7 defines the bytes.
//
// The index is a statement about the frames, so every sequential reader
// rebuilds it from what it read (SeekIndexBuilder) and rejects a stream
// whose stored index differs; `vramflow verify` therefore checks it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "common/status.h"
#include "streamer/frame_format.h"
#include "transport/random_access.h"

namespace vramflow {

// One DATA, ZERO_RUN or DEDUP_REF frame of an object.
struct SeekIndexChunk {
  uint64_t stream_offset = 0;  // of the frame header; the payload follows it
  uint64_t object_offset = 0;  // the frame's `offset`
  uint64_t raw_size = 0;
  uint32_t payload_size = 0;
  FrameKind kind = FrameKind::kData;
  // DEDUP_REF only: the DATA frame whose bytes these are (0, 0 otherwise).
  uint32_t source_object_id = 0;
  uint64_t source_offset = 0;

  uint64_t frame_bytes() const { return kFrameHeaderSize + payload_size; }
  bool operator==(const SeekIndexChunk&) const = default;
};

struct SeekIndexObject {
  uint32_t id = 0;
  ObjectMetadata metadata;
  uint64_t size = 0;
  uint64_t digest = 0;        // the OBJECT_END digest
  uint64_t begin_offset = 0;  // stream offset of the OBJECT_BEGIN frame header
  uint32_t begin_payload_size = 0;
  uint64_t end_offset = 0;    // stream offset of the OBJECT_END frame header
  std::vector<SeekIndexChunk> chunks;  // sorted by object_offset

  bool operator==(const SeekIndexObject& o) const {
    return id == o.id && metadata.name == o.metadata.name && metadata.attributes == o.metadata.attributes &&
           size == o.size && digest == o.digest && begin_offset == o.begin_offset &&
           begin_payload_size == o.begin_payload_size && end_offset == o.end_offset && chunks == o.chunks;
  }
};

struct SeekIndex {
  std::vector<SeekIndexObject> objects;  // in the order of their OBJECT_BEGIN frames
  bool operator==(const SeekIndex&) const = default;

  const SeekIndexObject* Find(uint32_t id) const;
  // The DATA chunk at (object, offset), as a DEDUP_REF names it; null if none.
  const SeekIndexChunk* FindData(uint32_t object_id, uint64_t offset) const;
};

// The payload of a SEEK_INDEX frame (FORMAT.md 4.7), and back. Decode checks
// everything the index says about itself: counts against the payload size,
// ids, chunk ranges covering each object exactly, frames in the stream not
// overlapping, DEDUP_REF sources naming earlier DATA frames. Errors say
// which object or chunk is wrong.
Result<std::vector<uint8_t>> EncodeSeekIndex(const SeekIndex& index);
Result<SeekIndex> DecodeSeekIndex(std::span<const uint8_t> payload);

// Builds the index from the frames as they are written or read, in stream
// order. The writer feeds it what it writes; the validator what it reads.
class SeekIndexBuilder {
 public:
  void ObjectBegin(uint32_t id, const ObjectMetadata& metadata, uint64_t stream_offset, uint32_t payload_size);
  void Chunk(uint32_t object_id, const SeekIndexChunk& chunk);
  void ObjectEnd(uint32_t id, uint64_t size, uint64_t digest, uint64_t stream_offset);
  // The index of everything so far; objects must have ended.
  SeekIndex Build() const;

 private:
  std::vector<SeekIndexObject> objects_;
  std::map<uint32_t, size_t> position_;  // object id -> objects_ index
};

// What a reader with random access learns from the stream's two ends.
struct StoredStreamIndex {
  StreamHeader header;
  StreamTotals totals;
  SeekIndex index;
  uint64_t index_offset = 0;  // stream offset of the SEEK_INDEX frame header
  uint64_t stream_size = 0;
  uint64_t bytes_read = 0;    // what finding it cost (for "reads only the index")
};

// Reads the stream header, STREAM_END and the SEEK_INDEX frame of a stored
// stream: two or three ranged reads, never the frames in between. Fails with
// NotSupported when the stream has no index (written to a pipe or socket, or
// by an older writer): the caller falls back to reading it all.
Result<StoredStreamIndex> ReadSeekIndex(RandomAccessSource& source);

}  // namespace vramflow
