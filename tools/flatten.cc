// SPDX-License-Identifier: MIT
#include "tools/flatten.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>

#include "codecs/chunk_codec.h"
#include "common/cleanup_registry.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "streamer/base/base_opener.h"
#include "streamer/budget_plan.h"
#include "streamer/decode_ahead.h"
#include "streamer/format/seek_index.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_writer.h"
#include "streamer/machine/memory_budget.h"
#include "tools/cli/cli_util.h"

namespace vramflow {
namespace {

// Writes the flat stream with every chunk's SHA-256 in DIGEST_BLOCKs, as
// every incremental stream has them, so that it can in turn be a base
// matched by digests alone (--base-refs-only). A DEDUP_REF's digest is that
// of the DATA frame it names: the input's last dedup_window DATA frames keep
// theirs (a DEDUP_REF names one of them). A stream of an earlier writer
// whose references may name any earlier frame (dedup window 0) gets none.
class FlattenVisitor final : public StreamVisitor {
 public:
  FlattenVisitor(ByteSink* sink, uint64_t extra_dedup_window, MemoryBudget* budget)
      : sink_(sink), extra_window_(extra_dedup_window), budget_(budget) {}
  ~FlattenVisitor() override { budget_->Refund(charged_); }
  FlattenVisitor(const FlattenVisitor&) = delete;
  FlattenVisitor& operator=(const FlattenVisitor&) = delete;

  Status OnStreamHeader(const StreamHeader& h) override {
    StreamHeader out = h;
    out.flags &= ~kStreamFlagBase;
    const bool dedup = out.flags & kStreamFlagDedup;
    if (dedup) {
      // Chunks that were references become DATA frames, so a DEDUP_REF may
      // now lie further back from its DATA frame by as many.
      const uint64_t window = uint64_t{h.dedup_window} + extra_window_;
      if (h.dedup_window != 0 && window > kMaxDedupWindow)
        return Status::NotSupported("flattening would need a dedup window of " + std::to_string(window) +
                                    " DATA frames, more than the format allows");
      if (h.dedup_window != 0) out.dedup_window = static_cast<uint32_t>(window);
    }
    writer_ = std::make_unique<StreamWriter>(sink_, out);
    writer_->SetChunkDigests(!dedup || h.dedup_window != 0);
    if (dedup && writer_->chunk_digests()) {  // indexed, as its input is
      const uint64_t bytes = uint64_t{h.dedup_window} * kKeptDigestBytes;
      VF_RETURN_IF_ERROR(budget_->Charge(bytes, "the digests of the last " + std::to_string(h.dedup_window) +
                                                    " DATA frames (the stream's dedup window)"));
      charged_ += bytes;
      digest_window_ = h.dedup_window;
    }
    return writer_->Start();
  }
  Status OnObjectBegin(const ObjectState& o) override {
    VF_ASSIGN_OR_RETURN(uint32_t id, writer_->BeginObject(o.metadata, o.size));
    ids_[o.id] = id;
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& e) override {
    const FrameHeader& h = e.header;
    const uint32_t id = ids_.at(h.object_id);
    const bool digests = writer_->chunk_digests();
    EncodedChunk chunk;
    switch (static_cast<FrameKind>(h.kind)) {
      case FrameKind::kData: {
        if (e.data.size() != h.raw_size) return Status::Internal("a DATA frame without its decoded bytes");
        chunk.codec = static_cast<CodecId>(h.codec);
        chunk.transform = static_cast<TransformId>(h.transform);
        chunk.raw_hash = h.raw_hash;
        chunk.payload = e.payload;
        const Sha256Digest sha256 = digests ? Sha256(e.data) : Sha256Digest{};
        VF_RETURN_IF_ERROR(writer_->AddChunk(id, h.offset, h.raw_size, chunk, digests ? &sha256 : nullptr));
        KeepDigest(id, h.offset, sha256);
        return Status::Ok();
      }
      case FrameKind::kZeroRun:
        chunk.zero_run = true;
        return writer_->AddChunk(id, h.offset, h.raw_size, chunk);
      case FrameKind::kDedupRef: {
        DedupRef ref = *e.dedup;
        ref.source_object_id = ids_.at(ref.source_object_id);
        const Sha256Digest* sha256 = nullptr;
        if (digests) {
          auto named = digests_.find({ref.source_object_id, ref.source_offset});
          if (named == digests_.end()) return Status::Internal("a DEDUP_REF to a DATA frame outside the dedup window");
          sha256 = &named->second;
        }
        return writer_->AddDedupRef(id, h.offset, h.raw_size, h.raw_hash, ref, sha256);
      }
      case FrameKind::kBaseRef:
      case FrameKind::kBaseDelta: {
        if (e.data.size() != h.raw_size) return Status::Internal("a base reference without its bytes");
        resolved_ += h.raw_size;
        VF_RETURN_IF_ERROR(encoder_.Encode(e.data, &chunk));
        const Sha256Digest sha256 = digests ? Sha256(e.data) : Sha256Digest{};
        return writer_->AddChunk(id, h.offset, h.raw_size, chunk, digests ? &sha256 : nullptr);
      }
      default:
        return Status::Internal("unexpected chunk kind");
    }
  }
  Status OnObjectEnd(const ObjectState& o) override { return writer_->EndObject(ids_.at(o.id)); }
  Status OnStreamEnd(const StreamTotals& totals) override {
    VF_RETURN_IF_ERROR(writer_->Finish());
    objects_ = totals.object_count;
    raw_bytes_ = totals.raw_bytes;
    return sink_->Commit();
  }

