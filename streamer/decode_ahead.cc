// SPDX-License-Identifier: MIT
#include "streamer/decode_ahead.h"

#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/exception_boundary.h"
#include "common/hash.h"
#include "common/sha256.h"
#include "common/units.h"
#include "streamer/format/base_frame.h"
#include "streamer/format/digest_block.h"
#include "streamer/machine/tbb_workers.h"
#include "streamer/pipeline_common.h"
#include "streamer/pipeline_fit.h"

namespace vramflow {
namespace {

// One chunk event held until it is handed on, with its own copies of what
// the reader's event points into, but for a payload read in place. DATA,
// BASE_REF and BASE_DELTA chunks are decoded (resolved) while held.
struct HeldChunk {
  enum State : int { kQueued, kDecoding, kDone };
  FrameHeader header;
  uint64_t stream_offset = 0;
  const ObjectState* object = nullptr;
  std::vector<uint8_t> payload;
  // DATA read in place: where the source holds the payload (`payload` is
  // then unused), readable until the reader passes HeldInPlaceFrom().
  std::optional<std::span<const uint8_t>> in_place;
  std::vector<uint8_t> data;  // DATA, BASE_REF, BASE_DELTA: decoded by whichever thread claims it
  DedupRef ref;
  bool has_ref = false;
  BaseChunkRef base_ref;      // BASE_REF, BASE_DELTA: the base's chunk they name
  bool wants_digest = false;  // ChunkEvent::digest_wanted: `sha256` is taken with the decoding
  Sha256Digest sha256{};
  std::atomic<int> state{kDone};
  Status status;  // the decoding's outcome; read once state is kDone
};

// What one more decoding thread costs for chunks of `raw` bytes: its
// decoder, `base_buffers` (for reading a base) and two frames held (payload
// and decoded bytes each).
uint64_t ThreadBytes(uint64_t raw, uint64_t base_buffers) {
  return ChunkDecoder::MemoryBytes(raw) + base_buffers + 4 * raw;
}

// BASE_REF and BASE_DELTA: resolved against the base, as DATA is decoded.
bool FromBase(uint8_t kind) {
  return kind == static_cast<uint8_t>(FrameKind::kBaseRef) || kind == static_cast<uint8_t>(FrameKind::kBaseDelta);
}

std::string FrameName(const FrameHeader& h, uint64_t at) {
  return "frame " + std::to_string(h.sequence) + " at stream offset " + std::to_string(at);
}

// Holds up to `window` chunk events while their DATA payloads are decoded,
// and hands them on in order. A DATA chunk is decoded by the first thread
// that claims it: the task started for it, or the reading thread when it
// needs it next and nobody has started it.
//
// Its threads start at the first chunk to decode, once an incremental
// stream's BASE frame has opened the base: as many as asked for, or as the
// base asks to keep its reads in flight (a base on S3 waits on a request per
// chunk), as far as the budget feeds them. The reading thread is one of them.
class DecodeAheadVisitor final : public StreamVisitor {
 public:
  // `threads` as fitted for the header's chunk size; `note` tells of a cut
  // below `asked` (the caller's).
  DecodeAheadVisitor(StreamVisitor* inner, unsigned threads, MemoryBudget* budget, unsigned asked,
                     std::function<void(const std::string&)> note)
      : inner_(inner),
        asked_threads_(std::max(1u, threads)),
        window_(2 * size_t{asked_threads_}),
        budget_(budget),
        caller_threads_(asked),
        note_(std::move(note)) {}
  ~DecodeAheadVisitor() override {
    if (arena_) arena_->execute([&] { tasks_->wait(); });  // a task may still point at a chunk
    if (budget_) budget_->Refund(charged_);
  }
  DecodeAheadVisitor(const DecodeAheadVisitor&) = delete;
  DecodeAheadVisitor& operator=(const DecodeAheadVisitor&) = delete;

  Status OnStreamHeader(const StreamHeader& h) override {
    chunk_size_hint_ = h.chunk_size;
    return inner_->OnStreamHeader(h);
  }
  Status OnObjectBegin(const ObjectState& o) override {
    VF_RETURN_IF_ERROR(HandOn(held_.size()));
    return inner_->OnObjectBegin(o);
  }
  Status OnObjectEnd(const ObjectState& o) override {
    VF_RETURN_IF_ERROR(HandOn(held_.size()));
    return inner_->OnObjectEnd(o);
  }
  Status OnStreamEnd(const StreamTotals& totals) override {
    VF_RETURN_IF_ERROR(HandOn(held_.size()));
    return inner_->OnStreamEnd(totals);
  }

