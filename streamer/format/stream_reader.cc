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
  std::shared_ptr<const BaseStream> base;
  BufferCharge base_charge(options.budget);
  // SHA-256 of the decoded chunks no DIGEST_BLOCK has covered yet (at most
  // kMaxUnlistedChunks), while the stream may have DIGEST_BLOCKs; without
  // decoding, the visitor keeps them.
  UncoveredDigests chunk_digests;
  const bool may_have_digests = options.check_digests && (stream_header.flags & kStreamFlagIndexBlocks);
  auto digests_wanted = [&] { return may_have_digests && validator.has_digests() != false; };
  auto note_digest = [&](const FrameHeader& h, std::span<const uint8_t> bytes) {
    if (!may_have_digests) return;
    if (validator.has_digests() == false) {
      chunk_digests.Clear();
      return;
    }
    chunk_digests.Note(h.object_id, h.offset, Sha256(bytes.data(), bytes.size()));
  };
  // The chunk a BASE_REF or BASE_DELTA stands for, into `decoded`.
  BaseFrameBuffers base_buffers;
  auto resolve_base = [&](const FrameHeader& h, std::span<const uint8_t> payload, const BaseChunkRef& ref) -> Status {
    VF_RETURN_IF_ERROR(
        decode_charge.Cover(h.raw_size + ChunkDecoder::MemoryBytes(h.raw_size) + BaseFrameBufferBytes(h.raw_size),
                            "the reader's decode buffers for a base chunk"));
    decoded.resize(h.raw_size);
    return ResolveBaseFrame(*base, static_cast<FrameKind>(h.kind), static_cast<CodecId>(h.codec),
                            static_cast<TransformId>(h.transform), h.raw_hash, payload, ref, decoder, base_buffers,
                            decoded);
  };

  for (;;) {
    FrameHeader h;
    uint64_t at = 0;
    VF_RETURN_IF_ERROR(NextFrame(reader, validator, &h, &at));
    // The frame's payload: a DATA payload where the source holds it, if it
    // can read in place (a mapped file), else a copy in `payload`.
    std::span<const uint8_t> stored;
    bool in_place = false;
    if (h.kind == static_cast<uint8_t>(FrameKind::kData)) {
      Result<std::optional<std::span<const uint8_t>>> got = reader.ReadPayloadInPlace(h.payload_size);
      if (!got.ok()) return got.status().WithContext(validator.Describe(h, at));
      if (*got) {
        stored = **got;
        in_place = true;
      }
    }
    Status s;
    if (!in_place) {
      s = payload_charge.Cover(h.payload_size, "the reader's payload buffer");
      if (!s.ok()) return s.WithContext(validator.Describe(h, at));
      payload.resize(h.payload_size);
      s = reader.ReadPayload(payload);
      if (!s.ok()) return s.WithContext(validator.Describe(h, at));
      stored = payload;
    }
    DedupRef ref;
    BaseChunkRef base_ref;
    s = validator.Apply(h, stored, &ref, &base_ref);
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
          s = decoder.Decode(static_cast<CodecId>(h.codec), static_cast<TransformId>(h.transform), stored, decoded);
          if (s.ok() && Hash64(decoded.data(), decoded.size()) != h.raw_hash)
            s = Status::Corruption("payload hash mismatch: decoded bytes hash to " +
                                   HexHash(Hash64(decoded.data(), decoded.size())) + ", frame says " +
                                   HexHash(h.raw_hash));
          if (!s.ok()) return s.WithContext(validator.Describe(h, at));
          data = decoded;
          note_digest(h, data);
        }
        ChunkEvent event{h, at, *object, stored, data};
        event.payload_buffer = options.decode || in_place ? nullptr : &payload;
        event.payload_in_place = in_place;
        event.digest_wanted = !options.decode && digests_wanted();
        s = visitor.OnChunk(event);
        if (in_place) {  // the source may drop what nobody holds any more
          const uint8_t* held = visitor.HeldInPlaceFrom();
          reader.DoneBefore(held ? held : stored.data() + stored.size());
        }
        break;
      }
      case FrameKind::kBase:
        if (options.open_base) {
          Result<std::shared_ptr<const BaseStream>> opened = options.open_base(*validator.base());
          if (!opened.ok()) return opened.status();
          base = std::move(*opened);
          s = base_charge.Cover(base->memory_bytes(), "the index of the stream's base");
        } else if (options.decode) {
          const BaseDescriptor& d = *validator.base();
          return Status::NotFound("this stream is incremental: it needs its base " + HexDigest(d.base_id) + " (" +
                                  (d.location.empty() ? std::string("no location recorded") : Printable(d.location)) +
                                  "); give it with --base");
        }
        break;
      case FrameKind::kBaseRef:
      case FrameKind::kBaseDelta: {
        std::span<const uint8_t> data;
        if (options.decode) {
          s = resolve_base(h, stored, base_ref);
          if (!s.ok()) return s.WithContext(validator.Describe(h, at));
          data = decoded;
          note_digest(h, data);
        }
        ChunkEvent event{h, at, *object, stored, data, nullptr, nullptr, &base_ref};
        event.digest_wanted = !options.decode && digests_wanted();
        s = visitor.OnChunk(event);
        break;
      }
      case FrameKind::kDigestBlock:
        if (!may_have_digests) break;
        s = options.decode ? chunk_digests.Check(h.object_id, validator.digest_records(), stored)
                           : visitor.OnDigestBlock(h.object_id, validator.digest_records(), stored);
        break;
      case FrameKind::kZeroRun:
        s = visitor.OnChunk(ChunkEvent{h, at, *object, {}, {}});
        break;
      case FrameKind::kDedupRef:
        s = visitor.OnChunk(ChunkEvent{h, at, *object, stored, {}, &ref});
        break;
      case FrameKind::kObjectEnd:
        s = visitor.OnObjectEnd(*object);
        break;
      case FrameKind::kSeekIndex:  // checked against the frames by the validator
        break;
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
