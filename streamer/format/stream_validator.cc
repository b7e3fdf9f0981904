// SPDX-License-Identifier: MIT
#include "streamer/format/stream_validator.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/hash.h"
#include "common/printable.h"
#include "common/units.h"

namespace vramflow {

bool RangeSet::Add(uint64_t begin, uint64_t end) {
  if (begin >= end) return true;
  auto next = ranges_.lower_bound(begin);  // first range starting at or after begin
  if (next != ranges_.end() && next->first < end) return false;
  auto prev = next == ranges_.begin() ? ranges_.end() : std::prev(next);
  if (prev != ranges_.end() && prev->second > begin) return false;
  if (prev != ranges_.end() && prev->second == begin) {
    begin = prev->first;
    ranges_.erase(prev);
  }
  if (next != ranges_.end() && next->first == end) {
    end = next->second;
    ranges_.erase(next);
  }
  ranges_[begin] = end;
  return true;
}

bool RangeSet::FirstGap(uint64_t size, uint64_t* gap_begin, uint64_t* gap_end) const {
  uint64_t pos = 0;
  for (const auto& [b, e] : ranges_) {
    if (b > pos) {
      *gap_begin = pos;
      *gap_end = b;
      return true;
    }
    pos = e;
  }
  if (pos < size) {
    *gap_begin = pos;
    *gap_end = size;
    return true;
  }
  return false;
}

bool RangeSet::Contains(uint64_t value) const {
  auto next = ranges_.upper_bound(value);  // first range starting after value
  if (next == ranges_.begin()) return false;
  return std::prev(next)->second > value;
}

Status StreamValidator::ChargeRecords(int64_t bytes, const std::string& what) {
  if (bytes > 0 && records_ + static_cast<uint64_t>(bytes) > record_limit_)
    return Status::InvalidArgument("the stream needs more than the reader's record limit of " +
                                   FormatSize(record_limit_) +
                                   " (for object metadata, the byte ranges of chunks out "
                                   "of order, ids of ended objects and the index it rebuilds; " +
                                   FormatSize(records_) + " in use): " + what);
  records_ += static_cast<uint64_t>(bytes);  // wraps back for a refund
  return Status::Ok();
}

bool StreamValidator::AddRange(ObjectState& object, uint64_t begin, uint64_t end, Status* charge) {
  const size_t before = object.covered.range_count();
  if (!object.covered.Add(begin, end)) return false;
  const int64_t delta = static_cast<int64_t>(object.covered.range_count()) - static_cast<int64_t>(before);
  *charge = ChargeRecords(delta * static_cast<int64_t>(kRangeRecordBytes),
                          "object " + std::to_string(object.id) + " has " +
                              std::to_string(object.covered.range_count()) + " separate byte ranges");
  return true;
}

void StreamValidator::DropEndedObject() {
  if (just_ended_ == 0) return;
  auto it = objects_.find(just_ended_);
  if (it != objects_.end()) {
    const ObjectState& o = it->second;
    records_ -= kObjectRecordBytes + o.metadata_bytes + o.covered.range_count() * kRangeRecordBytes;
    objects_.erase(it);
  }
  const size_t before = ended_ids_.range_count();
  ended_ids_.Add(just_ended_, uint64_t{just_ended_} + 1);
  records_ += (ended_ids_.range_count() - before) * kRangeRecordBytes;  // checked at the next ObjectBegin
  just_ended_ = 0;
}

const ObjectState* StreamValidator::object(uint32_t id) const {
  auto it = objects_.find(id);
  return it == objects_.end() ? nullptr : &it->second;
}

std::string StreamValidator::Describe(const FrameHeader& h, uint64_t stream_offset) const {
  std::string s = "frame " + std::to_string(h.sequence) + " (" + FrameKindName(h.kind);
  auto kind = static_cast<FrameKind>(h.kind);
  if (kind != FrameKind::kStreamEnd && kind != FrameKind::kSeekIndex && kind != FrameKind::kBase) {
    s += ", object " + std::to_string(h.object_id);
    if (const ObjectState* o = object(h.object_id)) s += " " + Printable(o->metadata.name);
  }
  if (IsChunkKind(h.kind)) s += ", offset " + std::to_string(h.offset) + ", " + std::to_string(h.raw_size) + " bytes";
  return s + ") at stream offset " + std::to_string(stream_offset);
}

Result<ObjectState*> StreamValidator::OpenObject(const FrameHeader& h) {
  auto it = objects_.find(h.object_id);
  if (it == objects_.end() && ended_ids_.Contains(h.object_id))
    return Status::Corruption("refers to object " + std::to_string(h.object_id) + " after its end");
  if (it == objects_.end())
    return Status::Corruption("refers to object " + std::to_string(h.object_id) + ", which was never begun");
  if (it->second.ended) return Status::Corruption("refers to object " + std::to_string(h.object_id) + " after its end");
  return &it->second;
}

Status StreamValidator::CheckRange(ObjectState& object, const FrameHeader& h) {
  if (h.raw_size == 0) return Status::Corruption("chunk has zero length");
  const uint64_t limit = object.size == kUnknownObjectSize ? kMaxObjectSize : object.size;
  if (h.offset > limit || h.raw_size > limit - h.offset)
    return Status::Corruption("chunk [" + std::to_string(h.offset) + ", " + std::to_string(h.offset + h.raw_size) +
                              ") runs past the object size " + std::to_string(object.size));
  Status charged;
  if (!AddRange(object, h.offset, h.offset + h.raw_size, &charged))
    return Status::Corruption("chunk [" + std::to_string(h.offset) + ", " + std::to_string(h.offset + h.raw_size) +
                              ") overlaps a range already received");
  return charged;
}

namespace {

// The codec and transform of a DATA or BASE_DELTA frame.
Status CheckCodec(const FrameHeader& h) {
  if (!IsKnownCodec(h.codec)) return Status::Corruption("unknown codec id " + std::to_string(h.codec));
  if (!IsKnownTransform(h.transform)) return Status::Corruption("unknown transform id " + std::to_string(h.transform));
  bool planar = h.codec == static_cast<uint8_t>(CodecId::kPlanar);
  if (planar != (h.transform != 0))
    return Status::Corruption("codec " + CodecName(static_cast<CodecId>(h.codec)) + " does not go with transform " +
                              TransformName(static_cast<TransformId>(h.transform)));
  return Status::Ok();
}

Status CheckChunkLimit(const FrameHeader& h) {
  if (h.raw_size > kMaxChunkSize)
    return Status::Corruption("chunk of " + std::to_string(h.raw_size) + " bytes exceeds the format limit of " +
                              std::to_string(kMaxChunkSize));
  return Status::Ok();
}

}  // namespace

Status StreamValidator::CheckHeader(const FrameHeader& h, uint64_t stream_offset, FrameAction* action) {
  *action = FrameAction::kProcess;
  DropEndedObject();
  uint32_t block_before = 0;
  VF_RETURN_IF_ERROR(CheckPlace(h, stream_offset, &block_before));
  auto kind = static_cast<FrameKind>(h.kind);
  bool known = kind >= FrameKind::kObjectBegin && kind <= FrameKind::kDigestBlock;
  if (!known) {
    if (h.flags & kFlagSkippable) {
      ++totals_.frame_count;
      *action = FrameAction::kSkip;
      return Status::Ok();
    }
    return Status::Corruption("unknown frame kind " + std::to_string(h.kind));
  }
  const uint32_t flags_expected = kind == FrameKind::kDigestBlock ? kFlagSkippable : 0;
  if (h.flags != flags_expected)
    return Status::Corruption("flags " + std::to_string(h.flags) + " are not valid on this frame kind");
  bool has_codec = kind == FrameKind::kData || kind == FrameKind::kBaseDelta;
  if (!has_codec && (h.codec || h.transform))
    return Status::Corruption("codec/transform fields must be zero on " + FrameKindName(h.kind));
  ++totals_.frame_count;

  switch (kind) {
    case FrameKind::kObjectBegin:
      return CheckObjectBeginHeader(h);
    case FrameKind::kData:
      return CheckDataHeader(h, stream_offset);
    case FrameKind::kDedupRef:
      return CheckDedupRefHeader(h);
    case FrameKind::kBase:
      return CheckBaseHeader(h);
    case FrameKind::kBaseRef:
    case FrameKind::kBaseDelta:
      return CheckBaseChunkHeader(h);
    case FrameKind::kDigestBlock:
      return CheckDigestBlockHeader(h, block_before);
    case FrameKind::kZeroRun:
      return CheckZeroRunHeader(h, stream_offset);
    case FrameKind::kObjectEnd:
      return CheckObjectEndHeader(h, stream_offset);
    case FrameKind::kStreamEnd:
      return CheckStreamEndHeader(h, stream_offset);
    case FrameKind::kSeekIndex:
      return CheckSeekIndexHeader(h, action);
    case FrameKind::kIndexBlock:
      return CheckIndexBlockHeader(h);
    default:
      break;
  }
  return Status::Internal("unhandled frame kind");
}

Status StreamValidator::CheckPlace(const FrameHeader& h, uint64_t stream_offset, uint32_t* block_before) {
  if (complete_) return Status::Corruption("frame after STREAM_END");
  if (h.sequence != next_sequence_)
    return Status::Corruption("frame sequence number " + std::to_string(h.sequence) + ", expected " +
                              std::to_string(next_sequence_) + " (a frame is missing, repeated or reordered)");
  ++next_sequence_;
  frame_offset_ = stream_offset;
  auto kind = static_cast<FrameKind>(h.kind);
  if (index_seen_ && kind != FrameKind::kStreamEnd)
    return Status::Corruption("frame after SEEK_INDEX: the index must be the last frame before STREAM_END");
  // The frame after an INDEX_BLOCK decides, the first time, whether the
  // stream has DIGEST_BLOCKs; after that every INDEX_BLOCK has one or none does.
  *block_before = std::exchange(block_just_listed_, 0);
  if (kind == FrameKind::kDigestBlock) {
    if (*block_before == 0) return Status::Corruption("DIGEST_BLOCK that does not follow an INDEX_BLOCK");
    if (digests_ == false)
      return Status::Corruption("DIGEST_BLOCK after an INDEX_BLOCK, though the stream's first INDEX_BLOCK had none");
    digests_ = true;
  } else if (*block_before != 0) {
    if (digests_ == true)
      return Status::Corruption("no DIGEST_BLOCK after the INDEX_BLOCK of object " + std::to_string(*block_before) +
                                ", though the stream's other INDEX_BLOCKs have one");
    digests_ = false;
  }
  if ((stream_flags_ & kStreamFlagBase) && h.sequence == 0 && kind != FrameKind::kBase)
    return Status::Corruption("the stream header announces a base, but the first frame is " + FrameKindName(h.kind) +
                              ", not a BASE frame");
  return Status::Ok();
}

Status StreamValidator::CheckObjectBeginHeader(const FrameHeader& h) {
  if (h.object_id == 0) return Status::Corruption("object id 0 is reserved");
  if (objects_.count(h.object_id) || ended_ids_.Contains(h.object_id))
    return Status::Corruption("object id " + std::to_string(h.object_id) + " begun twice");
  if (h.offset != 0) return Status::Corruption("OBJECT_BEGIN with a non-zero offset");
  if (h.raw_size != kUnknownObjectSize && h.raw_size > kMaxObjectSize)
    return Status::Corruption("object size " + std::to_string(h.raw_size) + " exceeds the format limit");
  if (h.payload_size == 0 || h.payload_size > kMaxMetadataSize)
    return Status::Corruption("object metadata size " + std::to_string(h.payload_size) + " is out of range");
  // Charged before the payload is read: the metadata while the object is
  // open, and with index blocks its index entry until the end.
  const uint64_t entry = index_blocks() ? kSeekIndexObjectEntryBytes + h.payload_size : 0;
  VF_RETURN_IF_ERROR(
      ChargeRecords(static_cast<int64_t>(entry), "the index entry of object " + std::to_string(h.object_id)));
  VF_RETURN_IF_ERROR(ChargeRecords(
      static_cast<int64_t>(kObjectRecordBytes + h.payload_size),
      "object " + std::to_string(h.object_id) + " and its " + std::to_string(h.payload_size) + " bytes of metadata"));
  ObjectState& o = objects_[h.object_id];
  o.id = h.object_id;
  o.size = h.raw_size;
  o.metadata_bytes = h.payload_size;
  ++open_objects_;
  ++totals_.object_count;
  return Status::Ok();
}

Status StreamValidator::CheckDataHeader(const FrameHeader& h, uint64_t stream_offset) {
  VF_ASSIGN_OR_RETURN(ObjectState * o, OpenObject(h));
  VF_RETURN_IF_ERROR(CheckCodec(h));
  VF_RETURN_IF_ERROR(CheckChunkLimit(h));
  if (h.payload_size > h.raw_size)
    return Status::Corruption("payload of " + std::to_string(h.payload_size) + " bytes is larger than the " +
                              std::to_string(h.raw_size) + " raw bytes it encodes");
  if (h.codec == static_cast<uint8_t>(CodecId::kRaw) && h.payload_size != h.raw_size)
    return Status::Corruption("raw payload of " + std::to_string(h.payload_size) + " bytes for " +
                              std::to_string(h.raw_size) + " raw bytes");
  VF_RETURN_IF_ERROR(CheckRange(*o, h));
  o->digest += ObjectDigestTerm(h.offset, h.raw_size, h.raw_hash);
  if (stream_flags_ & kStreamFlagDedup) data_frames_.Add({h.object_id, h.offset}, {h.raw_size, h.raw_hash});
  return ListChunk(h.object_id, {stream_offset, h.offset, h.raw_size, h.payload_size, FrameKind::kData});
}

Status StreamValidator::CheckDedupRefHeader(const FrameHeader& h) {
  if (!(stream_flags_ & kStreamFlagDedup))
    return Status::Corruption("DEDUP_REF in a stream whose header does not announce dedup");
  VF_ASSIGN_OR_RETURN(ObjectState * o, OpenObject(h));
  if (h.payload_size != kDedupRefPayloadSize)
    return Status::Corruption("DEDUP_REF payload is " + std::to_string(h.payload_size) + " bytes, expected 32");
  if (h.raw_size > kMaxChunkSize) return Status::Corruption("DEDUP_REF larger than the chunk limit");
  VF_RETURN_IF_ERROR(CheckRange(*o, h));
  o->digest += ObjectDigestTerm(h.offset, h.raw_size, h.raw_hash);
  return Status::Ok();
}

Status StreamValidator::CheckBaseHeader(const FrameHeader& h) {
  if (!(stream_flags_ & kStreamFlagBase))
    return Status::Corruption("BASE frame in a stream whose header does not announce a base");
  if (h.sequence != 0) return Status::Corruption("BASE frame that is not the stream's first frame");
  if (h.object_id != 0 || h.offset != 0 || h.raw_size != 0)
    return Status::Corruption("BASE frame with object, offset or size fields set");
  if (h.payload_size < kBaseDescriptorFixedSize || h.payload_size > kBaseDescriptorFixedSize + kMaxBaseLocationBytes)
    return Status::Corruption("BASE payload is " + std::to_string(h.payload_size) + " bytes, not 56 .. 4152");
  return Status::Ok();
}

// BASE_REF and BASE_DELTA.
Status StreamValidator::CheckBaseChunkHeader(const FrameHeader& h) {
  auto kind = static_cast<FrameKind>(h.kind);
  if (!(stream_flags_ & kStreamFlagBase))
    return Status::Corruption(FrameKindName(h.kind) + " in a stream whose header does not announce a base");
  VF_ASSIGN_OR_RETURN(ObjectState * o, OpenObject(h));
  VF_RETURN_IF_ERROR(CheckChunkLimit(h));
  if (kind == FrameKind::kBaseRef && h.payload_size != kBaseChunkRefSize)
    return Status::Corruption("BASE_REF payload is " + std::to_string(h.payload_size) + " bytes, expected 48");
  if (kind == FrameKind::kBaseDelta) {
    VF_RETURN_IF_ERROR(CheckCodec(h));
    if (h.payload_size <= kBaseChunkRefSize || h.payload_size - kBaseChunkRefSize > h.raw_size)
      return Status::Corruption("BASE_DELTA payload of " + std::to_string(h.payload_size) +
                                " bytes is not 49 .. 48 + " + std::to_string(h.raw_size));
    if (h.codec == static_cast<uint8_t>(CodecId::kRaw) && h.payload_size != kBaseChunkRefSize + h.raw_size)
      return Status::Corruption("raw BASE_DELTA payload of " + std::to_string(h.payload_size) + " bytes for " +
                                std::to_string(h.raw_size) + " raw bytes");
  }
  VF_RETURN_IF_ERROR(CheckRange(*o, h));
  o->digest += ObjectDigestTerm(h.offset, h.raw_size, h.raw_hash);
  return Status::Ok();  // listed in Apply, with the base chunk it names
}

Status StreamValidator::CheckDigestBlockHeader(const FrameHeader& h, uint32_t block_before) {
  if (h.offset != 0 || h.raw_size != 0) return Status::Corruption("DIGEST_BLOCK with offset or size fields set");
  if (h.object_id != block_before)
    return Status::Corruption("DIGEST_BLOCK of object " + std::to_string(h.object_id) +
                              " after the INDEX_BLOCK of object " + std::to_string(block_before));
  if (h.payload_size != last_block_records_.size() * kDigestEntrySize)
    return Status::Corruption("DIGEST_BLOCK payload is " + std::to_string(h.payload_size) + " bytes; the " +
                              std::to_string(last_block_records_.size()) + " records of its INDEX_BLOCK make " +
                              std::to_string(last_block_records_.size() * kDigestEntrySize));
  return Status::Ok();
}

Status StreamValidator::CheckZeroRunHeader(const FrameHeader& h, uint64_t stream_offset) {
  VF_ASSIGN_OR_RETURN(ObjectState * o, OpenObject(h));
  if (h.payload_size != 0) return Status::Corruption("ZERO_RUN with a payload");
  if (h.raw_hash != 0) return Status::Corruption("ZERO_RUN with a non-zero hash field");
  VF_RETURN_IF_ERROR(CheckRange(*o, h));
  o->digest += ObjectDigestTerm(h.offset, h.raw_size, 0);
  return ListChunk(h.object_id, {stream_offset, h.offset, h.raw_size, 0, FrameKind::kZeroRun});
}

Status StreamValidator::CheckObjectEndHeader(const FrameHeader& h, uint64_t stream_offset) {
  VF_ASSIGN_OR_RETURN(ObjectState * o, OpenObject(h));
  if (h.payload_size != 0 || h.offset != 0) return Status::Corruption("OBJECT_END with a payload or offset");
  if (o->size == kUnknownObjectSize) {
    if (h.raw_size > kMaxObjectSize)
      return Status::Corruption("OBJECT_END size " + std::to_string(h.raw_size) + " exceeds the format limit");
    o->size = h.raw_size;
  }
  if (h.raw_size != o->size)
    return Status::Corruption("OBJECT_END gives size " + std::to_string(h.raw_size) + ", OBJECT_BEGIN gave " +
                              std::to_string(o->size));
  if (o->covered.End() > o->size)
    return Status::Corruption("a chunk ends at " + std::to_string(o->covered.End()) + ", past the object size " +
                              std::to_string(o->size));
  uint64_t gap_begin, gap_end;
  if (o->covered.FirstGap(o->size, &gap_begin, &gap_end))
    return Status::Corruption("object ends with bytes [" + std::to_string(gap_begin) + ", " + std::to_string(gap_end) +
                              ") missing");
  if (h.raw_hash != o->digest)
    return Status::Corruption("object digest mismatch (stored " + HexHash(h.raw_hash) + ", computed " +
                              HexHash(o->digest) + ")");
  if (index_blocks() && !index_.Unlisted(h.object_id).empty())
    return Status::Corruption("object ends with " + std::to_string(index_.Unlisted(h.object_id).size()) +
                              " chunk frames that no INDEX_BLOCK lists");
  o->ended = true;
  just_ended_ = h.object_id;
  --open_objects_;
  totals_.raw_bytes += o->size;
  if (index_blocks()) index_.ObjectEnd(h.object_id, o->size, o->digest, stream_offset);
  return Status::Ok();
}

Status StreamValidator::CheckStreamEndHeader(const FrameHeader& h, uint64_t stream_offset) {
  if (h.object_id != 0 || h.offset != 0 || h.raw_size != 0)
    return Status::Corruption("STREAM_END with object, offset or size fields set");
  if (h.payload_size != kStreamEndPayloadSize)
    return Status::Corruption("STREAM_END payload is " + std::to_string(h.payload_size) + " bytes, expected 32");
  if (open_objects_ != 0) {
    for (const auto& [id, o] : objects_)
      if (!o.ended)
        return Status::Corruption("stream ends while object " + std::to_string(id) + " " + Printable(o.metadata.name) +
                                  " is still open");
  }
  if (indexed() && !index_seen_)
    return Status::Corruption("the stream header announces a seek index, but the stream ends without one");
  totals_.frame_count -= 1;  // totals count the frames before STREAM_END
  totals_.stream_bytes = stream_offset;
  return Status::Ok();
}

Status StreamValidator::CheckSeekIndexHeader(const FrameHeader& h, FrameAction* action) {
  if (!indexed()) return Status::Corruption("SEEK_INDEX in a stream whose header does not announce one");
  if (h.object_id != 0 || h.offset != 0 || h.raw_size != 0)
    return Status::Corruption("SEEK_INDEX with object, offset or size fields set");
  for (const auto& [id, o] : objects_)
    if (!o.ended)
      return Status::Corruption("SEEK_INDEX while object " + std::to_string(id) + " " + Printable(o.metadata.name) +
                                " is still open: the index must come after every object");
  index_seen_ = true;
  if (!index_blocks()) {
    // The version 1 index of an earlier writer: as large as 48 bytes per
    // chunk, and not used by this reader, so it is passed over unread.
    *action = FrameAction::kSkip;
    return Status::Ok();
  }
  // The frames fix the index's size, so a wrong size is caught before
  // the payload is read.
  expected_index_ = index_.Build();
  Result<std::vector<uint8_t>> expected = EncodeSeekIndex(expected_index_);
  if (!expected.ok()) return expected.status();
  if (h.payload_size != expected->size())
    return Status::Corruption("SEEK_INDEX payload is " + std::to_string(h.payload_size) +
                              " bytes; the frames of this stream make an index of " + std::to_string(expected->size()));
  // The entries are charged already; the encoding and the stored payload
  // beside it are not.
  VF_RETURN_IF_ERROR(ChargeRecords(2 * static_cast<int64_t>(h.payload_size), "the SEEK_INDEX frame"));
  expected_index_bytes_ = std::move(*expected);
  return Status::Ok();
}

Status StreamValidator::CheckIndexBlockHeader(const FrameHeader& h) {
  if (!index_blocks()) return Status::Corruption("INDEX_BLOCK in a stream whose header does not announce index blocks");
  if (h.offset != 0 || h.raw_size != 0) return Status::Corruption("INDEX_BLOCK with offset or size fields set");
  VF_RETURN_IF_ERROR(OpenObject(h).status());
  // Its records are the object's chunk frames since its last block, so
  // the frames fix the payload size too.
  const size_t records = index_.Unlisted(h.object_id).size();
  if (records == 0)
    return Status::Corruption("INDEX_BLOCK of object " + std::to_string(h.object_id) +
                              ", which has no chunk frames since its last one");
  if (h.payload_size != records * kChunkRecordSize)
    return Status::Corruption("INDEX_BLOCK payload is " + std::to_string(h.payload_size) + " bytes; the " +
                              std::to_string(records) + " chunk frames it must list make " +
                              std::to_string(records * kChunkRecordSize));
  return Status::Ok();
}

Status StreamValidator::Apply(const FrameHeader& h, std::span<const uint8_t> payload, DedupRef* ref_out,
                              BaseChunkRef* base_ref_out) {
  auto kind = static_cast<FrameKind>(h.kind);
  if (kind == FrameKind::kBase) {
    if (Hash64(payload.data(), payload.size()) != h.raw_hash) return Status::Corruption("BASE payload hash mismatch");
    VF_RETURN_IF_ERROR(DecodeBaseDescriptor(payload, &base_));
    base_seen_ = true;
    return Status::Ok();
  }
  if (kind == FrameKind::kBaseRef || kind == FrameKind::kBaseDelta) {
    if (payload.size() < kBaseChunkRefSize) return Status::Internal("base reference payload not read");
    BaseChunkRef ref;
    VF_RETURN_IF_ERROR(DecodeBaseChunkRef(payload.data(), &ref));
    if (ref.base_object_id == 0) return Status::Corruption(FrameKindName(h.kind) + " names base object 0");
    if (base_ref_out) *base_ref_out = ref;
    return ListChunk(h.object_id,
                     {frame_offset_, h.offset, h.raw_size, h.payload_size, kind, ref.base_object_id, ref.base_offset});
  }
  if (kind == FrameKind::kDigestBlock) {
    if (Hash64(payload.data(), payload.size()) != h.raw_hash)
      return Status::Corruption("DIGEST_BLOCK payload hash mismatch");
    static const Sha256Digest kZero{};
    for (size_t i = 0; i < last_block_records_.size(); ++i)
      if (last_block_records_[i].kind == FrameKind::kZeroRun &&
          std::memcmp(payload.data() + i * kDigestEntrySize, kZero.data(), kDigestEntrySize) != 0)
        return Status::Corruption("DIGEST_BLOCK entry " + std::to_string(i) + " is for a ZERO_RUN and must be zero");
    return Status::Ok();
  }
  if (kind == FrameKind::kDedupRef) {
    DedupRef ref;
    VF_RETURN_IF_ERROR(DecodeDedupRef(payload.data(), &ref));
    const std::pair<uint64_t, uint64_t>* source = data_frames_.Find({ref.source_object_id, ref.source_offset});
    if (!source) {
      const std::string named = "DEDUP_REF names object " + std::to_string(ref.source_object_id) + " offset " +
                                std::to_string(ref.source_offset);
      if (data_frames_.capacity() == 0) return Status::Corruption(named + ", where no earlier DATA frame is");
      return Status::Corruption(named + ", which is not one of the last " + std::to_string(data_frames_.capacity()) +
                                " DATA frames (the stream's dedup window)");
    }
    if (source->first != h.raw_size || source->second != h.raw_hash)
      return Status::Corruption("DEDUP_REF size or hash differs from the DATA frame it names");
    if (ref_out) *ref_out = ref;
    return ListChunk(h.object_id, {frame_offset_, h.offset, h.raw_size, h.payload_size, FrameKind::kDedupRef,
                                   ref.source_object_id, ref.source_offset});
  }
  if (kind == FrameKind::kObjectBegin) {
    if (Hash64(payload.data(), payload.size()) != h.raw_hash)
      return Status::Corruption("object metadata hash mismatch");
    ObjectMetadata& metadata = objects_[h.object_id].metadata;
    VF_RETURN_IF_ERROR(DecodeObjectMetadata(payload, &metadata));
    if (index_blocks()) index_.ObjectBegin(h.object_id, metadata, frame_offset_, h.payload_size);
    return Status::Ok();
  }
  if (kind == FrameKind::kIndexBlock) {
    if (Hash64(payload.data(), payload.size()) != h.raw_hash)
      return Status::Corruption("INDEX_BLOCK payload hash mismatch");
    VF_RETURN_IF_ERROR(CheckIndexBlock(h.object_id, payload));
    VF_RETURN_IF_ERROR(
        ChargeRecords(kSeekIndexBlockRefBytes, "the index entry of object " + std::to_string(h.object_id)));
    std::span<const SeekIndexChunk> listed = index_.Unlisted(h.object_id);
    last_block_records_.assign(listed.begin(), listed.end());
    block_just_listed_ = h.object_id;
    index_.BlockWritten(h.object_id, frame_offset_);
    return Status::Ok();
  }
  if (kind == FrameKind::kSeekIndex) {
    if (Hash64(payload.data(), payload.size()) != h.raw_hash)
      return Status::Corruption("SEEK_INDEX payload hash mismatch");
    return CheckStoredIndex(payload);
  }
  if (kind == FrameKind::kStreamEnd) {
    if (Hash64(payload.data(), payload.size()) != h.raw_hash)
      return Status::Corruption("STREAM_END payload hash mismatch");
    StreamTotals stored = DecodeStreamTotals(payload.data());
    if (!(stored == totals_))
      return Status::Corruption(
          "stream totals do not match what was read: stored " + std::to_string(stored.object_count) + " objects / " +
          std::to_string(stored.frame_count) + " frames / " + std::to_string(stored.raw_bytes) + " raw bytes / " +
          std::to_string(stored.stream_bytes) + " stream bytes, read " + std::to_string(totals_.object_count) + " / " +
          std::to_string(totals_.frame_count) + " / " + std::to_string(totals_.raw_bytes) + " / " +
          std::to_string(totals_.stream_bytes));
    complete_ = true;
  }
  return Status::Ok();
}

Status StreamValidator::ListChunk(uint32_t object_id, const SeekIndexChunk& chunk) {
  if (!index_blocks()) return Status::Ok();
  index_.Chunk(object_id, chunk);
  if (index_.unlisted() > kMaxUnlistedChunks)
    return Status::Corruption("more than " + std::to_string(kMaxUnlistedChunks) +
                              " chunk frames that no INDEX_BLOCK lists yet");
  return Status::Ok();
}

// Compares an INDEX_BLOCK with the chunk frames it must list, and names the
// first difference.
Status StreamValidator::CheckIndexBlock(uint32_t object_id, std::span<const uint8_t> payload) const {
  std::span<const SeekIndexChunk> expected = index_.Unlisted(object_id);
  if (std::ranges::equal(payload, EncodeIndexBlock(expected))) return Status::Ok();
  Result<std::vector<SeekIndexChunk>> stored = DecodeIndexBlock(payload);
  if (!stored.ok()) return stored.status();
  for (size_t i = 0; i < expected.size(); ++i) {
    const SeekIndexChunk& s = (*stored)[i];
    const SeekIndexChunk& e = expected[i];
    if (s == e) continue;
    return Status::Corruption(
        "INDEX_BLOCK record " + std::to_string(i) + " says a " + FrameKindName(static_cast<uint8_t>(s.kind)) +
        " frame at stream offset " + std::to_string(s.stream_offset) + " for object offset " +
        std::to_string(s.object_offset) + "; the stream has a " + FrameKindName(static_cast<uint8_t>(e.kind)) + " at " +
        std::to_string(e.stream_offset) + " for object offset " + std::to_string(e.object_offset) +
        " (or they differ in sizes or source)");
  }
  return Status::Corruption("INDEX_BLOCK differs from the frames it lists");
}

// Compares the stored index with the one the frames make, and names the
// first difference.
Status StreamValidator::CheckStoredIndex(std::span<const uint8_t> payload) const {
  if (std::ranges::equal(payload, expected_index_bytes_)) return Status::Ok();
  Result<SeekIndex> stored = DecodeSeekIndex(payload);
  if (!stored.ok()) return stored.status();
  const SeekIndex& expected = expected_index_;
  if (stored->objects.size() != expected.objects.size())
    return Status::Corruption("the seek index lists " + std::to_string(stored->objects.size()) +
                              " objects; the stream has " + std::to_string(expected.objects.size()));
  for (size_t i = 0; i < expected.objects.size(); ++i) {
    const SeekIndexObject& s = stored->objects[i];
    const SeekIndexObject& e = expected.objects[i];
    if (s == e) continue;
    std::string what = "the seek index entry of object " + std::to_string(e.id) + " " + Printable(e.metadata.name);
    if (s.id != e.id || s.begin_offset != e.begin_offset || s.end_offset != e.end_offset)
      return Status::Corruption(what + " says object " + std::to_string(s.id) + " with frames at stream offsets " +
                                std::to_string(s.begin_offset) + ".." + std::to_string(s.end_offset) +
                                "; the stream has them at " + std::to_string(e.begin_offset) + ".." +
                                std::to_string(e.end_offset));
    if (s.blocks.size() != e.blocks.size())
      return Status::Corruption(what + " lists " + std::to_string(s.blocks.size()) +
                                " INDEX_BLOCK frames; the stream has " + std::to_string(e.blocks.size()));
    for (size_t b = 0; b < e.blocks.size(); ++b)
      if (!(s.blocks[b] == e.blocks[b]))
        return Status::Corruption(what + ": block " + std::to_string(b) + " is said to be at stream offset " +
                                  std::to_string(s.blocks[b].stream_offset) + " with " +
                                  std::to_string(s.blocks[b].chunk_count) + " records; the stream has it at " +
                                  std::to_string(e.blocks[b].stream_offset) + " with " +
                                  std::to_string(e.blocks[b].chunk_count));
    return Status::Corruption(what + " differs from the object (name, attributes, size, digest or chunk count)");
  }
  return Status::Corruption("the seek index differs from the frames");
}

}  // namespace vramflow