  // The base of an incremental stream, once its BASE frame opened it.
  void SetBase(std::shared_ptr<const BaseStream> base) {
    base_chain_ = base->DescriptorForDependent().chain_length;
    base_ = std::move(base);
  }

  Status OnChunk(const ChunkEvent& e) override {
    const auto kind = static_cast<FrameKind>(e.header.kind);
    const bool from_base = FromBase(e.header.kind);
    if (from_base && (!base_ || !e.base_ref)) return Status::Internal("a base frame without the base opened");
    if (kind != FrameKind::kData && kind != FrameKind::kZeroRun && kind != FrameKind::kDedupRef && !from_base)
      return Status::NotSupported(FrameKindName(e.header.kind) +
                                  " frames are not decoded ahead (read with one thread)");
    const bool decoded = kind == FrameKind::kData || from_base;
    if (decoded && threads_ == 0) VF_RETURN_IF_ERROR(StartThreads(e.header));
    if (threads_ == 1) return PassOn(e, decoded);
    if (held_.size() >= window_) VF_RETURN_IF_ERROR(HandOn(1));
    HeldChunk* chunk = TakeSpare();
    if (decoded) {
      Result<bool> room = MakeRoom(*chunk, e.header, /*copies_payload=*/!e.payload_in_place);
      if (!room.ok() || !*room) {
        spare_.push_back(chunk);
        if (!room.ok()) return room.status();
        VF_RETURN_IF_ERROR(Refit(e.header));  // fewer threads, one at least, from this frame on
        return OnChunk(e);
      }
    }
    Hold(*chunk, e, decoded);
    delivering_ = chunk;
    if (decoded && threads_ > 1) arena_->enqueue(tasks_->defer([this, chunk] { Claim(*chunk); }));
    Status handed = HandOnDone();
    delivering_ = nullptr;
    return handed;
  }

  // Hands on every chunk held, so that each chunk the block lists has its
  // digest noted, then checks the block.
  Status OnDigestBlock(uint32_t object_id, std::span<const SeekIndexChunk> records,
                       std::span<const uint8_t> stored) override {
    VF_RETURN_IF_ERROR(HandOn(held_.size()));
    return digests_.Check(object_id, records, stored);
  }

  const uint8_t* HeldInPlaceFrom() const override {
    for (const HeldChunk* c : held_)  // in stream order
      if (c->in_place) return c->in_place->data();
    return nullptr;
  }

 private:
  static std::span<const uint8_t> Payload(const HeldChunk& c) {
    return c.in_place ? *c.in_place : std::span<const uint8_t>(c.payload);
  }

  // Makes `chunk` hold event `e` (its payload where the source holds it, or
  // taken from the reader, or copied) until it is handed on, queued for
  // decoding if it is `decoded`.
  void Hold(HeldChunk& chunk, const ChunkEvent& e, bool decoded) {
    const bool from_base = FromBase(e.header.kind);
    chunk.header = e.header;
    chunk.stream_offset = e.stream_offset;
    chunk.object = &e.object;
    chunk.in_place.reset();
    if (e.payload_in_place) chunk.in_place = e.payload;
    else if (e.header.kind == static_cast<uint8_t>(FrameKind::kData) && e.payload_buffer)
      std::swap(chunk.payload, *e.payload_buffer);  // taken, not copied (chunk's has as much room)
    else chunk.payload.assign(e.payload.begin(), e.payload.end());
    chunk.has_ref = e.dedup != nullptr;
    if (e.dedup) chunk.ref = *e.dedup;
    if (from_base) chunk.base_ref = *e.base_ref;
    chunk.wants_digest = decoded && e.digest_wanted;
    chunk.status = Status::Ok();
    held_.push_back(&chunk);
    if (decoded) chunk.data.resize(e.header.raw_size);
    chunk.state.store(decoded ? HeldChunk::kQueued : HeldChunk::kDone, std::memory_order_release);
  }

