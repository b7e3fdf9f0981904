// SPDX-License-Identifier: MIT
#include "streamer/format/stream_writer.h"

#include <algorithm>

#include "common/hash.h"

namespace vramflow {

StreamWriter::StreamWriter(ByteSink* sink, StreamHeader header) : sink_(sink), header_(std::move(header)) {
  // An index is always written in blocks; the version 1 layout is only read.
  if (header_.flags & kStreamFlagSeekIndex) header_.flags |= kStreamFlagIndexBlocks;
}

Status StreamWriter::Fail(Status status) {
  if (failed_.ok()) failed_ = status;
  return status;
}

Status StreamWriter::Start() {
  if (started_) return Status::Internal("stream already started");
  started_ = true;
  uint8_t buf[kStreamHeaderSize];
  EncodeStreamHeader(header_, buf);
  Status s = sink_->Write(buf);
  if (!s.ok()) return Fail(s);
  bytes_written_ += sizeof(buf);
  if (!(header_.flags & kStreamFlagBase)) return Status::Ok();
  Result<std::vector<uint8_t>> payload = EncodeBaseDescriptor(base_);
  if (!payload.ok()) return Fail(payload.status());
  FrameHeader h;
  h.kind = static_cast<uint8_t>(FrameKind::kBase);
  h.raw_hash = Hash64(payload->data(), payload->size());
  return WriteFrame(h, *payload);
}

Status StreamWriter::WriteFrame(FrameHeader header, std::span<const uint8_t> payload, uint64_t* lent,
                                std::span<const uint8_t> more) {
  header.sequence = sequence_++;
  header.payload_size = static_cast<uint32_t>(payload.size() + more.size());
  uint8_t buf[kFrameHeaderSize];
  EncodeFrameHeader(header, buf);
  Status s = sink_->Write(buf);
  if (s.ok() && !payload.empty()) {
    if (lent) {
      Result<uint64_t> ticket = sink_->WriteBorrowed(payload);
      s = ticket.status();
      if (ticket.ok()) *lent = *ticket;
    } else {
      s = sink_->Write(payload);
    }
  }
  if (s.ok() && !more.empty()) s = sink_->Write(more);
  if (!s.ok()) return Fail(s.WithContext("writing frame " + std::to_string(header.sequence)));
  bytes_written_ += sizeof(buf) + header.payload_size;
  ++totals_.frame_count;
  return Status::Ok();
}

Status StreamWriter::NeedDigest(const Sha256Digest* sha256, const char* what) const {
  if (sha256 || !chunk_digests()) return Status::Ok();
  return Status::Internal(std::string(what) + " without its SHA-256 in a stream with chunk digests");
}

Status StreamWriter::ListChunk(uint32_t object_id, const SeekIndexChunk& chunk, const Sha256Digest& sha256) {
  if (!indexed()) return Status::Ok();
  index_.Chunk(object_id, chunk);
  if (chunk_digests()) unlisted_digests_[object_id].push_back(sha256);
  if (index_.unlisted() < kMaxUnlistedChunks) return Status::Ok();
  return WriteIndexBlock(index_.FullestObject());
}

Status StreamWriter::WriteIndexBlock(uint32_t object_id) {
  std::span<const SeekIndexChunk> chunks = index_.Unlisted(object_id);
  if (chunks.empty()) return Status::Ok();
  std::vector<uint8_t> payload = EncodeIndexBlock(chunks);
  FrameHeader h;
  h.kind = static_cast<uint8_t>(FrameKind::kIndexBlock);
  h.object_id = object_id;
  h.raw_hash = Hash64(payload.data(), payload.size());
  const uint64_t at = bytes_written_;
  VF_RETURN_IF_ERROR(WriteFrame(h, payload));
  index_.BlockWritten(object_id, at);
  if (!chunk_digests()) return Status::Ok();
  // Right after its INDEX_BLOCK: one SHA-256 per record, in the same order.
  std::vector<Sha256Digest>& digests = unlisted_digests_[object_id];
  if (digests.size() != chunks.size())
    return Fail(Status::Internal("index block of " + std::to_string(chunks.size()) + " records but " +
                                 std::to_string(digests.size()) + " digests"));
  std::vector<uint8_t> entries(digests.size() * kDigestEntrySize);
  for (size_t i = 0; i < digests.size(); ++i)
    std::copy(digests[i].begin(), digests[i].end(), entries.begin() + i * kDigestEntrySize);
  unlisted_digests_.erase(object_id);
  FrameHeader d;
  d.kind = static_cast<uint8_t>(FrameKind::kDigestBlock);
  d.flags = kFlagSkippable;
  d.object_id = object_id;
  d.raw_hash = Hash64(entries.data(), entries.size());
  VF_RETURN_IF_ERROR(WriteFrame(d, entries));
  ++stats_.digest_blocks;
  return Status::Ok();
}

Result<uint32_t> StreamWriter::BeginObject(const ObjectMetadata& metadata, uint64_t size) {
  VF_RETURN_IF_ERROR(failed_);
  if (!started_ || finished_) return Status::Internal("BeginObject outside an open stream");
  if (next_object_id_ == 0) return Status::InvalidArgument("too many objects in one stream");
  if (size != kUnknownObjectSize && size > kMaxObjectSize)
    return Status::InvalidArgument("object '" + metadata.name + "' is larger than the format allows");
  VF_ASSIGN_OR_RETURN(std::vector<uint8_t> payload, EncodeObjectMetadata(metadata));
  uint32_t id = next_object_id_++;
  FrameHeader h;
  h.kind = static_cast<uint8_t>(FrameKind::kObjectBegin);
  h.object_id = id;
  h.raw_size = size;
  h.raw_hash = Hash64(payload.data(), payload.size());
  const uint64_t at = bytes_written_;
  VF_RETURN_IF_ERROR(WriteFrame(h, payload));
  if (indexed()) index_.ObjectBegin(id, metadata, at, static_cast<uint32_t>(payload.size()));
  OpenObject& object = open_[id];
  object.name = metadata.name;
  object.size = size;
  ++totals_.object_count;
  return id;
}

Status StreamWriter::FlushZeroRun(uint32_t object_id, OpenObject& object) {
  if (object.pending_zero_size == 0) return Status::Ok();
  FrameHeader h;
  h.kind = static_cast<uint8_t>(FrameKind::kZeroRun);
  h.object_id = object_id;
  h.offset = object.pending_zero_offset;
  h.raw_size = object.pending_zero_size;
  object.digest += ObjectDigestTerm(h.offset, h.raw_size, 0);
  ++stats_.zero_frames;
  stats_.zero_bytes += h.raw_size;
  object.pending_zero_size = 0;
  const uint64_t at = bytes_written_;
  VF_RETURN_IF_ERROR(WriteFrame(h, {}));
  return ListChunk(object_id, {at, h.offset, h.raw_size, 0, FrameKind::kZeroRun});
}

Result<StreamWriter::OpenObject*> StreamWriter::PlaceChunk(uint32_t object_id, uint64_t offset, uint64_t raw_size,
                                                           const char* what) {
  VF_RETURN_IF_ERROR(failed_);
  auto it = open_.find(object_id);
  if (it == open_.end())
    return Status::Internal(std::string(what) + " for object " + std::to_string(object_id) + " that is not open");
  OpenObject& object = it->second;
  // An object of unknown size takes its chunks in order, up to the format's
  // object size limit.
  const uint64_t limit = object.size == kUnknownObjectSize ? kMaxObjectSize : object.size;
  if (object.size == kUnknownObjectSize && offset != object.covered)
    return Status::Internal("chunks of an object of unknown size must come in order");
  if (raw_size == 0 || raw_size > kMaxChunkSize || offset > limit || raw_size > limit - offset)
    return Status::Internal(std::string(what) + " [" + std::to_string(offset) + ", +" + std::to_string(raw_size) +
                            ") does not fit object '" + object.name + "'");
  object.covered += raw_size;
  return &object;
}

Status StreamWriter::AddChunk(uint32_t object_id, uint64_t offset, uint64_t raw_size, const EncodedChunk& chunk,
                              const Sha256Digest* sha256, uint64_t* lent) {
  if (lent) *lent = 0;
  if (!chunk.zero_run) VF_RETURN_IF_ERROR(NeedDigest(sha256, "chunk"));
  VF_ASSIGN_OR_RETURN(OpenObject * placed, PlaceChunk(object_id, offset, raw_size, "chunk"));
  OpenObject& object = *placed;
  if (chunk.zero_run) {
    if (object.pending_zero_size && object.pending_zero_offset + object.pending_zero_size == offset) {
      object.pending_zero_size += raw_size;
      return Status::Ok();
    }
    VF_RETURN_IF_ERROR(FlushZeroRun(object_id, object));
    object.pending_zero_offset = offset;
    object.pending_zero_size = raw_size;
    return Status::Ok();
  }
  VF_RETURN_IF_ERROR(FlushZeroRun(object_id, object));
  FrameHeader h;
  h.kind = static_cast<uint8_t>(FrameKind::kData);
  h.codec = static_cast<uint8_t>(chunk.codec);
  h.transform = static_cast<uint8_t>(chunk.transform);
  h.object_id = object_id;
  h.offset = offset;
  h.raw_size = raw_size;
  h.raw_hash = chunk.raw_hash;
  object.digest += ObjectDigestTerm(offset, raw_size, chunk.raw_hash);
  ++stats_.data_frames;
  stats_.stored_payload_bytes += chunk.payload.size();
  const uint64_t at = bytes_written_;
  VF_RETURN_IF_ERROR(WriteFrame(h, chunk.payload, lent));
  return ListChunk(object_id, {at, offset, raw_size, static_cast<uint32_t>(chunk.payload.size()), FrameKind::kData},
                   sha256 ? *sha256 : Sha256Digest{});
}

Status StreamWriter::AddRefFrame(uint32_t object_id, uint64_t offset, uint64_t raw_size, uint64_t raw_hash,
                                 const RefFrame& frame) {
  VF_ASSIGN_OR_RETURN(OpenObject * placed, PlaceChunk(object_id, offset, raw_size, frame.what));
  OpenObject& object = *placed;
  VF_RETURN_IF_ERROR(FlushZeroRun(object_id, object));
  FrameHeader h;
  h.kind = static_cast<uint8_t>(frame.kind);
  std::span<const uint8_t> delta;
  if (frame.delta) {
    h.codec = static_cast<uint8_t>(frame.delta->codec);
    h.transform = static_cast<uint8_t>(frame.delta->transform);
    delta = frame.delta->payload;
  }
  h.object_id = object_id;
  h.offset = offset;
  h.raw_size = raw_size;
  h.raw_hash = raw_hash;
  const uint64_t at = bytes_written_;
  VF_RETURN_IF_ERROR(WriteFrame(h, frame.ref, nullptr, delta));
  object.digest += ObjectDigestTerm(offset, raw_size, raw_hash);
  switch (frame.kind) {
    case FrameKind::kDedupRef:
      ++stats_.dedup_frames;
      stats_.dedup_bytes += raw_size;
      break;
    case FrameKind::kBaseRef:
      ++stats_.base_ref_frames;
      stats_.base_ref_bytes += raw_size;
      break;
    default:
      ++stats_.base_delta_frames;
      stats_.base_delta_bytes += raw_size;
      stats_.stored_payload_bytes += delta.size();
      break;
  }
  const auto payload_size = static_cast<uint32_t>(frame.ref.size() + delta.size());
  return ListChunk(object_id,
                   {at, offset, raw_size, payload_size, frame.kind, frame.source_object_id, frame.source_offset},
                   frame.sha256);
}

Status StreamWriter::AddDedupRef(uint32_t object_id, uint64_t offset, uint64_t raw_size, uint64_t raw_hash,
                                 const DedupRef& ref, const Sha256Digest* sha256) {
  if (!(header_.flags & kStreamFlagDedup)) return Status::Internal("DEDUP_REF in a stream without the dedup flag");
  VF_RETURN_IF_ERROR(NeedDigest(sha256, "dedup reference"));
  uint8_t payload[kDedupRefPayloadSize];
  EncodeDedupRef(ref, payload);
  return AddRefFrame(object_id, offset, raw_size, raw_hash,
                     {.kind = FrameKind::kDedupRef,
                      .what = "dedup reference",
                      .ref = payload,
                      .source_object_id = ref.source_object_id,
                      .source_offset = ref.source_offset,
                      .sha256 = sha256 ? *sha256 : Sha256Digest{}});
}

Status StreamWriter::AddBaseRef(uint32_t object_id, uint64_t offset, uint64_t raw_size, uint64_t raw_hash,
                                const BaseChunkRef& ref) {
  if (!(header_.flags & kStreamFlagBase)) return Status::Internal("BASE_REF in a stream without a base");
  uint8_t payload[kBaseChunkRefSize];
  EncodeBaseChunkRef(ref, payload);
  return AddRefFrame(object_id, offset, raw_size, raw_hash,
                     {.kind = FrameKind::kBaseRef,
                      .what = "base reference",
                      .ref = payload,
                      .source_object_id = ref.base_object_id,
                      .source_offset = ref.base_offset,
                      .sha256 = ref.base_sha256});
}

Status StreamWriter::AddBaseDelta(uint32_t object_id, uint64_t offset, uint64_t raw_size, uint64_t raw_hash,
                                  const BaseChunkRef& ref, const EncodedChunk& delta, const Sha256Digest* sha256) {
  if (!(header_.flags & kStreamFlagBase)) return Status::Internal("BASE_DELTA in a stream without a base");
  VF_RETURN_IF_ERROR(NeedDigest(sha256, "base delta"));
  if (delta.zero_run || delta.payload.empty() || delta.payload.size() > raw_size)
    return Status::Internal("a base delta needs a coded delta of 1 .. raw_size bytes");
  // The payload is the reference, then the coded delta: one write each.
  uint8_t head[kBaseChunkRefSize];
  EncodeBaseChunkRef(ref, head);
  return AddRefFrame(object_id, offset, raw_size, raw_hash,
                     {.kind = FrameKind::kBaseDelta,
                      .what = "base delta",
                      .ref = head,
                      .delta = &delta,
                      .source_object_id = ref.base_object_id,
                      .source_offset = ref.base_offset,
                      .sha256 = sha256 ? *sha256 : Sha256Digest{}});
}

Status StreamWriter::EndObject(uint32_t object_id) {
  VF_RETURN_IF_ERROR(failed_);
  auto it = open_.find(object_id);
  if (it == open_.end())
    return Status::Internal("EndObject for object " + std::to_string(object_id) + " that is not open");
  OpenObject& object = it->second;
  if (object.size == kUnknownObjectSize) object.size = object.covered;
  if (object.covered != object.size)
    return Status::Internal("object '" + object.name + "' ended after " + std::to_string(object.covered) + " of " +
                            std::to_string(object.size) + " bytes");
  VF_RETURN_IF_ERROR(FlushZeroRun(object_id, object));
  if (indexed()) VF_RETURN_IF_ERROR(WriteIndexBlock(object_id));  // the object's last chunks
  FrameHeader h;
  h.kind = static_cast<uint8_t>(FrameKind::kObjectEnd);
  h.object_id = object_id;
  h.raw_size = object.size;
  h.raw_hash = object.digest;
  totals_.raw_bytes += object.size;
  if (indexed()) index_.ObjectEnd(object_id, object.size, object.digest, bytes_written_);
  open_.erase(it);
  return WriteFrame(h, {});
}

Status StreamWriter::Finish() {
  VF_RETURN_IF_ERROR(failed_);
  if (!started_ || finished_) return Status::Internal("Finish outside an open stream");
  if (!open_.empty()) return Status::Internal("Finish with object '" + open_.begin()->second.name + "' still open");
  if (indexed()) {
    Result<std::vector<uint8_t>> index = EncodeSeekIndex(index_.Build());
    if (!index.ok()) return Fail(index.status());
    FrameHeader ih;
    ih.kind = static_cast<uint8_t>(FrameKind::kSeekIndex);
    ih.raw_hash = Hash64(index->data(), index->size());
    VF_RETURN_IF_ERROR(WriteFrame(ih, *index));
  }
  totals_.stream_bytes = bytes_written_;
  uint8_t payload[kStreamEndPayloadSize];
  EncodeStreamTotals(totals_, payload);
  FrameHeader h;
  h.kind = static_cast<uint8_t>(FrameKind::kStreamEnd);
  h.raw_hash = Hash64(payload, sizeof(payload));
  VF_RETURN_IF_ERROR(WriteFrame(h, payload));
  finished_ = true;
  return Status::Ok();
}

}  // namespace vramflow
