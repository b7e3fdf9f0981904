// SPDX-License-Identifier: MIT
#include "streamer/format/sub_stream.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/hash.h"
#include "common/printable.h"

namespace vramflow {
namespace {

// One frame of the sub-stream and where its bytes come from.
struct Step {
  enum class Action {
    kCopy,      // the frame as stored, renumbered
    kMove,      // the DATA frame a DEDUP_REF names, moved to the reference's object and offset
    kRedirect,  // a DEDUP_REF whose source was moved: it names the moved frame instead
  };
  Action action = Action::kCopy;
  const SeekIndexObject* object = nullptr;  // the selected object the frame belongs to
  // What the fetched header must say (from the index).
  uint64_t stream_offset = 0;
  FrameKind kind = FrameKind::kData;
  uint32_t object_id = 0;
  uint64_t offset = 0;
  uint64_t raw_size = 0;
  uint32_t payload_size = 0;
  // kMove: the reference's place, which the DATA frame takes.
  // kRedirect: the place of the moved DATA frame the reference now names.
  uint32_t to_object = 0;
  uint64_t to_offset = 0;
  // kMove, kRedirect: the reference's object offset and the DATA frame it
  // named in the stored stream, for messages and checks.
  uint64_t ref_offset = 0;
  uint32_t source_object = 0;
  uint64_t source_offset = 0;

  uint64_t frame_bytes() const { return kFrameHeaderSize + payload_size; }
};

std::string ObjectName(const SeekIndexObject& o) {
  return "object " + std::to_string(o.id) + " " + Printable(o.metadata.name);
}

// "object 9 'gpu1/adam.m': DATA frame at stream offset 4242 (object offset 1048576)"
std::string Where(const Step& s) {
  if (s.kind == FrameKind::kBase) return "the BASE frame at stream offset " + std::to_string(s.stream_offset);
  std::string kind = FrameKindName(static_cast<uint8_t>(s.kind));
  if (s.action == Step::Action::kMove)
    return ObjectName(*s.object) + ": the DATA frame at stream offset " + std::to_string(s.stream_offset) +
           " (object " + std::to_string(s.source_object) + ", offset " + std::to_string(s.source_offset) +
           ") named by its DEDUP_REF at object offset " + std::to_string(s.ref_offset);
  std::string where =
      ObjectName(*s.object) + ": " + kind + " frame at stream offset " + std::to_string(s.stream_offset);
  if (IsChunkKind(static_cast<uint8_t>(s.kind))) where += " (object offset " + std::to_string(s.offset) + ")";
  return where;
}

std::string Mismatch(const char* field, uint64_t index_says, uint64_t frame_says) {
  return std::string(field) + ": the seek index says " + std::to_string(index_says) + ", the frame says " +
         std::to_string(frame_says);
}

// Checks a fetched header against the index entry it was fetched for.
Status CheckAgainstIndex(const Step& s, const FrameHeader& h) {
  if (h.kind != static_cast<uint8_t>(s.kind))
    return Status::Corruption("kind: the seek index says " + FrameKindName(static_cast<uint8_t>(s.kind)) +
                              ", the frame is " + FrameKindName(h.kind));
  if (h.object_id != s.object_id) return Status::Corruption(Mismatch("object id", s.object_id, h.object_id));
  if (h.offset != s.offset) return Status::Corruption(Mismatch("offset", s.offset, h.offset));
  if (h.payload_size != s.payload_size)
    return Status::Corruption(Mismatch("payload size", s.payload_size, h.payload_size));
  const bool unknown_size_begin = s.kind == FrameKind::kObjectBegin && h.raw_size == kUnknownObjectSize;
  if (h.raw_size != s.raw_size && !unknown_size_begin)
    return Status::Corruption(Mismatch("raw size", s.raw_size, h.raw_size));
  if (s.kind == FrameKind::kObjectEnd && h.raw_hash != s.object->digest)
    return Status::Corruption("object digest: the seek index says " + HexHash(s.object->digest) + ", the frame says " +
                              HexHash(h.raw_hash));
  return Status::Ok();
}

// Lists the sub-stream's frames in stream order, replacing references whose
// DATA frame lies outside the selection, or outside the dedup window once
// the frames in between are counted as the sub-stream has them.
Result<std::vector<Step>> PlanSteps(const SeekIndex& index, const std::set<uint32_t>& selected, uint32_t dedup_window,
                                    const std::optional<Step>& base_frame, SubStreamPlan* plan) {
  std::vector<Step> steps;
  if (base_frame) steps.push_back(*base_frame);
  for (uint32_t id : selected) {
    const SeekIndexObject* o = index.Find(id);
    Step begin;
    begin.object = o;
    begin.stream_offset = o->begin_offset;
    begin.kind = FrameKind::kObjectBegin;
    begin.object_id = id;
    begin.raw_size = o->size;
    begin.payload_size = o->begin_payload_size;
    steps.push_back(begin);
    for (const SeekIndexChunk& c : o->chunks) {
      Step chunk;
      chunk.object = o;
      chunk.stream_offset = c.stream_offset;
      chunk.kind = c.kind;
      chunk.object_id = id;
      chunk.offset = c.object_offset;
      chunk.raw_size = c.raw_size;
      chunk.payload_size = c.payload_size;
      chunk.source_object = c.source_object_id;
      chunk.source_offset = c.source_offset;
      steps.push_back(chunk);
    }
    Step end;
    end.object = o;
    end.stream_offset = o->end_offset;
    end.kind = FrameKind::kObjectEnd;
    end.object_id = id;
    end.raw_size = o->size;
    steps.push_back(end);
    ++plan->objects;
    plan->raw_bytes += o->size;
  }
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.stream_offset < b.stream_offset; });

