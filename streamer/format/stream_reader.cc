// SPDX-License-Identifier: MIT
#include "streamer/format/stream_reader.h"

#include <vector>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "common/printable.h"
#include "streamer/format/base_frame.h"
#include "streamer/format/dedup_window.h"
#include "streamer/format/digest_block.h"

namespace vramflow {

Status NextFrame(FrameReader& reader, StreamValidator& validator, FrameHeader* header, uint64_t* at) {
  for (;;) {
    bool end_of_input = false;
    Status s = reader.ReadFrameHeader(header, &end_of_input);
    if (!s.ok())
      return s.WithContext("frame " + std::to_string(validator.frames_seen()) + " at stream offset " +
                           std::to_string(reader.frame_offset()));
    if (end_of_input)
      return Status::Truncated("stream ends at offset " + std::to_string(reader.offset()) + " after " +
                               std::to_string(validator.frames_seen()) +
                               " frames without a STREAM_END frame: the stream is incomplete");
    *at = reader.frame_offset();
    FrameAction action;
    s = validator.CheckHeader(*header, *at, &action);
    if (!s.ok()) return s.WithContext(validator.Describe(*header, *at));
    if (action == FrameAction::kProcess) return Status::Ok();
    VF_RETURN_IF_ERROR(reader.SkipPayload(header->payload_size).WithContext(validator.Describe(*header, *at)));
  }
}

namespace {

// Charges a reader's buffers to its budget as they grow, refunding on exit.
class BufferCharge {
 public:
  explicit BufferCharge(MemoryBudget* budget) : budget_(budget) {}
  ~BufferCharge() {
    if (budget_) budget_->Refund(charged_);
  }
  BufferCharge(const BufferCharge&) = delete;
  BufferCharge& operator=(const BufferCharge&) = delete;

  // Makes room for `bytes` in total, charging what is new.
  Status Cover(uint64_t bytes, const std::string& what) {
    if (!budget_ || bytes <= charged_) return Status::Ok();
    VF_RETURN_IF_ERROR(budget_->Charge(bytes - charged_, what));
    charged_ = bytes;
    return Status::Ok();
  }

 private:
  MemoryBudget* budget_;
  uint64_t charged_ = 0;
};

// One ReadStream: the reader, the validator and the buffers it reads with,
// charged to the budget as they grow, and what it does with each frame.
class ReferenceRead {
 public:
  ReferenceRead(ByteSource& source, StreamVisitor& visitor, const ReadOptions& options)
      : reader_(&source),
        visitor_(visitor),
        options_(options),
        records_(options.budget),
        payload_charge_(options.budget),
        decode_charge_(options.budget),
        base_charge_(options.budget) {}

  // Reads the whole stream (see ReadStream).
  Status Run();

 private:
  Status Start();
  Status ReadFrame(const FrameHeader& h, uint64_t at, bool* ended);
  Status ReadFramePayload(const FrameHeader& h, uint64_t at, std::span<const uint8_t>* stored, bool* in_place);
  Status OnData(const FrameHeader& h, uint64_t at, const ObjectState& object, std::span<const uint8_t> stored,
                bool in_place);
  Status OnBase(const FrameHeader& h, uint64_t at);
  Status OnBaseChunk(const FrameHeader& h, uint64_t at, const ObjectState& object, std::span<const uint8_t> stored,
                     const BaseChunkRef& base_ref);
  Status ResolveBase(const FrameHeader& h, std::span<const uint8_t> payload, const BaseChunkRef& ref);
  bool DigestsWanted() const { return may_have_digests_ && validator_.has_digests() != false; }
  void NoteDigest(const FrameHeader& h, std::span<const uint8_t> bytes);