  // The reading thread alone: decodes `e` here and hands it on at once, as
  // ReadStream does with decoding on, holding no copy and charging what
  // ReadStream charges (its decode buffers, grown to the largest frame), so
  // that any stream ReadStream reads within the budget is read here too.
  Status PassOn(const ChunkEvent& e, bool decoded) {
    VF_RETURN_IF_ERROR(HandOn(held_.size()));  // none held once alone
    if (!decoded) return inner_->OnChunk(e);
    const FrameHeader& h = e.header;
    const bool from_base = FromBase(h.kind);
    const uint64_t need =
        ChunkDecoder::MemoryBytes(h.raw_size) + (from_base ? h.raw_size + BaseFrameBufferBytes(h.raw_size) : 0);
    if (budget_ && need > alone_charged_) {
      VF_RETURN_IF_ERROR(budget_->Charge(need - alone_charged_, from_base
                                                                    ? "the reader's decode buffers for a base chunk"
                                                                    : "the reader's decode buffer"));
      charged_ += need - alone_charged_;
      alone_charged_ = need;
    }
    HeldChunk& c = alone_;
    c.header = h;
    c.in_place = e.payload;  // readable until this call returns
    if (from_base) c.base_ref = *e.base_ref;
    c.wants_digest = e.digest_wanted;
    c.data.resize(h.raw_size);
    VF_RETURN_IF_ERROR(ExceptionBoundary("decoding a DATA payload", [&] { return Decode(c); }));
    if (c.wants_digest) digests_.Note(h.object_id, h.offset, c.sha256);
    return inner_->OnChunk(ChunkEvent{h, e.stream_offset, e.object, e.payload, c.data, nullptr, nullptr,
                                      from_base ? &c.base_ref : nullptr});
  }

  // Decides how many threads decode, `h` being the first frame to decode,
  // and starts them: as many as asked for, or as the base asks for to keep
  // its reads in flight, as far as the budget feeds them (each its decoder,
  // its base buffers and two frames held, payload and decoded bytes each,
  // sized for the larger of `h` and the header's chunk size); one at least.
  Status StartThreads(const FrameHeader& h) {
    const unsigned wanted = base_ ? std::max(asked_threads_, base_->concurrent_reads()) : asked_threads_;
    threads_ = wanted;
    if (budget_ && wanted > 1) {
      const uint64_t raw = std::max<uint64_t>(h.raw_size, std::min<uint64_t>(chunk_size_hint_, kMaxChunkSize));
      const uint64_t base_buffers = base_ ? BaseFrameBufferBytes(raw, base_chain_) : 0;
      threads_ = ThreadsTheBudgetFeeds(wanted, budget_->limit(), budget_->in_use(), ThreadBytes(raw, base_buffers), 0);
    }
    if (budget_ && threads_ < caller_threads_ && note_)
      note_(ThreadCapNote(caller_threads_, threads_, budget_->limit()));
    window_ = 2 * size_t{threads_};
    if (threads_ == 1) return Status::Ok();  // the reading thread decodes each frame as ReadStream does (PassOn)
    VF_RETURN_IF_ERROR(
        ReadyTbbThreads(threads_, "decoding ahead on " + std::to_string(threads_) + " threads", &allow_threads_));
    arena_.emplace(static_cast<int>(threads_));
    return Status::Ok();
  }

  // Hands on the first `count` held chunks, waiting for (or doing) their
  // decoding, then those after them that are done.
  Status HandOn(size_t count) {
    for (size_t i = 0; i < count; ++i) {
      WaitFor(*held_.front());
      VF_RETURN_IF_ERROR(HandOnFront());
    }
    return HandOnDone();
  }
  Status HandOnDone() {
    while (!held_.empty() && held_.front()->state.load(std::memory_order_acquire) == HeldChunk::kDone)
      VF_RETURN_IF_ERROR(HandOnFront());
    return Status::Ok();
  }
  // The chunk goes back to the spares whatever happens (a task started for
  // it may still be pending: it finds the chunk claimed).
  Status HandOnFront() {
    spare_.push_back(held_.front());
    held_.pop_front();
    const HeldChunk& c = *spare_.back();
    VF_RETURN_IF_ERROR(c.status.WithContext(FrameName(c.header, c.stream_offset)));
    if (c.wants_digest) digests_.Note(c.header.object_id, c.header.offset, c.sha256);
    const bool from_base = FromBase(c.header.kind);
    const bool decoded = c.header.kind == static_cast<uint8_t>(FrameKind::kData) || from_base;
    Status s = inner_->OnChunk(ChunkEvent{c.header, c.stream_offset, *c.object, Payload(c),
                                          decoded ? std::span<const uint8_t>(c.data) : std::span<const uint8_t>(),
                                          c.has_ref ? &c.ref : nullptr, nullptr, from_base ? &c.base_ref : nullptr});
    // The reader names the frame it is delivering itself.
    return &c == delivering_ ? s : s.WithContext(FrameName(c.header, c.stream_offset));
  }