  // Where the bytes of each stored DATA frame can be named in the
  // sub-stream: the frame itself when its object is selected, else where it
  // was moved to last; and that place's number among the sub-stream's DATA
  // frames, as a reference may only name one of the last `dedup_window`.
  struct Place {
    uint32_t object;
    uint64_t offset;
    uint64_t number;
    bool moved;
  };
  std::map<std::pair<uint32_t, uint64_t>, Place> places;
  uint64_t data_frames = 0;
  for (Step& s : steps) {
    if (s.kind == FrameKind::kData) {
      places[{s.object_id, s.offset}] = Place{s.object_id, s.offset, data_frames++, false};
      continue;
    }
    if (s.kind != FrameKind::kDedupRef) continue;
    const std::pair<uint32_t, uint64_t> key{s.source_object, s.source_offset};
    s.ref_offset = s.offset;
    auto it = places.find(key);
    if (it != places.end() && (dedup_window == 0 || data_frames - it->second.number <= dedup_window)) {
      if (!it->second.moved) {
        ++plan->kept_refs;
        continue;
      }
      s.action = Step::Action::kRedirect;
      s.to_object = it->second.object;
      s.to_offset = it->second.offset;
      ++plan->redirected_refs;
      continue;
    }
    // Its DATA frame is left out, or too far back: the frame takes its place.
    const SeekIndexChunk* data = index.FindData(s.source_object, s.source_offset);
    if (!data || data->raw_size != s.raw_size)
      return Status::Corruption("seek index: " + ObjectName(*s.object) + ": the DEDUP_REF at object offset " +
                                std::to_string(s.offset) + " names object " + std::to_string(s.source_object) +
                                " offset " + std::to_string(s.source_offset) + ", where no DATA frame of " +
                                std::to_string(s.raw_size) + " bytes is");
    places[key] = Place{s.object_id, s.offset, data_frames++, true};
    s.action = Step::Action::kMove;
    s.to_object = s.object_id;
    s.to_offset = s.offset;
    // The fetched frame is the DATA frame, as stored.
    s.stream_offset = data->stream_offset;
    s.kind = FrameKind::kData;
    s.object_id = s.source_object;
    s.offset = s.source_offset;
    s.payload_size = data->payload_size;
    ++plan->moved_refs;
  }
  return steps;
}

// The stored bytes to fetch, in the order the steps consume them: adjacent
// frames merged into ranges of at most `max_range` bytes.
std::vector<ByteRange> PlanRanges(const std::vector<Step>& steps, uint64_t max_range) {
  std::vector<ByteRange> ranges;
  for (const Step& s : steps) {
    const uint64_t size = s.frame_bytes();
    if (!ranges.empty() && ranges.back().offset + ranges.back().size == s.stream_offset &&
        ranges.back().size + size <= max_range) {
      ranges.back().size += size;
    } else {
      ranges.push_back({s.stream_offset, size});
    }
  }
  return ranges;
}

class SubStreamSource final : public ByteSource {
 public:
  SubStreamSource(std::string description, StreamHeader header, std::vector<Step> steps,
                  std::unique_ptr<ByteSource> fetched)
      : description_(std::move(description)),
        header_(std::move(header)),
        steps_(std::move(steps)),
        fetched_(std::move(fetched)) {}

