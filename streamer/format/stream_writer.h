// SPDX-License-Identifier: MIT
// StreamWriter: writes a chunk stream to a ByteSink, strictly sequentially.
//
// The caller encodes chunks (ChunkEncoder) and hands them over with their
// object and offset; the writer frames them, numbers frames, merges adjacent
// zero runs of an object into one frame, keeps each object's digest and the
// stream totals, and writes OBJECT_END and STREAM_END. Objects may interleave.
// It never seeks, so any sink works (pipes, sockets). When the header carries
// kStreamFlagSeekIndex it also records where each frame went, lists the chunk
// frames in INDEX_BLOCK frames as it goes and writes the SEEK_INDEX frame
// before STREAM_END (seek_index.h): at most kMaxUnlistedChunks records held,
// plus an entry per object and per block. Asked to (SetChunkDigests), it
// writes a DIGEST_BLOCK after each INDEX_BLOCK with the SHA-256 of every
// chunk the block lists (FORMAT.md 4.12); it only sees encoded chunks, so the
// caller hands each chunk's SHA-256 over with it, and the writer keeps those
// of unlisted chunks only (32 bytes each, at most kMaxUnlistedChunks).
//
// Not thread-safe: the pipeline's ordered write stage is its only user.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/sha256.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/seek_index.h"
#include "transport/core/byte_stream.h"

namespace vramflow {

struct WriterStats {
  uint64_t data_frames = 0;
  uint64_t dedup_frames = 0;
  uint64_t dedup_bytes = 0;
  uint64_t zero_frames = 0;
  uint64_t zero_bytes = 0;
  uint64_t stored_payload_bytes = 0;  // DATA and BASE_DELTA payload bytes
  uint64_t base_ref_frames = 0;
  uint64_t base_ref_bytes = 0;  // raw bytes taken from the base as they are
  uint64_t base_delta_frames = 0;
  uint64_t base_delta_bytes = 0;  // raw bytes coded against the base
  uint64_t digest_blocks = 0;     // DIGEST_BLOCK frames
};

class StreamWriter {
 public:
  // `sink` must outlive the writer.
  StreamWriter(ByteSink* sink, StreamHeader header);

  // Writes the stream header, and with kStreamFlagBase the BASE frame
  // naming `base` (SetBase). Call once, first.
  Status Start();
  // The base of an incremental stream; required before Start() when the
  // header carries kStreamFlagBase.
  void SetBase(BaseDescriptor base) { base_ = std::move(base); }
  // Write a DIGEST_BLOCK after each INDEX_BLOCK (FORMAT.md 4.12), so that the
  // stream can later be a base matched by digests alone. Takes effect only in
  // an indexed stream; every chunk call below must then give the chunk's
  // SHA-256 (`sha256`, the SHA-256 of its decoded bytes). Call before Start().
  void SetChunkDigests(bool on) { digests_requested_ = on; }
  bool chunk_digests() const { return digests_requested_ && indexed(); }
  // Announces an object; returns its id for the calls below. `size` may be
  // kUnknownObjectSize when chunks are added in order and the size is only
  // known at EndObject (a pipe).
  Result<uint32_t> BeginObject(const ObjectMetadata& metadata, uint64_t size);
  // Adds one encoded chunk of `raw_size` bytes at `offset` of the object.
  // `sha256` (of the raw bytes) is needed with chunk_digests(), except for a
  // zero run. With `lent`, the payload is lent to the sink rather than
  // copied (ByteSink::WriteBorrowed): *lent is the sink's ticket, 0 when
  // nothing was lent, and the caller keeps chunk.payload's bytes until the
  // sink releases it.
  Status AddChunk(uint32_t object_id, uint64_t offset, uint64_t raw_size, const EncodedChunk& chunk,
                  const Sha256Digest* sha256 = nullptr, uint64_t* lent = nullptr);
  // Adds `raw_size` bytes at `offset` that are identical to the DATA frame
  // written earlier at (source_object_id, source_offset) with `raw_hash`.
  // The stream header must carry kStreamFlagDedup.
  Status AddDedupRef(uint32_t object_id, uint64_t offset, uint64_t raw_size, uint64_t raw_hash, const DedupRef& ref,
                     const Sha256Digest* sha256 = nullptr);
  // Adds `raw_size` bytes at `offset` equal to the base's chunk `ref` names
  // (BASE_REF); `raw_hash` is their XXH3-64. Needs kStreamFlagBase. The
  // bytes are the base chunk's, so their SHA-256 is ref.base_sha256.
  Status AddBaseRef(uint32_t object_id, uint64_t offset, uint64_t raw_size, uint64_t raw_hash, const BaseChunkRef& ref);
  // Adds `raw_size` bytes at `offset` coded as the XOR with the base's chunk
  // `ref` names (BASE_DELTA): `delta` encodes the XOR bytes; `raw_hash` is
  // the XXH3-64 of the chunk's own bytes. Needs kStreamFlagBase.
  Status AddBaseDelta(uint32_t object_id, uint64_t offset, uint64_t raw_size, uint64_t raw_hash,
                      const BaseChunkRef& ref, const EncodedChunk& delta, const Sha256Digest* sha256 = nullptr);
  // Closes the object; all of [0, size) must have been added.
  Status EndObject(uint32_t object_id);
  // Writes SEEK_INDEX (if the header announces one) and STREAM_END; every
  // object must be ended. Does not Commit() the sink.
  Status Finish();