  uint64_t objects() const { return objects_; }
  uint64_t raw_bytes() const { return raw_bytes_; }
  uint64_t resolved() const { return resolved_; }
  uint64_t written() const { return writer_ ? writer_->bytes_written() : 0; }

 private:
  // What keeping one DATA frame's digest costs: the map's node with its
  // key and digest, and the key again in kept_.
  static constexpr uint64_t kKeptDigestBytes = 128;

  // A DATA frame of the input (its id and offset in the flat stream) and
  // its digest, for the DEDUP_REFs that may name it: the last
  // digest_window_ of them.
  void KeepDigest(uint32_t id, uint64_t offset, const Sha256Digest& sha256) {
    if (digest_window_ == 0) return;
    if (kept_.size() == digest_window_) {
      digests_.erase(kept_.front());
      kept_.pop_front();
    }
    kept_.push_back({id, offset});
    digests_[kept_.back()] = sha256;
  }

  ByteSink* sink_;
  uint64_t extra_window_;
  MemoryBudget* budget_;
  uint64_t charged_ = 0;
  uint64_t digest_window_ = 0;  // the input's DATA frames a DEDUP_REF may name; 0: none kept
  std::map<std::pair<uint32_t, uint64_t>, Sha256Digest> digests_;  // by (object id, offset)
  std::deque<std::pair<uint32_t, uint64_t>> kept_;                 // digests_'s keys, oldest first
  std::unique_ptr<StreamWriter> writer_;
  ChunkEncoder encoder_{EncoderOptions{}};
  std::map<uint32_t, uint32_t> ids_;  // input object id -> output object id (objects of the stream)
  uint64_t objects_ = 0, raw_bytes_ = 0, resolved_ = 0;
};

// Counts the chunk frames that are base references, reading in order.
class BaseReferenceCounter final : public StreamVisitor {
 public:
  Status OnChunk(const ChunkEvent& e) override {
    const auto kind = static_cast<FrameKind>(e.header.kind);
    count_ += kind == FrameKind::kBaseRef || kind == FrameKind::kBaseDelta;
    return Status::Ok();
  }
  uint64_t count() const { return count_; }

 private:
  uint64_t count_ = 0;
};

// How many chunks of the stored stream `input` are base references (then
// DEDUP_REF windows grow by exactly that at most): from its index when it
// has one, else counted in a pass that reads its frames without decoding
// them, within `budget`.
Result<uint64_t> BaseReferenceCount(const std::string& input, const TransportOptions& transport, MemoryBudget* budget) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessSource> random, OpenRandomAccess(input, transport));
  Result<StoredStreamIndex> stored = ReadSeekIndex(*random, budget->limit() / 2);
  if (stored.ok()) {
    uint64_t count = 0;
    for (const SeekIndexObject& o : stored->index.objects)
      for (const SeekIndexChunk& c : o.chunks)
        if (c.kind == FrameKind::kBaseRef || c.kind == FrameKind::kBaseDelta) ++count;
    return count;
  }
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenSource(input, transport));
  BaseReferenceCounter counter;
  const ReadOptions framing{.decode = false, .budget = budget, .check_digests = false};
  VF_RETURN_IF_ERROR(ReadStream(*source, counter, framing).WithContext("counting the base references of " + input));
  return counter.count();
}

