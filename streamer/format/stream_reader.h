// SPDX-License-Identifier: MIT
// ReadStream: reads, checks and (optionally) decodes a whole chunk stream,
// serially, reporting what it finds to a StreamVisitor.
//
// This is the reference reader used by `unpack`, `inspect` and `verify`.
// Every check of the format is applied; the first failure stops the read and
// comes back as one Status naming the frame and stream offset. A stream is
// complete only when STREAM_END was read, its totals matched and no byte
// followed it: OnStreamEnd is the visitor's proof of that. A visitor's error
// comes back with the frame and offset it was called for.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "streamer/format/base_stream.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/frame_reader.h"
#include "streamer/format/stream_validator.h"
#include "streamer/machine/memory_budget.h"
#include "transport/core/byte_stream.h"

namespace vramflow {

struct ChunkEvent {
  const FrameHeader& header;
  uint64_t stream_offset;
  const ObjectState& object;
  std::span<const uint8_t> payload;  // stored bytes (empty for zero runs)
  // Decoded bytes; empty for zero runs, dedup refs or without decoding. For
  // BASE_REF and BASE_DELTA (decoding, with the base open): the chunk's own
  // bytes, taken from the base and checked (SHA-256 of the base's bytes,
  // XXH3 of the result).
  std::span<const uint8_t> data;
  const DedupRef* dedup = nullptr;  // for DEDUP_REF: the earlier DATA frame holding these bytes
  // For DATA without decoding: the reader's buffer holding `payload`. A
  // visitor may keep the payload without copying it by swapping in another
  // vector, which the reader then reads into (and charges as its own).
  std::vector<uint8_t>* payload_buffer = nullptr;
  const BaseChunkRef* base_ref = nullptr;  // for BASE_REF and BASE_DELTA: the base chunk they name
  // DATA read in place (ByteSource::ReadInPlace: a mapped file): `payload`
  // lies where the source holds it, and stays readable after OnChunk returns
  // for as long as the visitor reports it held (StreamVisitor::
  // HeldInPlaceFrom). payload_buffer is then null.
  bool payload_in_place = false;
  // Without decoding, with check_digests, in a stream that may have
  // DIGEST_BLOCKs: the visitor that decodes the chunk itself is to note its
  // SHA-256 for OnDigestBlock (DATA, BASE_REF and BASE_DELTA).
  bool digest_wanted = false;
};

class StreamVisitor {
 public:
  virtual ~StreamVisitor() = default;
  virtual Status OnStreamHeader(const StreamHeader&) { return Status::Ok(); }
  virtual Status OnObjectBegin(const ObjectState&) { return Status::Ok(); }
  // DATA, ZERO_RUN, DEDUP_REF, BASE_REF and BASE_DELTA frames, in stream order.
  virtual Status OnChunk(const ChunkEvent&) { return Status::Ok(); }
  // Called once the object's ranges and digest are proven.
  virtual Status OnObjectEnd(const ObjectState&) { return Status::Ok(); }
  virtual Status OnStreamEnd(const StreamTotals&) { return Status::Ok(); }
  // Without decoding, with check_digests: a DIGEST_BLOCK of object
  // `object_id`, whose entries (`stored`) pair with `records`, for a visitor
  // that decodes the chunks (ChunkEvent::digest_wanted) to check against
  // their bytes (UncoveredDigests, digest_block.h). The validator has
  // checked the frame itself.
  virtual Status OnDigestBlock(uint32_t /*object_id*/, std::span<const SeekIndexChunk> /*records*/,
                               std::span<const uint8_t> /*stored*/) {
    return Status::Ok();
  }
  // The first byte of the earliest payload read in place
  // (ChunkEvent::payload_in_place) that the visitor still holds, or null
  // when it holds none: the reader lets the source drop what lies before.
  virtual const uint8_t* HeldInPlaceFrom() const { return nullptr; }
};

struct ReadOptions {
  // Decode DATA payloads and check them against their hash. Without it only
  // the framing, metadata and ranges are checked (fast inspect).
  bool decode = true;
  // The reader's memory budget (--max-memory), or null. With one, the
  // reader charges to it, up front, its records (an eighth of the budget is
  // the validator's record limit) and the dedup window the header declares,
  // and, as the largest frame so far needs them, its payload and decode
  // buffers; a stream that needs more fails naming the frame and its
  // offset. The visitor may charge its own records to the same budget.
  // Without one the records are capped at kDefaultRecordLimit.
  MemoryBudget* budget = nullptr;
  // Opens the base an incremental stream's BASE frame names (pipeline.h's
  // PipelineOptions::open_base); called at the BASE frame, before any chunk.
  // Unset, such a stream's BASE_REF and BASE_DELTA frames cannot be
  // resolved: with `decode` the read fails (NotFound, "needs its base");
  // without, they are checked as framing only.
  std::function<Result<std::shared_ptr<const BaseStream>>(const BaseDescriptor&)> open_base = nullptr;
  // With `decode`, also check each DIGEST_BLOCK entry against the SHA-256
  // of the decoded chunk it names (DEDUP_REF entries excepted: their bytes
  // are the DATA frame's, which its own entry proves); without, leave that
  // to the visitor (ChunkEvent::digest_wanted, OnDigestBlock). Until the first
  // DIGEST_BLOCK (or an INDEX_BLOCK without one) every decoded chunk is
  // hashed, which costs more than decoding it: a reader that only restores
  // the bytes (each already checked by its XXH3) turns it off and leaves the
  // digests, which matter only to a later dump against this stream, to
  // `verify`.
  bool check_digests = true;
};

Status ReadStream(ByteSource& source, StreamVisitor& visitor, const ReadOptions& options = {});

// One step of every in-order reader (ReadStream, the restore graph): reads
// frame headers, checks each against the stream so far and passes over the
// skippable frames the validator does not know, until a frame to process;
// `at` is its stream offset, and its payload is next in `reader`. Errors name
// the frame and offset; input that ends before STREAM_END is Truncated.
Status NextFrame(FrameReader& reader, StreamValidator& validator, FrameHeader* header, uint64_t* at);

}  // namespace vramflow
