// SPDX-License-Identifier: MIT
// StreamValidator: checks that a sequence of frames forms a valid stream.
//
// Frame-by-frame state machine shared by every reader (the CLI, the restore
// graph): sequence numbers, object lifetimes, byte ranges (inside the object,
// no overlap, nothing missing at OBJECT_END), object digests and the
// STREAM_END totals. In a stream with index blocks it rebuilds the index
// from the frames and checks each INDEX_BLOCK and the SEEK_INDEX against it,
// holding no more than kMaxUnlistedChunks chunk records; the version 1
// SEEK_INDEX of older streams is skipped unread.
//
// What it keeps grows with the stream only where the stream makes it: the
// open objects (metadata and the byte ranges received, one record per range
// that chunks out of order leave apart), the ids of ended objects (one range
// of ids per gap), and with index blocks each object's index entry. All of
// it is charged, in kRecordBytes-style estimates, against a record limit;
// a stream that needs more fails with an error saying so. Ended objects are
// forgotten (their metadata too) once the next frame is checked. It sees
// headers and the small payloads that carry metadata and the index; DATA
// payloads are decoded and hash-checked by the caller.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "streamer/format/dedup_window.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/seek_index.h"

namespace vramflow {

// Disjoint half-open byte ranges, merged when adjacent. Memory stays constant
// while chunks arrive in order.
class RangeSet {
 public:
  // Adds [begin, end); fails (changing nothing) if it overlaps a range already present.
  bool Add(uint64_t begin, uint64_t end);
  // The first gap in [0, size), or false if [0, size) is fully covered.
  bool FirstGap(uint64_t size, uint64_t* gap_begin, uint64_t* gap_end) const;
  size_t range_count() const { return ranges_.size(); }
  bool Contains(uint64_t value) const;
  // End of the last range (0 when empty).
  uint64_t End() const { return ranges_.empty() ? 0 : ranges_.rbegin()->second; }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // begin -> end
};

struct ObjectState {
  uint32_t id = 0;
  ObjectMetadata metadata;
  uint64_t size = 0;
  uint64_t digest = 0;  // sum of digest terms seen so far
  bool ended = false;
  RangeSet covered;
  uint32_t metadata_bytes = 0;  // its OBJECT_BEGIN payload
};

enum class FrameAction {
  kProcess,  // a frame this reader understands
  kSkip,     // an unknown frame flagged skippable: drop its payload
};

// Estimated bytes of the validator's records, for its record limit: a
// range of a RangeSet (a std::map node), an object beyond its metadata.
inline constexpr uint64_t kRangeRecordBytes = 64;
inline constexpr uint64_t kObjectRecordBytes = 256;
// The record limit of readers not given one (verify, inspect): 64 MiB.
inline constexpr uint64_t kDefaultRecordLimit = 64ull << 20;

class StreamValidator {
 public:
  // How many bytes of records the validator may keep (see above).
  void SetRecordLimit(uint64_t bytes) { record_limit_ = bytes; }
  uint64_t records() const { return records_; }
  // Charges records a caller keeps for the rest of the stream (a restore's
  // per-object targets) to the same limit; fails past it, naming `what`.
  Status ChargeCallerRecords(uint64_t bytes, const std::string& what) {
    return ChargeRecords(static_cast<int64_t>(bytes), what);
  }
  // The stream header read first; its flags decide what frames may follow.
  void SetStreamHeader(const StreamHeader& header) {
    stream_flags_ = header.flags;
    data_frames_ = DataFrames(header.dedup_window);
  }
  // Checks a frame header, read at `stream_offset`, before its payload is
  // read: everything that the header alone decides (limits, ids, ranges,
  // overlaps, OBJECT_END completeness and digest).
  Status CheckHeader(const FrameHeader& header, uint64_t stream_offset, FrameAction* action);
  // Completes a processed frame once its payload is in memory: parses and
  // hash-checks OBJECT_BEGIN metadata and STREAM_END totals, and resolves a
  // DEDUP_REF against the DATA frame it names (*ref receives it).
  // For BASE_REF and BASE_DELTA it checks the reference's checksum
  // (*base_ref receives it); for BASE it decodes the descriptor (base());
  // for DIGEST_BLOCK its hash and its zero entries for ZERO_RUNs
  // (digest_records() then pairs its entries with the records).
  Status Apply(const FrameHeader& header, std::span<const uint8_t> payload, DedupRef* ref = nullptr,
               BaseChunkRef* base_ref = nullptr);

  // The BASE frame of an incremental stream, once read; null before or without.
  const BaseDescriptor* base() const { return base_seen_ ? &base_ : nullptr; }
  // Whether the stream has DIGEST_BLOCKs: unknown (nullopt) until the frame
  // after its first INDEX_BLOCK.
  std::optional<bool> has_digests() const { return digests_; }
  // The records of the INDEX_BLOCK just before the DIGEST_BLOCK last applied:
  // entry i of its payload is the SHA-256 of the chunk record i lists.
  std::span<const SeekIndexChunk> digest_records() const { return last_block_records_; }