// A copy of an input read in order (stdin, a pipe, fd:N), in a file of
// $TMPDIR (or /tmp) that is removed when this goes: flatten must know how
// many base references the stream holds before it writes the output's
// header, and the stream says so only at its end, if at all.
// Registered with `cleanup` (if any), so that an interrupt removes it too.
class SpooledInput {
 public:
  ~SpooledInput() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

  Status CopyFrom(ByteSource& source, CleanupRegistry* cleanup) {
    const char* dir = std::getenv("TMPDIR");
    std::string name = std::string(dir && *dir ? dir : "/tmp") + "/vramflow-flatten-XXXXXX";
    UniqueFd fd;
    auto create = [&]() -> Status {
      fd = UniqueFd(::mkstemp(name.data()));
      if (!fd.valid()) return Status::FromErrno("creating a temporary copy of the input in " + name, errno);
      path_ = name;
      return Status::Ok();
    };
    VF_ASSIGN_OR_RETURN(registered_, CleanupEntry::Create(cleanup, create, [this] { ::unlink(path_.c_str()); }));
    std::vector<uint8_t> buffer(1u << 20);
    for (;;) {
      VF_ASSIGN_OR_RETURN(size_t n, source.Read(buffer));
      if (n == 0) return Status::Ok();
      for (size_t done = 0; done < n;) {
        const ssize_t w = ::write(fd.get(), buffer.data() + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return Status::FromErrno("writing the temporary copy of the input " + path_, errno);
        done += static_cast<size_t>(w);
      }
    }
  }

 private:
  std::string path_;
  CleanupEntry registered_;  // after path_: released (waiting out an undo) before path_ goes
};

// The base references of `input` (BaseReferenceCount), whose stream
// `source` is open. An input that cannot be read twice (stdin, a pipe) is
// first copied into `spooled`, and `*copy` then reads that copy.
Result<uint64_t> CountBaseReferences(const std::string& input, const TransportOptions& transport, ByteSource& source,
                                     SpooledInput* spooled, std::unique_ptr<ByteSource>* copy, MemoryBudget* budget) {
  if (OpenRandomAccess(input, transport).ok()) return BaseReferenceCount(input, transport, budget);
  VF_RETURN_IF_ERROR(spooled->CopyFrom(source, transport.file.cleanup));
  VF_ASSIGN_OR_RETURN(*copy, OpenSource(spooled->path(), transport));
  return BaseReferenceCount(spooled->path(), transport, budget);
}

}  // namespace

Status RunFlatten(const FlattenOptions& options, FlattenReport* report) {
  TransportOptions transport = options.transport;
  transport.file.overwrite = options.force;
  const BudgetPlan plan = PlanReaderBudget(options.max_memory, options.input, &transport);
  MemoryBudget budget(plan.pipeline);
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenSource(options.input, transport));
  SpooledInput spooled;
  std::unique_ptr<ByteSource> copy;
  Result<uint64_t> extra_window = CountBaseReferences(options.input, transport, *source, &spooled, &copy, &budget);
  if (!extra_window.ok()) {
    (void)source->Finish(extra_window.status());
    return extra_window.status();
  }
  ByteSource& read_from = copy ? *copy : *source;
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenSink(options.output, transport));
  FlattenVisitor visitor(sink.get(), *extra_window, &budget);
  // Checked as unpack checks: every chunk by its own hash, the base's bytes
  // by their SHA-256; the stream's DIGEST_BLOCKs are left to verify. Read
  // through the decode-ahead reader, with one thread for a base in a file,
  // and as many as a base on S3 asks for to keep its reads in flight.
  const ReadOptions read{.decode = true,
                         .budget = &budget,
                         .open_base = BaseOpenerFor(options.bases, options.input, options.transport, plan.base_index),
                         .check_digests = false};
  Status status = ReadStreamDecodingAhead(read_from, visitor, DecodeAheadOptions{1, read, {}});
  (void)source->Finish(status);
  VF_RETURN_IF_ERROR(status);
  if (report) {
    report->objects = visitor.objects();
    report->raw_bytes = visitor.raw_bytes();
    report->stream_bytes = visitor.written();
    report->resolved_bytes = visitor.resolved();
  }
  return Status::Ok();
}

}  // namespace vramflow