  // Returns once `c` is decoded: decodes it here if nobody has started it,
  // else decodes later chunks nobody has started while it waits.
  void WaitFor(HeldChunk& c) {
    if (Claim(c)) return;
    for (HeldChunk* later : held_) {
      if (c.state.load(std::memory_order_acquire) == HeldChunk::kDone) return;
      Claim(*later);
    }
    int state;
    while ((state = c.state.load(std::memory_order_acquire)) != HeldChunk::kDone) c.state.wait(state);
  }

  // Decodes `c` if it is queued; true if this call did.
  bool Claim(HeldChunk& c) {
    int queued = HeldChunk::kQueued;
    if (!c.state.compare_exchange_strong(queued, HeldChunk::kDecoding, std::memory_order_acq_rel)) return false;
    c.status = ExceptionBoundary("decoding a DATA payload", [&] { return Decode(c); });
    c.state.store(HeldChunk::kDone, std::memory_order_release);
    c.state.notify_all();
    return true;
  }

  HeldChunk* TakeSpare() {
    if (spare_.empty()) return chunks_.emplace_back(std::make_unique<HeldChunk>()).get();
    HeldChunk* c = spare_.back();
    spare_.pop_back();
    return c;
  }

  // Charges what `chunk` needs beyond what it has for frame `h` (a copy of
  // its payload only if `copies_payload`), and the decoders' state for its
  // raw size; where the budget is short, hands on the held chunks first
  // (their buffers stay charged, for reuse) and tries once more. False,
  // nothing charged, where the frame does not fit the threads decoding.
  Result<bool> MakeRoom(HeldChunk& chunk, const FrameHeader& h, bool copies_payload) {
    // Payloads are mostly a little smaller than their raw size, and vary:
    // room for the larger of the two, so that the next frame's fits too.
    const uint64_t payload_room = copies_payload ? std::max<uint64_t>(h.payload_size, h.raw_size) : 0;
    uint64_t bytes = 0;
    if (payload_room > chunk.payload.capacity()) bytes += payload_room - chunk.payload.capacity();
    if (h.raw_size > chunk.data.capacity()) bytes += h.raw_size - chunk.data.capacity();
    if (h.raw_size > decoder_raw_)
      bytes += uint64_t{threads_} * (ChunkDecoder::MemoryBytes(h.raw_size) - ChunkDecoder::MemoryBytes(decoder_raw_));
    const bool from_base = FromBase(h.kind);
    if (from_base && h.raw_size > base_raw_)  // each thread's buffers for reading the base
      bytes += uint64_t{threads_} *
               (BaseFrameBufferBytes(h.raw_size, base_chain_) - BaseFrameBufferBytes(base_raw_, base_chain_));
    if (bytes > 0 && budget_) {
      const std::string what = "decoding ahead on " + std::to_string(threads_) + " threads";
      Status s = budget_->Charge(bytes, what);
      if (!s.ok() && !held_.empty()) {
        VF_RETURN_IF_ERROR(HandOn(held_.size()));
        s = budget_->Charge(bytes, what);
      }
      if (!s.ok()) return false;
      charged_ += bytes;
    }
    chunk.payload.reserve(payload_room);
    chunk.data.reserve(h.raw_size);
    decoder_raw_ = std::max<uint64_t>(decoder_raw_, h.raw_size);
    if (from_base) base_raw_ = std::max<uint64_t>(base_raw_, h.raw_size);
    return true;
  }

