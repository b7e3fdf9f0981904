// SPDX-License-Identifier: MIT
#include "streamer/stream_reader.h"

#include <vector>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "streamer/dedup_window.h"

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

}  // namespace

Status ReadStream(ByteSource& source, StreamVisitor& visitor, const ReadOptions& options) {
  FrameReader reader(&source);
  StreamValidator validator;
  ChunkDecoder decoder;
  std::vector<uint8_t> payload;
  std::vector<uint8_t> decoded;
  BufferCharge records(options.budget);  // the validator's records, the dedup window
  BufferCharge payload_charge(options.budget);
  BufferCharge decode_charge(options.budget);

  StreamHeader stream_header;
  VF_RETURN_IF_ERROR(reader.ReadStreamHeader(&stream_header));
  if (options.budget) {
    const uint64_t record_limit = options.budget->limit() / 8;
    const uint64_t window = (stream_header.flags & kStreamFlagDedup) ? uint64_t{stream_header.dedup_window} * kDedupWindowEntryBytes : 0;
    VF_RETURN_IF_ERROR(records.Cover(record_limit, "the reader's records (object metadata, byte ranges, the index)"));
    VF_RETURN_IF_ERROR(records.Cover(record_limit + window, "the stream's dedup window of " +
                                                                std::to_string(stream_header.dedup_window) + " DATA frames"));
    validator.SetRecordLimit(record_limit);
  }
  validator.SetStreamHeader(stream_header);
  VF_RETURN_IF_ERROR(visitor.OnStreamHeader(stream_header));

  for (;;) {
    FrameHeader h;
    uint64_t at = 0;
    VF_RETURN_IF_ERROR(NextFrame(reader, validator, &h, &at));
    Status s = payload_charge.Cover(h.payload_size, "the reader's payload buffer");
    if (!s.ok()) return s.WithContext(validator.Describe(h, at));
    payload.resize(h.payload_size);
    s = reader.ReadPayload(payload);
    if (!s.ok()) return s.WithContext(validator.Describe(h, at));
    DedupRef ref;
    s = validator.Apply(h, payload, &ref);
    if (!s.ok()) return s.WithContext(validator.Describe(h, at));

    const ObjectState* object = validator.object(h.object_id);
    switch (static_cast<FrameKind>(h.kind)) {
      case FrameKind::kObjectBegin:
        s = visitor.OnObjectBegin(*object);
        break;
      case FrameKind::kData: {
        std::span<const uint8_t> data;
        if (options.decode) {
          s = decode_charge.Cover(ChunkDecoder::MemoryBytes(h.raw_size), "the reader's decode buffer");
          if (!s.ok()) return s.WithContext(validator.Describe(h, at));
          decoded.resize(h.raw_size);
          s = decoder.Decode(static_cast<CodecId>(h.codec), static_cast<TransformId>(h.transform), payload, decoded);
          if (s.ok() && Hash64(decoded.data(), decoded.size()) != h.raw_hash)
            s = Status::Corruption("payload hash mismatch: decoded bytes hash to " +
                                   HexHash(Hash64(decoded.data(), decoded.size())) + ", frame says " +
                                   HexHash(h.raw_hash));
          if (!s.ok()) return s.WithContext(validator.Describe(h, at));
          data = decoded;
        }
        s = visitor.OnChunk(ChunkEvent{h, at, *object, payload, data, nullptr, options.decode ? nullptr : &payload});
        break;
      }
      case FrameKind::kZeroRun:
        s = visitor.OnChunk(ChunkEvent{h, at, *object, {}, {}});
        break;
      case FrameKind::kDedupRef:
        s = visitor.OnChunk(ChunkEvent{h, at, *object, payload, {}, &ref});
        break;
      case FrameKind::kObjectEnd:
        s = visitor.OnObjectEnd(*object);
        break;
      case FrameKind::kSeekIndex:  // checked against the frames by the validator
      case FrameKind::kIndexBlock:
        break;
      case FrameKind::kStreamEnd:
        s = reader.ExpectEnd();
        if (!s.ok()) return s;
        return visitor.OnStreamEnd(validator.totals());
      default:
        s = Status::Internal("unhandled frame kind");
    }
    if (!s.ok()) return s.WithContext(validator.Describe(h, at));
  }
}

}  // namespace vramflow