  FrameReader reader_;
  StreamVisitor& visitor_;
  const ReadOptions& options_;
  StreamValidator validator_;
  ChunkDecoder decoder_;
  std::vector<uint8_t> payload_;
  std::vector<uint8_t> decoded_;
  BufferCharge records_;  // the validator's records, the dedup window
  BufferCharge payload_charge_;
  BufferCharge decode_charge_;
  std::shared_ptr<const BaseStream> base_;
  BufferCharge base_charge_;
  // SHA-256 of the decoded chunks no DIGEST_BLOCK has covered yet (at most
  // kMaxUnlistedChunks), while the stream may have DIGEST_BLOCKs; without
  // decoding, the visitor keeps them.
  UncoveredDigests chunk_digests_;
  bool may_have_digests_ = false;
  BaseFrameBuffers base_buffers_;
};

Status ReferenceRead::Run() {
  VF_RETURN_IF_ERROR(Start());
  for (;;) {
    FrameHeader h;
    uint64_t at = 0;
    VF_RETURN_IF_ERROR(NextFrame(reader_, validator_, &h, &at));
    bool ended = false;
    Status s = ReadFrame(h, at, &ended);
    if (!s.ok() || ended) return s;
  }
}

// The stream header: charges the records (and the dedup window it
// declares) and tells the visitor.
Status ReferenceRead::Start() {
  StreamHeader stream_header;
  VF_RETURN_IF_ERROR(reader_.ReadStreamHeader(&stream_header));
  if (options_.budget) {
    const uint64_t record_limit = options_.budget->limit() / 8;
    const uint64_t window =
        (stream_header.flags & kStreamFlagDedup) ? uint64_t{stream_header.dedup_window} * kDedupWindowEntryBytes : 0;
    VF_RETURN_IF_ERROR(records_.Cover(record_limit, "the reader's records (object metadata, byte ranges, the index)"));
    VF_RETURN_IF_ERROR(
        records_.Cover(record_limit + window,
                       "the stream's dedup window of " + std::to_string(stream_header.dedup_window) + " DATA frames"));
    validator_.SetRecordLimit(record_limit);
  }
  validator_.SetStreamHeader(stream_header);
  VF_RETURN_IF_ERROR(visitor_.OnStreamHeader(stream_header));
  may_have_digests_ = options_.check_digests && (stream_header.flags & kStreamFlagIndexBlocks);
  return Status::Ok();
}

// One frame, its header read and checked: reads its payload, applies it to
// the validator and tells the visitor; `ended` at STREAM_END. Errors name
// the frame.
Status ReferenceRead::ReadFrame(const FrameHeader& h, uint64_t at, bool* ended) {
  std::span<const uint8_t> stored;
  bool in_place = false;
  VF_RETURN_IF_ERROR(ReadFramePayload(h, at, &stored, &in_place));
  DedupRef ref;
  BaseChunkRef base_ref;
  Status s = validator_.Apply(h, stored, &ref, &base_ref);
  if (!s.ok()) return s.WithContext(validator_.Describe(h, at));

  const ObjectState* object = validator_.object(h.object_id);
  switch (static_cast<FrameKind>(h.kind)) {
    case FrameKind::kObjectBegin:
      s = visitor_.OnObjectBegin(*object);
      break;
    case FrameKind::kData:
      s = OnData(h, at, *object, stored, in_place);
      break;
    case FrameKind::kBase:
      return OnBase(h, at);
    case FrameKind::kBaseRef:
    case FrameKind::kBaseDelta:
      s = OnBaseChunk(h, at, *object, stored, base_ref);
      break;
    case FrameKind::kDigestBlock:
      if (!may_have_digests_) break;
      s = options_.decode ? chunk_digests_.Check(h.object_id, validator_.digest_records(), stored)
                          : visitor_.OnDigestBlock(h.object_id, validator_.digest_records(), stored);
      break;
    case FrameKind::kZeroRun:
      s = visitor_.OnChunk(ChunkEvent{h, at, *object, {}, {}});
      break;
    case FrameKind::kDedupRef:
      s = visitor_.OnChunk(ChunkEvent{h, at, *object, stored, {}, &ref});
      break;
    case FrameKind::kObjectEnd:
      s = visitor_.OnObjectEnd(*object);
      break;
    case FrameKind::kSeekIndex:  // checked against the frames by the validator
      break;
    case FrameKind::kIndexBlock:
      break;
    case FrameKind::kStreamEnd:
      VF_RETURN_IF_ERROR(reader_.ExpectEnd());
      *ended = true;
      return visitor_.OnStreamEnd(validator_.totals());
    default:
      s = Status::Internal("unhandled frame kind");
  }
  if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
  return Status::Ok();
}

// The frame's payload: a DATA payload where the source holds it, if it can
// read in place (a mapped file), else a copy in `payload_`.
Status ReferenceRead::ReadFramePayload(const FrameHeader& h, uint64_t at, std::span<const uint8_t>* stored,
                                       bool* in_place) {
  if (h.kind == static_cast<uint8_t>(FrameKind::kData)) {
    Result<std::optional<std::span<const uint8_t>>> got = reader_.ReadPayloadInPlace(h.payload_size);
    if (!got.ok()) return got.status().WithContext(validator_.Describe(h, at));
    if (*got) {
      *stored = **got;
      *in_place = true;
      return Status::Ok();
    }
  }
  Status s = payload_charge_.Cover(h.payload_size, "the reader's payload buffer");
  if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
  payload_.resize(h.payload_size);
  s = reader_.ReadPayload(payload_);
  if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
  *stored = payload_;
  return Status::Ok();
}

// A DATA frame: decoded and checked against its hash (with options.decode),
// then given to the visitor.
Status ReferenceRead::OnData(const FrameHeader& h, uint64_t at, const ObjectState& object,
                             std::span<const uint8_t> stored, bool in_place) {
  std::span<const uint8_t> data;
  if (options_.decode) {
    VF_RETURN_IF_ERROR(decode_charge_.Cover(ChunkDecoder::MemoryBytes(h.raw_size), "the reader's decode buffer"));
    decoded_.resize(h.raw_size);
    VF_RETURN_IF_ERROR(
        decoder_.Decode(static_cast<CodecId>(h.codec), static_cast<TransformId>(h.transform), stored, decoded_));
    if (Hash64(decoded_.data(), decoded_.size()) != h.raw_hash)
      return Status::Corruption("payload hash mismatch: decoded bytes hash to " +
                                HexHash(Hash64(decoded_.data(), decoded_.size())) + ", frame says " +
                                HexHash(h.raw_hash));
    data = decoded_;
    NoteDigest(h, data);
  }
  ChunkEvent event{h, at, object, stored, data};
  event.payload_buffer = options_.decode || in_place ? nullptr : &payload_;
  event.payload_in_place = in_place;
  event.digest_wanted = !options_.decode && DigestsWanted();
  Status s = visitor_.OnChunk(event);
  if (in_place) {  // the source may drop what nobody holds any more
    const uint8_t* held = visitor_.HeldInPlaceFrom();
    reader_.DoneBefore(held ? held : stored.data() + stored.size());
  }
  return s;
}

// The BASE frame: opens the base with options.open_base; without one, a
// read that decodes fails here (NotFound, "needs its base").
Status ReferenceRead::OnBase(const FrameHeader& h, uint64_t at) {
  if (options_.open_base) {
    Result<std::shared_ptr<const BaseStream>> opened = options_.open_base(*validator_.base());
    if (!opened.ok()) return opened.status();
    base_ = std::move(*opened);
    Status s = base_charge_.Cover(base_->memory_bytes(), "the index of the stream's base");
    if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
  } else if (options_.decode) {
    const BaseDescriptor& d = *validator_.base();
    return Status::NotFound("this stream is incremental: it needs its base " + HexDigest(d.base_id) + " (" +
                            (d.location.empty() ? std::string("no location recorded") : Printable(d.location)) +
                            "); give it with --base");
  }
  return Status::Ok();
}

// A BASE_REF or BASE_DELTA frame: resolved against the base (with
// options.decode), then given to the visitor.
Status ReferenceRead::OnBaseChunk(const FrameHeader& h, uint64_t at, const ObjectState& object,
                                  std::span<const uint8_t> stored, const BaseChunkRef& base_ref) {
  std::span<const uint8_t> data;
  if (options_.decode) {
    VF_RETURN_IF_ERROR(ResolveBase(h, stored, base_ref));
    data = decoded_;
    NoteDigest(h, data);
  }
  ChunkEvent event{h, at, object, stored, data, nullptr, nullptr, &base_ref};
  event.digest_wanted = !options_.decode && DigestsWanted();
  return visitor_.OnChunk(event);
}

// The chunk a BASE_REF or BASE_DELTA stands for, into `decoded_`.
Status ReferenceRead::ResolveBase(const FrameHeader& h, std::span<const uint8_t> payload, const BaseChunkRef& ref) {
  VF_RETURN_IF_ERROR(
      decode_charge_.Cover(h.raw_size + ChunkDecoder::MemoryBytes(h.raw_size) + BaseFrameBufferBytes(h.raw_size),
                           "the reader's decode buffers for a base chunk"));
  decoded_.resize(h.raw_size);
  return ResolveBaseFrame(*base_, static_cast<FrameKind>(h.kind), static_cast<CodecId>(h.codec),
                          static_cast<TransformId>(h.transform), h.raw_hash, payload, ref, decoder_, base_buffers_,
                          decoded_);
}

// Notes a decoded chunk's SHA-256 for the DIGEST_BLOCK that will cover it,
// while the stream may have them.
void ReferenceRead::NoteDigest(const FrameHeader& h, std::span<const uint8_t> bytes) {
  if (!may_have_digests_) return;
  if (validator_.has_digests() == false) {
    chunk_digests_.Clear();
    return;
  }
  chunk_digests_.Note(h.object_id, h.offset, Sha256(bytes.data(), bytes.size()));
}

}  // namespace

Status ReadStream(ByteSource& source, StreamVisitor& visitor, const ReadOptions& options) {
  ReferenceRead read(source, visitor, options);
  return read.Run();
}

}  // namespace vramflow