  // Frame `h` does not fit the threads decoding (they were fitted to the
  // stream header's chunk size, which is informational only, or to smaller
  // frames): hands on the chunks held, lets go of every buffer and decoder,
  // and fits fewer threads to `h`. From one thread on, the reading thread
  // goes on alone (PassOn), as ReadStream would. Says so through the note.
  Status Refit(const FrameHeader& h) {
    VF_RETURN_IF_ERROR(HandOn(held_.size()));
    arena_->execute([&] { tasks_->wait(); });  // a pending task would decode a chunk's next use
    decoders_.clear();
    base_buffers_.clear();
    for (const std::unique_ptr<HeldChunk>& c : chunks_) {
      std::vector<uint8_t>().swap(c->payload);
      std::vector<uint8_t>().swap(c->data);
    }
    budget_->Refund(charged_);
    charged_ = 0;
    decoder_raw_ = 0;
    base_raw_ = 0;
    const unsigned before = threads_;
    const uint64_t base_buffers = FromBase(h.kind) ? BaseFrameBufferBytes(h.raw_size, base_chain_) : 0;
    threads_ = ThreadsTheBudgetFeeds(before - 1, budget_->limit(), budget_->in_use(),
                                     ThreadBytes(h.raw_size, base_buffers), 0);
    window_ = 2 * size_t{threads_};
    arena_.reset();
    if (threads_ > 1) arena_.emplace(static_cast<int>(threads_));
    if (note_)
      note_("decoding on " + std::to_string(threads_) + (threads_ == 1 ? " thread" : " threads") + " from frame " +
            std::to_string(h.sequence) + " on: its " + std::to_string(h.raw_size) + " raw bytes" +
            (h.raw_size > chunk_size_hint_ ? ", larger than the stream header's chunk size," : "") + " do not fit " +
            std::to_string(before) + " threads in a memory budget of " + FormatSize(budget_->limit()));
    return Status::Ok();
  }

  // Decodes a DATA payload, or resolves a BASE_REF or BASE_DELTA against
  // the base, and checks it against the frame's hash; takes the SHA-256 of
  // the bytes where a DIGEST_BLOCK will want it. Runs on any thread.
  Status Decode(HeldChunk& c) {
    VF_RETURN_IF_ERROR(DecodeBytes(c));
    if (c.wants_digest) c.sha256 = Sha256(c.data.data(), c.data.size());
    return Status::Ok();
  }
  Status DecodeBytes(HeldChunk& c) {
    const FrameHeader& h = c.header;
    if (FromBase(h.kind))
      return ResolveBaseFrame(*base_, static_cast<FrameKind>(h.kind), static_cast<CodecId>(h.codec),
                              static_cast<TransformId>(h.transform), h.raw_hash, Payload(c), c.base_ref,
                              decoders_.local(), base_buffers_.local(), c.data);
    Status s = decoders_.local().Decode(static_cast<CodecId>(h.codec), static_cast<TransformId>(h.transform),
                                        Payload(c), c.data);
    if (s.ok() && Hash64(c.data.data(), c.data.size()) != h.raw_hash)
      s = Status::Corruption("payload hash mismatch: decoded bytes hash to " +
                             HexHash(Hash64(c.data.data(), c.data.size())) + ", frame says " + HexHash(h.raw_hash));
    return s;
  }