  uint64_t bytes_written() const { return bytes_written_; }
  bool indexed() const { return (header_.flags & kStreamFlagSeekIndex) != 0; }
  const WriterStats& stats() const { return stats_; }

 private:
  struct OpenObject {
    std::string name;
    uint64_t size = 0;
    uint64_t covered = 0;  // bytes added so far
    uint64_t digest = 0;
    // A zero run not yet written, merged with the next adjacent one.
    uint64_t pending_zero_offset = 0;
    uint64_t pending_zero_size = 0;
  };

  // Writes a frame; with `lent`, its payload through WriteBorrowed (*lent:
  // the ticket). `more`, if any, ends the payload, in a write of its own.
  Status WriteFrame(FrameHeader header, std::span<const uint8_t> payload, uint64_t* lent = nullptr,
                    std::span<const uint8_t> more = {});
  // A chunk frame that names another chunk: DEDUP_REF (an earlier DATA
  // frame), BASE_REF and BASE_DELTA (a chunk of the base).
  struct RefFrame {
    FrameKind kind;
    const char* what;                     // for errors: "dedup reference", ...
    std::span<const uint8_t> ref;         // the encoded reference, the payload's start
    const EncodedChunk* delta = nullptr;  // BASE_DELTA: the coded delta after it
    uint32_t source_object_id = 0;        // for the index
    uint64_t source_offset = 0;
    Sha256Digest sha256{};
  };
  // What AddDedupRef, AddBaseRef and AddBaseDelta share once their own
  // checks passed: places the chunk, writes the frame, counts and lists it.
  Status AddRefFrame(uint32_t object_id, uint64_t offset, uint64_t raw_size, uint64_t raw_hash, const RefFrame& frame);
  // Records a chunk frame just written in the index (and its SHA-256 with
  // chunk_digests()), and writes an INDEX_BLOCK when kMaxUnlistedChunks
  // frames are unlisted.
  Status ListChunk(uint32_t object_id, const SeekIndexChunk& chunk, const Sha256Digest& sha256 = {});
  // With chunk_digests(): fails unless the caller gave the chunk's digest.
  Status NeedDigest(const Sha256Digest* sha256, const char* what) const;
  Status WriteIndexBlock(uint32_t object_id);
  Status FlushZeroRun(uint32_t object_id, OpenObject& object);
  // The checks every chunk frame's placement passes; counts it as covered.
  Result<OpenObject*> PlaceChunk(uint32_t object_id, uint64_t offset, uint64_t raw_size, const char* what);
  Status Fail(Status status);

  ByteSink* sink_;
  StreamHeader header_;
  BaseDescriptor base_;
  std::map<uint32_t, OpenObject> open_;
  uint32_t next_object_id_ = 1;
  uint64_t sequence_ = 0;
  uint64_t bytes_written_ = 0;
  StreamTotals totals_;
  WriterStats stats_;
  SeekIndexBuilder index_;  // fed only when indexed()
  bool digests_requested_ = false;
  // With chunk_digests(): the SHA-256 of each object's unlisted chunk frames,
  // in the order of index_.Unlisted(object).
  std::map<uint32_t, std::vector<Sha256Digest>> unlisted_digests_;
  bool started_ = false;
  bool finished_ = false;
  Status failed_;  // sticky: after a failure every call returns it
};

}  // namespace vramflow