  Result<size_t> Read(std::span<uint8_t> out) override {
    if (!failed_.ok()) return failed_;
    if (out.empty()) return size_t{0};
    while (staged_position_ == staged_.size() && payload_left_ == 0) {
      if (done_) return size_t{0};
      Status s = Advance();
      if (!s.ok()) return Fail(std::move(s));
    }
    if (staged_position_ < staged_.size()) {
      size_t n = std::min(out.size(), staged_.size() - staged_position_);
      std::copy_n(staged_.begin() + static_cast<ptrdiff_t>(staged_position_), n, out.begin());
      staged_position_ += n;
      return n;
    }
    // A payload, passed through as stored.
    const size_t want = static_cast<size_t>(std::min<uint64_t>(out.size(), payload_left_));
    Result<size_t> n = fetched_->Read(out.first(want));
    if (!n.ok()) return Fail(n.status().WithContext(Where(steps_[next_step_ - 1])));
    if (*n == 0) return Fail(Status::Internal(Where(steps_[next_step_ - 1]) + ": the fetched ranges ended early"));
    payload_left_ -= *n;
    return *n;
  }

  std::string Describe() const override { return description_; }

 private:
  Status Fail(Status s) {
    failed_ = std::move(s);
    return failed_;
  }

  // Stages the next header (and any rewritten payload).
  Status Advance() {
    staged_.clear();
    staged_position_ = 0;
    if (!header_written_) {
      staged_.resize(kStreamHeaderSize);
      EncodeStreamHeader(header_, staged_.data());
      header_written_ = true;
      emitted_ += kStreamHeaderSize;
      return Status::Ok();
    }
    if (next_step_ == steps_.size()) return StageStreamEnd();
    const Step& step = steps_[next_step_++];
    Status s = StageFrame(step);
    return s.ok() ? s : s.WithContext(Where(step));
  }

  Status StageFrame(const Step& step) {
    uint8_t bytes[kFrameHeaderSize];
    VF_ASSIGN_OR_RETURN(size_t n, ReadFully(*fetched_, bytes));
    if (n != sizeof(bytes)) return Status::Internal("the fetched ranges ended early");
    FrameHeader h;
    VF_RETURN_IF_ERROR(DecodeFrameHeader(bytes, &h));
    VF_RETURN_IF_ERROR(CheckAgainstIndex(step, h));
    h.sequence = sequence_++;
    // A payload this stage reads whole, to check or rewrite it; others pass through.
    std::vector<uint8_t> held;
    if (step.action == Step::Action::kMove) {
      h.object_id = step.to_object;
      h.offset = step.to_offset;
    } else if (step.action == Step::Action::kRedirect) {
      VF_ASSIGN_OR_RETURN(held, ReadPayload(h.payload_size));
      VF_RETURN_IF_ERROR(Redirect(step, held));
    } else if (step.kind == FrameKind::kObjectBegin) {
      VF_ASSIGN_OR_RETURN(held, ReadPayload(h.payload_size));
      VF_RETURN_IF_ERROR(CheckMetadata(step, h, held));
    }
    staged_.resize(kFrameHeaderSize);
    EncodeFrameHeader(h, staged_.data());
    staged_.insert(staged_.end(), held.begin(), held.end());
    payload_left_ = h.payload_size - held.size();
    emitted_ += kFrameHeaderSize + h.payload_size;
    if (h.kind == static_cast<uint8_t>(FrameKind::kObjectBegin)) {
      ++totals_.object_count;
      totals_.raw_bytes += step.object->size;
    }
    return Status::Ok();
  }

  Result<std::vector<uint8_t>> ReadPayload(uint32_t size) {
    std::vector<uint8_t> payload(size);
    VF_ASSIGN_OR_RETURN(size_t got, ReadFully(*fetched_, payload));
    if (got != payload.size()) return Status::Internal("the fetched ranges ended early");
    return payload;
  }

  // The objects were chosen by the index's names and attributes: the
  // OBJECT_BEGIN must carry the same, or the wrong data would be restored
  // under the chosen names.
  static Status CheckMetadata(const Step& step, const FrameHeader& h, std::span<const uint8_t> payload) {
    if (Hash64(payload.data(), payload.size()) != h.raw_hash)
      return Status::Corruption("OBJECT_BEGIN payload hash mismatch");
    ObjectMetadata metadata;
    VF_RETURN_IF_ERROR(DecodeObjectMetadata(payload, &metadata));
    if (metadata.name != step.object->metadata.name || metadata.attributes != step.object->metadata.attributes)
      return Status::Corruption("metadata: the seek index says " + Printable(step.object->metadata.name) +
                                ", the frame says " + Printable(metadata.name) + " (or other attributes)");
    return Status::Ok();
  }

  // A reference to a moved DATA frame: it names the frame's new place.
  static Status Redirect(const Step& step, std::span<uint8_t> payload) {
    DedupRef ref;
    VF_RETURN_IF_ERROR(DecodeDedupRef(payload.data(), &ref));
    if (ref.source_object_id != step.source_object || ref.source_offset != step.source_offset)
      return Status::Corruption("the seek index says it names object " + std::to_string(step.source_object) +
                                " offset " + std::to_string(step.source_offset) + ", the frame names object " +
                                std::to_string(ref.source_object_id) + " offset " + std::to_string(ref.source_offset));
    ref.source_object_id = step.to_object;
    ref.source_offset = step.to_offset;
    EncodeDedupRef(ref, payload.data());
    return Status::Ok();
  }