  StreamVisitor* inner_;
  const unsigned asked_threads_;
  unsigned threads_ = 0;          // decoding, the reading thread's included; 0 until StartThreads
  uint32_t chunk_size_hint_ = 0;  // the stream header's chunk_size (only to fit threads to the budget)
  size_t window_;                 // chunks held at most
  MemoryBudget* budget_;
  const unsigned caller_threads_;
  const std::function<void(const std::string&)> note_;
  uint64_t charged_ = 0;
  uint64_t decoder_raw_ = 0;  // the largest raw size the decoders' state is charged for
  uint64_t base_raw_ = 0;     // the largest raw size the base buffers are charged for
  // One thread (PassOn): the frame being decoded, and what its decode
  // buffers are charged for (part of charged_), as ReadStream charges them.
  HeldChunk alone_;
  uint64_t alone_charged_ = 0;
  std::shared_ptr<const BaseStream> base_;
  uint32_t base_chain_ = 0;  // streams in the base's chain, the stream's own included
  // Every chunk lives until the visitor is destroyed, after its tasks: a
  // task started for a chunk may still be pending when the chunk has been
  // handed on (it then finds the chunk claimed, or claims its next use).
  std::vector<std::unique_ptr<HeldChunk>> chunks_;
  std::deque<HeldChunk*> held_;            // in stream order
  const HeldChunk* delivering_ = nullptr;  // the chunk of the reader's OnChunk call under way
  // The digests of the chunks handed on that no DIGEST_BLOCK has covered
  // yet. Those taken before the stream showed it has none stay, a block's
  // worth per object at most.
  UncoveredDigests digests_;
  std::vector<HeldChunk*> spare_;  // handed on; their buffers are reused
  oneapi::tbb::enumerable_thread_specific<ChunkDecoder> decoders_;
  oneapi::tbb::enumerable_thread_specific<BaseFrameBuffers> base_buffers_;
  // The other threads (none with one), started by StartThreads; outlive
  // tasks_.
  std::unique_ptr<oneapi::tbb::global_control> allow_threads_;
  std::optional<oneapi::tbb::task_arena> arena_;
  // Behind a pointer: its destructor may throw, a visitor's may not (it is
  // waited for first, so it never does).
  std::unique_ptr<oneapi::tbb::task_group> tasks_ = std::make_unique<oneapi::tbb::task_group>();
};

// Gives the stream header bytes read to look at its flags, then the rest
// of the source.
class HeaderReplaySource final : public ByteSource {
 public:
  HeaderReplaySource(ByteSource* source, std::span<const uint8_t> header) : source_(source), header_(header) {}
  Result<size_t> Read(std::span<uint8_t> data) override {
    if (header_.empty()) return source_->Read(data);
    const size_t n = std::min(data.size(), header_.size());
    std::copy_n(header_.begin(), n, data.begin());
    header_ = header_.subspan(n);
    return n;
  }
  // In place only once the replayed bytes, which are copies, are used up.
  std::optional<std::span<const uint8_t>> ReadInPlace(size_t size) override {
    if (!header_.empty()) return std::nullopt;
    return source_->ReadInPlace(size);
  }
  void DoneBefore(const uint8_t* in_place) override { source_->DoneBefore(in_place); }
  std::string Describe() const override { return source_->Describe(); }
  Status Finish(const Status& outcome) override { return source_->Finish(outcome); }

 private:
  ByteSource* source_;
  std::span<const uint8_t> header_;
};

}  // namespace

Status ReadStreamDecodingAhead(ByteSource& source, StreamVisitor& visitor, const DecodeAheadOptions& options) {
  uint8_t header_bytes[kStreamHeaderSize];
  VF_ASSIGN_OR_RETURN(size_t got, ReadFully(source, header_bytes));
  HeaderReplaySource replay(&source, std::span<const uint8_t>(header_bytes, got));
  StreamHeader header;
  ReadOptions serial = options.read;
  serial.decode = true;
  // ReadStream itself reads a stream whose header does not decode (for its
  // error) and an incremental stream without a way to open its base (it
  // fails at the BASE frame, saying so). With one thread, or a budget that
  // feeds only one for chunks of the header's chunk size (the largest a
  // frame may be where it says none), so does it any stream but an
  // incremental one, whose base may ask for more threads: ReadStream needs
  // the least memory.
  const bool decodes = got == kStreamHeaderSize && DecodeStreamHeader(header_bytes, &header).ok();
  unsigned threads = options.threads;
  MemoryBudget* budget = options.read.budget;
  if (decodes && budget && threads > 1) {
    const uint64_t raw = header.chunk_size > 0 ? std::min<uint64_t>(header.chunk_size, kMaxChunkSize) : kMaxChunkSize;
    // ReadStream's records take an eighth of the budget.
    threads =
        ThreadsTheBudgetFeeds(threads, budget->limit(), budget->in_use() + budget->limit() / 8, ThreadBytes(raw, 0), 0);
  }
  if (!decodes || (threads <= 1 && !(header.flags & kStreamFlagBase)) ||
      ((header.flags & kStreamFlagBase) && !options.read.open_base)) {
    if (decodes && budget && threads < options.threads && options.note)
      options.note(ThreadCapNote(options.threads, threads, budget->limit()));
    return ReadStream(replay, visitor, serial);
  }

  return ExceptionBoundary("the decode-ahead reader", [&] {
    DecodeAheadVisitor ahead(&visitor, threads, options.read.budget, options.threads, options.note);
    ReadOptions framing = options.read;
    framing.decode = false;
    if (options.read.open_base)  // the reader opens the base at the BASE frame; its chunks are resolved here
      framing.open_base = [&](const BaseDescriptor& d) -> Result<std::shared_ptr<const BaseStream>> {
        Result<std::shared_ptr<const BaseStream>> opened = options.read.open_base(d);
        if (opened.ok()) ahead.SetBase(*opened);
        return opened;
      };
    return ReadStream(replay, ahead, framing);
  });
}

}  // namespace vramflow