  bool complete() const { return complete_; }
  uint64_t frames_seen() const { return next_sequence_; }
  // An open object, or the one that ended at the last frame; null otherwise.
  const ObjectState* object(uint32_t id) const;
  const StreamTotals& totals() const { return totals_; }

  // "frame 12 (DATA, object 3 'bo-7', offset 1048576, 1048576 bytes) at stream offset 4242"
  std::string Describe(const FrameHeader& header, uint64_t stream_offset) const;

 private:
  // CheckHeader's checks of where a frame stands, whatever its kind: after
  // STREAM_END or SEEK_INDEX, its sequence number, a DIGEST_BLOCK right after
  // each INDEX_BLOCK or after none, a BASE frame first. *block_before gets
  // the object of the INDEX_BLOCK just before (0: the frame before was none).
  Status CheckPlace(const FrameHeader& header, uint64_t stream_offset, uint32_t* block_before);
  // CheckHeader for each frame kind, once the checks common to all passed.
  Status CheckObjectBeginHeader(const FrameHeader& header);
  Status CheckDataHeader(const FrameHeader& header, uint64_t stream_offset);
  Status CheckDedupRefHeader(const FrameHeader& header);
  Status CheckBaseHeader(const FrameHeader& header);
  Status CheckBaseChunkHeader(const FrameHeader& header);  // BASE_REF and BASE_DELTA
  Status CheckDigestBlockHeader(const FrameHeader& header, uint32_t block_before);
  Status CheckZeroRunHeader(const FrameHeader& header, uint64_t stream_offset);
  Status CheckObjectEndHeader(const FrameHeader& header, uint64_t stream_offset);
  Status CheckStreamEndHeader(const FrameHeader& header, uint64_t stream_offset);
  Status CheckSeekIndexHeader(const FrameHeader& header, FrameAction* action);
  Status CheckIndexBlockHeader(const FrameHeader& header);

  Result<ObjectState*> OpenObject(const FrameHeader& header);
  Status CheckRange(ObjectState& object, const FrameHeader& header);
  bool indexed() const { return (stream_flags_ & kStreamFlagSeekIndex) != 0; }
  bool index_blocks() const { return (stream_flags_ & kStreamFlagIndexBlocks) != 0; }
  // Records a chunk frame for the index; fails when too many are unlisted.
  Status ListChunk(uint32_t object_id, const SeekIndexChunk& chunk);
  Status CheckIndexBlock(uint32_t object_id, std::span<const uint8_t> payload) const;
  Status CheckStoredIndex(std::span<const uint8_t> payload) const;
  // Adds `bytes` to the records kept (negative: they were dropped); fails
  // past the limit, naming `what`.
  Status ChargeRecords(int64_t bytes, const std::string& what);
  // Adds [begin, end) to an object's ranges, charging a new range record.
  bool AddRange(ObjectState& object, uint64_t begin, uint64_t end, Status* charge);
  // Forgets the object that ended at the last frame, if any.
  void DropEndedObject();

  std::map<uint32_t, ObjectState> objects_;  // open ones, and the one ended last
  RangeSet ended_ids_;                       // ids of the objects that ended
  uint32_t just_ended_ = 0;                  // dropped from objects_ at the next frame
  uint64_t record_limit_ = kDefaultRecordLimit;
  uint64_t records_ = 0;
  uint32_t stream_flags_ = 0;
  // The DATA frames a DEDUP_REF may name, by (object, offset) -> (raw_size,
  // raw_hash): the stream's dedup window (all of them for earlier writers'
  // streams, which declare none). Kept only in dedup streams.
  struct PlaceHash {
    size_t operator()(const std::pair<uint32_t, uint64_t>& p) const {
      return std::hash<uint64_t>()(p.second * 0x9E3779B97F4A7C15ull ^ p.first);
    }
  };
  using DataFrames = DedupWindow<std::pair<uint32_t, uint64_t>, std::pair<uint64_t, uint64_t>, PlaceHash>;
  DataFrames data_frames_;
  size_t open_objects_ = 0;
  uint64_t next_sequence_ = 0;
  uint64_t frame_offset_ = 0;  // stream offset of the frame CheckHeader saw last
  // Indexed streams: whether the SEEK_INDEX was seen (it must come right
  // before STREAM_END). With index blocks also the index the frames make:
  // the chunk frames no INDEX_BLOCK has listed yet, and an entry per object
  // and per block.
  SeekIndexBuilder index_;
  bool index_seen_ = false;
  SeekIndex expected_index_;                   // index_ built once SEEK_INDEX arrives, to compare the stored one with
  std::vector<uint8_t> expected_index_bytes_;  // and its encoding
  StreamTotals totals_;                        // as counted while reading
  // Incremental streams: the BASE frame.
  bool base_seen_ = false;
  BaseDescriptor base_;
  // DIGEST_BLOCKs: whether the stream has them (decided by the frame after
  // the first INDEX_BLOCK), whether the last frame was an INDEX_BLOCK (of
  // which object), and that block's records (at most kMaxUnlistedChunks).
  std::optional<bool> digests_;
  uint32_t block_just_listed_ = 0;
  std::vector<SeekIndexChunk> last_block_records_;
  bool complete_ = false;
};

}  // namespace vramflow