  Status StageStreamEnd() {
    totals_.frame_count = sequence_;
    totals_.stream_bytes = emitted_;
    staged_.resize(kFrameHeaderSize + kStreamEndPayloadSize);
    uint8_t* payload = staged_.data() + kFrameHeaderSize;
    EncodeStreamTotals(totals_, payload);
    FrameHeader h;
    h.kind = static_cast<uint8_t>(FrameKind::kStreamEnd);
    h.payload_size = kStreamEndPayloadSize;
    h.sequence = sequence_;
    h.raw_hash = Hash64(payload, kStreamEndPayloadSize);
    EncodeFrameHeader(h, staged_.data());
    done_ = true;
    return Status::Ok();
  }

  std::string description_;
  StreamHeader header_;
  std::vector<Step> steps_;
  std::unique_ptr<ByteSource> fetched_;  // the planned ranges, in order
  bool header_written_ = false;
  size_t next_step_ = 0;
  bool done_ = false;
  std::vector<uint8_t> staged_;  // rewritten bytes not yet handed out
  size_t staged_position_ = 0;
  uint64_t payload_left_ = 0;  // payload bytes of the current frame still to pass through
  uint64_t sequence_ = 0;
  uint64_t emitted_ = 0;  // sub-stream bytes staged so far
  StreamTotals totals_;
  Status failed_;
};

}  // namespace

Result<std::unique_ptr<ByteSource>> OpenSubStream(std::shared_ptr<RandomAccessSource> source,
                                                  const StoredStreamIndex& stored, const std::set<uint32_t>& objects,
                                                  const SubStreamOptions& options, SubStreamPlan* plan_out) {
  if (objects.empty()) return Status::InvalidArgument("no object selected from " + source->Describe());
  for (uint32_t id : objects)
    if (!stored.index.Find(id))
      return Status::InvalidArgument(source->Describe() + " has no object " + std::to_string(id));
  // An incremental stream's BASE frame comes along (first, as stored), so
  // that the sub-stream's reader opens the same base. Its DIGEST_BLOCKs,
  // which the index does not list, are left out.
  std::optional<Step> base_frame;
  if (stored.header.flags & kStreamFlagBase) {
    uint8_t raw[kFrameHeaderSize];
    VF_ASSIGN_OR_RETURN(size_t n, source->ReadAt(kStreamHeaderSize, raw));
    FrameHeader h;
    if (n != sizeof(raw)) return Status::Truncated(source->Describe() + ": no room for its BASE frame");
    VF_RETURN_IF_ERROR(DecodeFrameHeader(raw, &h).WithContext(source->Describe() + ", its BASE frame"));
    if (h.kind != static_cast<uint8_t>(FrameKind::kBase) ||
        h.payload_size > kBaseDescriptorFixedSize + kMaxBaseLocationBytes)
      return Status::Corruption(source->Describe() + ": the stream header announces a base, but its first frame is " +
                                FrameKindName(h.kind) + ", not a BASE frame");
    Step step;
    step.stream_offset = kStreamHeaderSize;
    step.kind = FrameKind::kBase;
    step.payload_size = h.payload_size;
    base_frame = step;
  }
  SubStreamPlan plan;
  VF_ASSIGN_OR_RETURN(std::vector<Step> steps,
                      PlanSteps(stored.index, objects, stored.header.dedup_window, base_frame, &plan));
  std::vector<ByteRange> ranges = PlanRanges(steps, std::max<uint64_t>(1, options.max_range));
  plan.frames = steps.size();
  plan.ranges = ranges.size();
  plan.stream_bytes = kStreamHeaderSize + kFrameHeaderSize + kStreamEndPayloadSize;
  for (const Step& s : steps) {
    plan.fetch_bytes += s.frame_bytes();
    plan.stream_bytes += s.frame_bytes();
  }

  StreamHeader header = stored.header;
  header.flags &= ~(kStreamFlagSeekIndex | kStreamFlagIndexBlocks);
  if (plan.kept_refs + plan.redirected_refs == 0) {
    header.flags &= ~kStreamFlagDedup;
    header.dedup_window = 0;
  }
  std::string description = std::to_string(plan.objects) + " of the " + std::to_string(stored.index.objects.size()) +
                            " objects of " + source->Describe() + " (through its seek index)";
  std::unique_ptr<ByteSource> fetched = NewRangeReader(std::move(source), std::move(ranges), options.fetch);
  if (plan_out) *plan_out = plan;
  return std::unique_ptr<ByteSource>(
      new SubStreamSource(std::move(description), std::move(header), std::move(steps), std::move(fetched)));
}

}  // namespace vramflow
