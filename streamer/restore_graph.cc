// SPDX-License-Identifier: MIT
// The restore graph (see pipeline.h).
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "common/exception_boundary.h"
#include "common/hash.h"
#include "common/printable.h"
#include "common/units.h"
#include "streamer/device/dma_completer.h"
#include "streamer/device/slot_pool.h"
#include "streamer/format/base_frame.h"
#include "streamer/format/dedup_window.h"
#include "streamer/format/frame_reader.h"
#include "streamer/format/stream_reader.h"
#include "streamer/machine/memory_budget.h"
#include "streamer/machine/tbb_workers.h"
#include "streamer/pipeline.h"
#include "streamer/pipeline_common.h"
#include "streamer/pipeline_fit.h"

namespace vramflow {
namespace {

namespace flow = oneapi::tbb::flow;

struct RestoreJob {
  // kBaseRef, kBaseDelta: the bytes come from the base (a delta is XORed
  // onto them), named by base_object and base_offset, proven by base_sha256.
  enum Kind : uint8_t { kData, kZero, kBaseRef, kBaseDelta };
  Kind kind = kData;
  uint32_t slot = 0;
  RestoreTarget target;
  size_t device_index = 0;
  uint32_t ring = 0;
  uint64_t offset = 0;
  uint32_t size = 0;
  uint8_t codec = 0;
  uint8_t transform = 0;
  uint32_t payload_size = 0;
  const uint8_t* payload = nullptr;  // in place (ByteSource::ReadInPlace); nullptr: in the slot's payload buffer
  uint64_t raw_hash = 0;
  BaseChunkRef base_ref;
  uint64_t frame = 0;          // sequence number, for messages
  uint64_t stream_offset = 0;  // of the frame header, for messages
  // Outlives the validator's record of the object, which goes at its end.
  std::shared_ptr<const std::string> object_name;
};

std::string Where(const RestoreJob& job) {
  return "frame " + std::to_string(job.frame) + " (object " + Printable(*job.object_name) + ", offset " +
         std::to_string(job.offset) + ", " + std::to_string(job.size) + " bytes) at stream offset " +
         std::to_string(job.stream_offset);
}

struct PendingRef {
  RestoreTarget target;
  uint64_t offset;
  uint32_t size;
  uint32_t source_object;
  uint64_t source_offset;
};

// Estimated bytes of the graph's record of an object's target (kept for
// the whole restore: references may point into any object).
constexpr uint64_t kTargetRecordBytes = 96;

// The serial front of the graph: reads frames, checks them, and turns each
// DATA frame or zero-run piece into a job for the slot it was given.
class FrameSource {
 public:
  FrameSource(ByteSource* source, const RestoreResolver& resolve, const ObjectEndHook& on_object_end,
              ErrorLatch* errors)
      : reader_(source), resolve_(resolve), on_object_end_(on_object_end), errors_(errors) {}

  void SetRecordLimit(uint64_t bytes) { validator_.SetRecordLimit(bytes); }
  Status ReadStreamHeader(StreamHeader* header) {
    VF_RETURN_IF_ERROR(reader_.ReadStreamHeader(header));
    validator_.SetStreamHeader(*header);
    return Status::Ok();
  }
  // The buffers DATA payloads are read into, and the size of the zero
  // buffer; set before Next(), and again after a pause for larger slots.
  void UsePool(SlotPool* pool, uint32_t slot_size, uint32_t zero_piece) {
    pool_ = pool;
    slot_size_ = slot_size;
    zero_piece_ = std::min(slot_size, zero_piece);
    in_place_.assign(pool->size(), nullptr);
  }

  // The graph has drained: no payload read in place is in use any more.
  void Drained() {
    std::fill(in_place_.begin(), in_place_.end(), nullptr);
    if (in_place_end_) reader_.DoneBefore(in_place_end_);
  }

  // Fills `job` for `slot`; false when the stream is done or failed, or
  // when it pauses (paused()): kMaxPendingReferences references wait to be
  // copied, or a DATA frame is larger than the slots (needed_slot_size()).
  bool Next(uint32_t slot, RestoreJob* job) {
    if (done_ || paused_ || errors_->failed()) return false;
    in_place_[slot] = nullptr;  // a slot comes back when its job is done
    Status s = NextJob(slot, job);
    if (!s.ok()) {
      errors_->Set(s);
      done_ = true;
      return false;
    }
    return !done_ && !paused_;
  }

  // An incremental stream's BASE frame, the first: reads it and opens the
  // base with `open_base` before any chunk (NotFound without one).
  Status OpenBase(const std::function<Result<std::shared_ptr<const BaseStream>>(const BaseDescriptor&)>& open_base) {
    FrameHeader h;
    uint64_t at = 0;
    VF_RETURN_IF_ERROR(NextFrame(reader_, validator_, &h, &at));
    small_.resize(h.payload_size);
    Status s = reader_.ReadPayload(small_);
    if (s.ok()) s = validator_.Apply(h, small_);
    if (s.ok() && !validator_.base()) s = Status::Internal("no BASE frame first in an incremental stream");
    if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
    const BaseDescriptor& d = *validator_.base();
    if (!open_base)
      return Status::NotFound("this stream is incremental: it needs its base " + HexDigest(d.base_id) + " (" +
                              (d.location.empty() ? std::string("no location recorded") : Printable(d.location)) +
                              "); give it with --base");
    VF_ASSIGN_OR_RETURN(base_, open_base(d));
    return Status::Ok();
  }
  const std::shared_ptr<const BaseStream>& base() const { return base_; }

  bool complete() const { return validator_.complete(); }
  bool paused() const { return paused_; }
  // After a pause: the raw size of the DATA frame that did not fit the slots
  // (0 if none did); it is read first once reading resumes.
  uint64_t needed_slot_size() const { return held_ ? held_header_.raw_size : 0; }
  void Resume() { paused_ = false; }
  std::string DescribeHeld() const { return validator_.Describe(held_header_, held_at_); }
  // The references read since the last call.
  std::vector<PendingRef> TakeRefs() { return std::exchange(refs_, {}); }
  const std::map<uint32_t, RestoreTarget>& targets() const { return targets_; }
  uint64_t raw_bytes() const { return validator_.totals().raw_bytes; }
  // What the frames read so far hold: the stream's side of the restore's
  // PipelineStats (the engine's left zero).
  PipelineStats figures() const {
    return PipelineStats{.objects = validator_.totals().object_count,
                         .raw_bytes = raw_bytes(),
                         .stream_bytes = reader_.offset(),
                         .zero_bytes = zero_bytes_,
                         .dedup_bytes = dedup_bytes_,
                         .data_chunks = data_chunks_,
                         .base_ref_bytes = base_ref_bytes_,
                         .base_delta_bytes = base_delta_bytes_,
                         .serial_stages = {}};
  }

 private:
  Status NextJob(uint32_t slot, RestoreJob* job) {
    for (;;) {
      if (zero_left_ > 0) {  // hand out the next piece of a zero run
        *job = zero_job_;
        job->slot = slot;
        job->size = static_cast<uint32_t>(std::min<uint64_t>(zero_left_, zero_piece_));
        job->ring = next_ring_++ % job->target.device->RingCount();
        zero_job_.offset += job->size;
        zero_left_ -= job->size;
        return Status::Ok();
      }
      if (refs_.size() >= kMaxPendingReferences) {  // between frames: copy them before reading on
        paused_ = true;
        return Status::Ok();
      }
      FrameHeader h;
      uint64_t at = 0;
      if (held_) {  // the frame that paused for larger slots
        h = held_header_;
        at = held_at_;
        held_ = false;
      } else {
        VF_RETURN_IF_ERROR(NextFrame(reader_, validator_, &h, &at));
      }
      auto kind = static_cast<FrameKind>(h.kind);
      if (kind == FrameKind::kData || kind == FrameKind::kBaseRef || kind == FrameKind::kBaseDelta)
        return ChunkJob(h, at, slot, job);
      VF_RETURN_IF_ERROR(ApplyFrame(h, at));
      if (done_) return Status::Ok();
    }
  }

  // A DATA, BASE_REF or BASE_DELTA frame whose header was read: its payload
  // into `slot` (or where the source holds it) and its job, or a pause when
  // it needs larger slots.
  Status ChunkJob(const FrameHeader& h, uint64_t at, uint32_t slot, RestoreJob* job) {
    // Chunk sizes are the frames' to say (the header's is a hint): a
    // larger chunk waits for the graph to drain and the slots to grow.
    if (h.raw_size > slot_size_) {
      held_ = true;
      held_header_ = h;
      held_at_ = at;
      paused_ = true;
      return Status::Ok();
    }
    auto kind = static_cast<FrameKind>(h.kind);
    Slot& buffers = pool_->slot(slot);
    std::span<uint8_t> payload(buffers.payload.data(), h.payload_size);
    Status s;
    if (kind == FrameKind::kData) {
      // Decoded where the source holds it when it can (a mapped file).
      Result<std::optional<std::span<const uint8_t>>> in_place = reader_.ReadPayloadInPlace(h.payload_size);
      s = !in_place.ok() ? in_place.status() : *in_place ? Status::Ok() : reader_.ReadPayload(payload);
      if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
      *job = MakeJob(h, at, RestoreJob::kData);
      if (*in_place) {
        job->payload = (*in_place)->data();
        KeepInPlace(slot, **in_place);
      }
      ++data_chunks_;
    } else {
      s = reader_.ReadPayload(payload);
      if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
      BaseChunkRef ref;
      s = validator_.Apply(h, payload, nullptr, &ref);
      if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
      if (!base_) return Status::Internal("a base reference without the base open");
      *job = MakeJob(h, at, kind == FrameKind::kBaseRef ? RestoreJob::kBaseRef : RestoreJob::kBaseDelta);
      job->base_ref = ref;
      (kind == FrameKind::kBaseRef ? base_ref_bytes_ : base_delta_bytes_) += h.raw_size;
    }
    job->slot = slot;
    job->size = static_cast<uint32_t>(h.raw_size);
    job->codec = h.codec;
    job->transform = h.transform;
    job->payload_size = h.payload_size;
    job->raw_hash = h.raw_hash;
    return Status::Ok();
  }

  // Any other frame whose header was read: reads and applies it, and acts on
  // it (an object's target, a zero run to hand out, a reference to copy
  // later, the stream's end: done_).
  Status ApplyFrame(const FrameHeader& h, uint64_t at) {
    small_.resize(h.payload_size);
    Status s = reader_.ReadPayload(small_);
    if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
    DedupRef ref;
    s = validator_.Apply(h, small_, &ref);
    if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
    switch (static_cast<FrameKind>(h.kind)) {
      case FrameKind::kObjectBegin:
        return ResolveTarget(h, at);
      case FrameKind::kZeroRun:
        zero_bytes_ += h.raw_size;
        if (targets_.at(h.object_id).zero_filled) break;  // nothing to write
        zero_job_ = MakeJob(h, at, RestoreJob::kZero);
        zero_left_ = h.raw_size;
        break;
      case FrameKind::kDedupRef:
        refs_.push_back(PendingRef{targets_.at(h.object_id), h.offset, static_cast<uint32_t>(h.raw_size),
                                   ref.source_object_id, ref.source_offset});
        dedup_bytes_ += h.raw_size;
        break;
      case FrameKind::kObjectEnd:  // fully checked by the validator
        if (on_object_end_) VF_RETURN_IF_ERROR(on_object_end_(*validator_.object(h.object_id)));
        names_.erase(h.object_id);
        break;
      case FrameKind::kStreamEnd:
        VF_RETURN_IF_ERROR(reader_.ExpectEnd());
        done_ = true;
        break;
      default:
        break;
    }
    return Status::Ok();
  }

  // An OBJECT_BEGIN: where the object goes, from the resolver, charged to
  // the reader's records.
  Status ResolveTarget(const FrameHeader& h, uint64_t at) {
    const ObjectState* object = validator_.object(h.object_id);
    Result<RestoreTarget> target = resolve_(*object);
    if (!target.ok()) return target.status().WithContext(validator_.Describe(h, at));
    if (pool_->DeviceIndex(target->device) >= pool_->device_count())
      return Status::InvalidArgument("restore target for " + Printable(object->metadata.name) +
                                     " is on an unknown device");
    Status s = validator_.ChargeCallerRecords(kTargetRecordBytes + target->kept_bytes,
                                              "the restore target of object " + std::to_string(h.object_id) +
                                                  " (after " + std::to_string(targets_.size()) + " objects)");
    if (!s.ok()) return s.WithContext(validator_.Describe(h, at));
    targets_[h.object_id] = *target;
    names_[h.object_id] = std::make_shared<const std::string>(object->metadata.name);
    return Status::Ok();
  }
  // Records `payload` as `slot`'s, read in place, and tells the source what
  // no slot needs any more: what lies before the earliest in-place payload
  // still in use, or before the end of the newest when none is.
  void KeepInPlace(uint32_t slot, std::span<const uint8_t> payload) {
    in_place_[slot] = payload.data();
    in_place_end_ = payload.data() + payload.size();
    const uint8_t* first_in_use = in_place_end_;
    for (const uint8_t* p : in_place_)
      if (p && std::less<const uint8_t*>()(p, first_in_use)) first_in_use = p;
    reader_.DoneBefore(first_in_use);
  }

  RestoreJob MakeJob(const FrameHeader& h, uint64_t at, RestoreJob::Kind kind) {
    RestoreJob job;
    job.kind = kind;
    job.target = targets_.at(h.object_id);
    job.device_index = pool_->DeviceIndex(job.target.device);
    job.ring = next_ring_++ % job.target.device->RingCount();
    job.offset = h.offset;
    job.frame = h.sequence;
    job.stream_offset = at;
    job.object_name = names_.at(h.object_id);
    return job;
  }

  FrameReader reader_;
  StreamValidator validator_;
  const RestoreResolver& resolve_;
  const ObjectEndHook& on_object_end_;
  SlotPool* pool_ = nullptr;
  uint32_t slot_size_ = 0;
  uint32_t zero_piece_ = 0;
  ErrorLatch* errors_;
  bool held_ = false;  // a DATA frame header read, its payload not: it needs larger slots
  FrameHeader held_header_;
  uint64_t held_at_ = 0;
  bool done_ = false;
  bool paused_ = false;
  std::map<uint32_t, RestoreTarget> targets_;
  std::map<uint32_t, std::shared_ptr<const std::string>> names_;  // of the open objects
  std::vector<PendingRef> refs_;
  std::vector<uint8_t> small_;
  std::vector<const uint8_t*> in_place_;   // per slot: its job's payload when read in place
  const uint8_t* in_place_end_ = nullptr;  // one past the newest payload read in place
  RestoreJob zero_job_;
  uint64_t zero_left_ = 0;
  uint32_t next_ring_ = 0;
  uint64_t zero_bytes_ = 0;
  uint64_t dedup_bytes_ = 0;
  uint64_t data_chunks_ = 0;
  uint64_t base_ref_bytes_ = 0;
  uint64_t base_delta_bytes_ = 0;
  std::shared_ptr<const BaseStream> base_;
};

// Resolves DEDUP_REF ranges device-side: each range is read from where the
// DATA frame it names was restored into a staging slot, then written to its
// own place. Batches as many ranges as there are slots, spread over the
// rings, so the copies overlap.
Status CopyReferences(const std::vector<PendingRef>& refs, const std::map<uint32_t, RestoreTarget>& targets,
                      SlotPool& pool, std::chrono::milliseconds timeout) {
  for (size_t first = 0; first < refs.size(); first += pool.size()) {
    const size_t count = std::min(pool.size(), refs.size() - first);
    std::vector<DmaFence> fences(count);
    for (int pass = 0; pass < 2; ++pass) {  // 0: read the sources, 1: write the targets
      for (size_t i = 0; i < count; ++i) {
        const PendingRef& ref = refs[first + i];
        const RestoreTarget& from = targets.at(ref.source_object);
        const RestoreTarget& side = pass == 0 ? from : ref.target;
        uint32_t staging = pool.slot(static_cast<uint32_t>(i)).staging_handles[pool.DeviceIndex(side.device)];
        uint32_t ring = static_cast<uint32_t>(i % side.device->RingCount());
        Result<DmaFence> fence = pass == 0 ? side.device->SubmitCopy(ring, DmaDirection::kDeviceToHost, side.bo,
                                                                     ref.source_offset, staging, 0, ref.size)
                                           : side.device->SubmitCopy(ring, DmaDirection::kHostToDevice, side.bo,
                                                                     ref.offset, staging, 0, ref.size);
        if (!fence.ok())
          return fence.status().WithContext("copying a deduplicated chunk to offset " + std::to_string(ref.offset));
        fences[i] = *fence;
      }
      for (size_t i = 0; i < count; ++i) {
        const PendingRef& ref = refs[first + i];
        Device* device = pass == 0 ? targets.at(ref.source_object).device : ref.target.device;
        Status s = device->WaitFence(fences[i], timeout);
        if (!s.ok()) return s.WithContext("copying a deduplicated chunk to offset " + std::to_string(ref.offset));
      }
    }
  }
  return Status::Ok();
}

// What a restore runs with, from its options, its devices and the stream's
// header.
struct RestorePlan {
  PipelineOptions options;  // with the machine's defaults
  uint32_t rings = 0;       // of every device
  // The stream's base, or null. With a base, each thread resolving
  // references keeps a chunk of the base's bytes and, per stream of its
  // chain, a frame and a decoded chunk, with a decoder for them.
  const BaseStream* base = nullptr;
  uint32_t chain_streams = 0;
  uint32_t payload_extra = 0;  // a BASE_DELTA's reference before its delta
  uint32_t slot_size = 0;      // to begin with
  unsigned threads = 0;

  // What a thread resolving base frames of chunks of `size` keeps.
  uint64_t BaseThreadBytes(uint64_t size) const { return base ? BaseFrameBufferBytes(size, chain_streams) : 0; }
};

// Sizes the restore: as many threads as the budget feeds (said through
// options.note when fewer than asked for).
RestorePlan PlanRestore(const PipelineOptions& options, const std::vector<Device*>& devices, const StreamHeader& header,
                        const BaseStream* base) {
  RestorePlan plan;
  plan.options = options;
  for (Device* d : devices) plan.rings += d->RingCount();
  plan.base = base;
  plan.chain_streams = base ? base->DescriptorForDependent().chain_length : 0;
  plan.payload_extra = base ? kBaseChunkRefSize : 0;
  // Restore buffers start at options.chunk_size and grow when a DATA frame
  // is larger. The stream header's chunk_size is a hint that readers must
  // not rely on (FORMAT.md 2), so it is not used.
  plan.slot_size = std::clamp<uint32_t>(options.chunk_size, 1, kMaxChunkSize);
  // As many threads as the budget feeds: decoder state and a slot each, for
  // chunks of slot_size.
  const uint64_t dedup_charge =
      (header.flags & kStreamFlagDedup)
          ? uint64_t{header.dedup_window} * kDedupWindowEntryBytes + kMaxPendingReferences * sizeof(PendingRef)
          : 0;
  // A thread resolving a base frame waits for the base's reads where it lies
  // on S3: then as many threads as it asks to keep reads in flight.
  const unsigned wanted_threads = ThreadsWithBaseReads(options.threads, base, true);
  plan.threads =
      ThreadsTheBudgetFeeds(wanted_threads, options.max_memory, options.max_memory / 8 + dedup_charge + plan.slot_size,
                            ChunkDecoder::MemoryBytes(plan.slot_size) + plan.BaseThreadBytes(plan.slot_size),
                            2 * uint64_t{plan.slot_size} + 8192);
  if (plan.threads < options.threads && options.note)
    options.note(ThreadCapNote(options.threads, plan.threads, options.max_memory));
  return plan;
}

// Charges what the reader keeps for the whole restore: its records (an
// eighth of the budget: `record_limit`), the base chain's index, and with
// dedup the window the stream declares and the references read and not yet
// copied.
Status ChargeReaderRecords(const RestorePlan& plan, const StreamHeader& header, uint64_t record_limit,
                           MemoryBudget* budget) {
  VF_RETURN_IF_ERROR(budget->Charge(record_limit, "the reader's records (object metadata, byte ranges, the index)"));
  if (plan.base) VF_RETURN_IF_ERROR(budget->Charge(plan.base->memory_bytes(), "the index of the stream's base chain"));
  if (header.flags & kStreamFlagDedup) {
    VF_RETURN_IF_ERROR(
        budget->Charge(uint64_t{header.dedup_window} * kDedupWindowEntryBytes,
                       "the stream's dedup window of " + std::to_string(header.dedup_window) + " DATA frames"));
    VF_RETURN_IF_ERROR(budget->Charge(kMaxPendingReferences * sizeof(PendingRef), "dedup references to copy"));
  }
  return Status::Ok();
}

// One host buffer registered as staging with every device, unregistered
// when this goes.
class SharedStaging {
 public:
  explicit SharedStaging(const std::vector<Device*>& devices) : devices_(devices) {}
  ~SharedStaging() {
    for (size_t i = 0; i < handles_.size(); ++i) (void)devices_[i]->UnregisterStaging(handles_[i]);
  }
  SharedStaging(const SharedStaging&) = delete;
  SharedStaging& operator=(const SharedStaging&) = delete;

  Status Register(uint8_t* data, size_t size) {
    for (Device* d : devices_) {
      VF_ASSIGN_OR_RETURN(uint32_t handle, d->RegisterStaging(data, size));
      handles_.push_back(handle);
    }
    return Status::Ok();
  }
  // The buffer's handle on the device at `device_index` of the devices given.
  uint32_t handle(size_t device_index) const { return handles_[device_index]; }

 private:
  const std::vector<Device*>& devices_;
  std::vector<uint32_t> handles_;
};

// The restore graph (pipeline.h): its slots and shared state, and each
// node's body as a method that RunGraph() wires to the others. Run() runs
// the graph until the stream ends, pausing it to copy dedup references and
// to grow the slots for larger chunks.
class RestoreGraph {
 public:
  // Everything given must outlive the graph.
  RestoreGraph(const std::vector<Device*>& devices, const RestorePlan& plan, FrameSource* frames, ErrorLatch* errors,
               MemoryBudget* budget)
      : devices_(devices),
        plan_(plan),
        options_(plan.options),
        frames_(frames),
        errors_(errors),
        budget_(budget),
        slot_size_(plan.slot_size),
        zero_staging_(devices),
        completer_(plan.options.dma_timeout) {}

  // Takes the zero buffer and the first slots from the budget, and
  // registers the zero buffer with the devices.
  Status Prepare();
  // Restores the rest of the stream; OK once it is complete and every byte
  // has reached its device.
  Status Run();
  uint64_t done_bytes() const { return done_bytes_; }
  uint64_t reference_batches() const { return reference_batches_; }
  size_t slots() const { return pool_->size(); }
  double read_seconds() const { return read_seconds_; }  // inside the serial read stage
  // The serial stages' CPU (with options.measure_serial_cpu).
  std::vector<SerialStageCpu> serial_stages() const { return {{"read", read_cpu_}, {"account", account_cpu_}}; }

 private:
  using ReadNode = flow::multifunction_node<uint32_t, std::tuple<RestoreJob>>;
  using DmaNode = flow::async_node<RestoreJob, RestoreJob>;

  Status MakePool(uint32_t size);
  Status CopyPendingReferences();
  void RunGraph();
  void Read(uint32_t slot, ReadNode::output_ports_type& out);
  RestoreJob Decode(RestoreJob job);
  void StartDma(const RestoreJob& job, DmaNode::gateway_type& gateway);
  uint32_t Account(const RestoreJob& job);

  const std::vector<Device*>& devices_;
  const RestorePlan& plan_;
  const PipelineOptions& options_;
  FrameSource* const frames_;  // the read stage's (serial), and Run()'s between graph runs
  ErrorLatch* const errors_;
  MemoryBudget* const budget_;
  uint32_t slot_size_;
  std::unique_ptr<SlotPool> pool_;
  uint64_t decoder_charge_ = 0;  // the decoders' state for the pool's chunk size
  BudgetedBuffer zeros_;         // the bytes of zero runs, written from here
  SharedStaging zero_staging_;   // after zeros_: unregistered before it is freed
  uint64_t done_bytes_ = 0;      // the account stage's (serial), and Run()'s between graph runs
  uint64_t reference_batches_ = 0;
  double read_seconds_ = 0;  // the read stage's
  double read_cpu_ = 0;      // the read stage's CPU seconds
  double account_cpu_ = 0;   // the account stage's
  double* CpuOf(double* stage) const { return options_.measure_serial_cpu ? stage : nullptr; }
  // After what its callbacks use and the staging they copy from: destroyed
  // before them, waiting for every watched fence.
  DmaCompleter completer_;
  std::unique_ptr<oneapi::tbb::global_control> allow_threads_;
  oneapi::tbb::enumerable_thread_specific<ChunkDecoder> decoders_;
  oneapi::tbb::enumerable_thread_specific<BaseFrameBuffers> base_buffers_;
};

Status RestoreGraph::Prepare() {
  VF_ASSIGN_OR_RETURN(zeros_, BudgetedBuffer::Allocate(budget_, slot_size_, "zero buffer"));
  VF_RETURN_IF_ERROR(MakePool(slot_size_));
  return zero_staging_.Register(zeros_.data(), zeros_.size());
}

// The slots (and the decoders' state) for chunks of up to `size` bytes; the
// graph must be drained.
Status RestoreGraph::MakePool(uint32_t size) {
  pool_.reset();
  budget_->Refund(decoder_charge_);
  decoder_charge_ = 0;
  const unsigned threads = plan_.threads;
  const uint64_t charge = uint64_t{threads} * (ChunkDecoder::MemoryBytes(size) + plan_.BaseThreadBytes(size));
  VF_RETURN_IF_ERROR(budget_->Charge(charge, "decoder state for " + std::to_string(threads) + " threads"));
  decoder_charge_ = charge;
  VF_ASSIGN_OR_RETURN(pool_, SlotPool::Create(budget_, devices_, size, size + plan_.payload_extra, /*min_slots=*/2,
                                              /*max_slots=*/2 * plan_.rings + 3 * threads + 4));
  frames_->UsePool(pool_.get(), size, static_cast<uint32_t>(zeros_.size()));
  return Status::Ok();
}

Status RestoreGraph::Run() {
  const unsigned threads = plan_.threads;
  VF_RETURN_IF_ERROR(
      ReadyTbbThreads(threads, "the restore graph with " + std::to_string(threads) + " threads", &allow_threads_));
  oneapi::tbb::task_arena arena(static_cast<int>(threads));
  for (;;) {
    // Runs the graph until the stream is done or failed, or until the frame
    // source pauses to have its references copied.
    arena.execute([this] { RunGraph(); });
    VF_RETURN_IF_ERROR(errors_->status());
    frames_->Drained();
    const bool paused = frames_->paused();
    VF_RETURN_IF_ERROR(CopyPendingReferences());
    if (frames_->complete()) break;
    if (!paused) return Status::Internal("restore graph stopped before STREAM_END without an error");
    if (const uint64_t needed = frames_->needed_slot_size()) {
      while (slot_size_ < needed) slot_size_ = std::min<uint32_t>(2 * slot_size_, kMaxChunkSize);
      Status s = MakePool(slot_size_);
      if (!s.ok())
        return s.WithContext(frames_->DescribeHeld() + ": restoring chunks of " + FormatSize(needed) +
                             " needs buffers of " + FormatSize(slot_size_));
    }
    frames_->Resume();
  }
  done_bytes_ = frames_->raw_bytes();
  if (options_.progress) options_.progress(done_bytes_);
  return Status::Ok();
}

// Dedup references, once the graph has drained: every DATA frame read so
// far has reached its device, so each reference is copied from where the
// first copy of its bytes now lives.
Status RestoreGraph::CopyPendingReferences() {
  const std::vector<PendingRef> refs = frames_->TakeRefs();
  if (refs.empty()) return Status::Ok();
  VF_RETURN_IF_ERROR(CopyReferences(refs, frames_->targets(), *pool_, options_.dma_timeout));
  ++reference_batches_;
  for (const PendingRef& ref : refs) done_bytes_ += ref.size;
  if (options_.progress) options_.progress(done_bytes_);
  return Status::Ok();
}

// Wires the stages (see pipeline.h) and runs them until the frame source
// stops: a free slot is read into, decoded, and written to its device by
// DMA, then counted and freed.
void RestoreGraph::RunGraph() {
  flow::graph g;
  flow::queue_node<uint32_t> free_slots(g);
  ReadNode read(g, flow::serial, [this](uint32_t slot, ReadNode::output_ports_type& out) { Read(slot, out); });
  flow::function_node<RestoreJob, RestoreJob> decode(g, flow::unlimited,
                                                     [this](RestoreJob job) { return Decode(std::move(job)); });
  DmaNode dma(g, flow::unlimited, [this](const RestoreJob& job, DmaNode::gateway_type& gw) { StartDma(job, gw); });
  flow::function_node<RestoreJob, uint32_t> account(g, flow::serial,
                                                    [this](const RestoreJob& job) { return Account(job); });

  flow::make_edge(free_slots, read);
  flow::make_edge(flow::output_port<0>(read), decode);
  flow::make_edge(decode, dma);
  flow::make_edge(dma, account);
  flow::make_edge(account, free_slots);

  for (uint32_t i = 0; i < pool_->size(); ++i) free_slots.try_put(i);
  g.wait_for_all();
}

// The read stage (serial): the next job from the frame source, for `slot`.
void RestoreGraph::Read(uint32_t slot, ReadNode::output_ports_type& out) {
  StageCpuClock clock(CpuOf(&read_cpu_));
  const auto began = std::chrono::steady_clock::now();
  RestoreJob job;
  const bool more = frames_->Next(slot, &job);
  read_seconds_ += SecondsSince(began);
  if (more) std::get<0>(out).try_put(job);
}

// The decode stage (parallel): a DATA payload decoded and checked against
// its hash, or a base frame resolved, into the slot's staging.
RestoreJob RestoreGraph::Decode(RestoreJob job) {
  if (job.kind == RestoreJob::kZero || errors_->failed()) return job;
  Slot& slot = pool_->slot(job.slot);
  std::span<uint8_t> dst(slot.staging.data(), job.size);
  std::span<const uint8_t> payload(job.payload ? job.payload : slot.payload.data(), job.payload_size);
  const auto codec = static_cast<CodecId>(job.codec);
  const auto transform = static_cast<TransformId>(job.transform);
  Status s;
  if (job.kind == RestoreJob::kData) {
    s = decoders_.local().Decode(codec, transform, payload, dst);
    if (s.ok() && Hash64(dst.data(), dst.size()) != job.raw_hash)
      s = Status::Corruption("payload hash mismatch: decoded bytes hash to " + HexHash(Hash64(dst.data(), dst.size())) +
                             ", frame says " + HexHash(job.raw_hash));
  } else {
    s = ResolveBaseFrame(*plan_.base, job.kind == RestoreJob::kBaseRef ? FrameKind::kBaseRef : FrameKind::kBaseDelta,
                         codec, transform, job.raw_hash, payload, job.base_ref, decoders_.local(),
                         base_buffers_.local(), dst);
  }
  if (!s.ok()) errors_->Set(s.WithContext(Where(job)));
  return job;
}

// The DMA stage: writes the job's bytes (its slot's, or the zero buffer's)
// to its target, passing the job on once the copy is over (from the
// completer's thread).
void RestoreGraph::StartDma(const RestoreJob& job, DmaNode::gateway_type& gateway) {
  if (errors_->failed()) {
    gateway.try_put(job);
    return;
  }
  uint32_t staging = job.kind == RestoreJob::kZero ? zero_staging_.handle(job.device_index)
                                                   : pool_->slot(job.slot).staging_handles[job.device_index];
  Result<DmaFence> fence = job.target.device->SubmitCopy(job.ring, DmaDirection::kHostToDevice, job.target.bo,
                                                         job.offset, staging, 0, job.size);
  if (!fence.ok()) {
    errors_->Set(fence.status().WithContext("DMA write for " + Where(job)));
    gateway.try_put(job);
    return;
  }
  gateway.reserve_wait();
  Status watching = completer_.Watch(job.target.device, *fence, [this, job, gw = &gateway](Status status) {
    if (!status.ok()) errors_->Set(status.WithContext("DMA write for " + Where(job)));
    gw->try_put(job);
    gw->release_wait();
  });
  if (!watching.ok()) {
    // Nobody else waits for this copy: wait here (bounded by the DMA
    // timeout), so that it is over before its slot is reused or freed.
    (void)job.target.device->WaitFence(*fence, options_.dma_timeout);
    errors_->Set(watching.WithContext("DMA write for " + Where(job)));
    gateway.try_put(job);
    gateway.release_wait();
  }
}

// The account stage (serial): counts the job's bytes and frees its slot.
uint32_t RestoreGraph::Account(const RestoreJob& job) {
  StageCpuClock clock(CpuOf(&account_cpu_));
  done_bytes_ += job.size;
  if (options_.progress && !errors_->failed()) options_.progress(done_bytes_);
  return job.slot;
}

Status Restore(ByteSource* source, const std::vector<Device*>& devices, const RestoreResolver& resolve,
               const PipelineOptions& requested, PipelineStats* stats, const ObjectEndHook& on_object_end) {
  const auto start = std::chrono::steady_clock::now();
  const PipelineOptions options = WithMachineDefaults(requested);
  ErrorLatch errors;
  FrameSource frames(source, resolve, on_object_end, &errors);
  StreamHeader header;
  VF_RETURN_IF_ERROR(frames.ReadStreamHeader(&header));
  if (header.flags & kStreamFlagBase) VF_RETURN_IF_ERROR(frames.OpenBase(options.open_base));
  const RestorePlan plan = PlanRestore(options, devices, header, frames.base().get());

  MemoryBudget budget(options.max_memory);
  // What the validator keeps of objects, ranges and the index (an eighth).
  const uint64_t record_limit = options.max_memory / 8;
  frames.SetRecordLimit(record_limit);
  VF_RETURN_IF_ERROR(ChargeReaderRecords(plan, header, record_limit, &budget));
  RestoreGraph graph(devices, plan, &frames, &errors, &budget);
  VF_RETURN_IF_ERROR(graph.Prepare());
  VF_RETURN_IF_ERROR(graph.Run());

  FillPipelineStats(frames.figures(),
                    EngineFigures{.slots = graph.slots(),
                                  .budget_peak = budget.peak(),
                                  .threads = plan.threads,
                                  .start = start,
                                  .serial_seconds = graph.read_seconds()},
                    stats);
  stats->reference_batches = graph.reference_batches();
  stats->serial_stages.clear();
  if (options.measure_serial_cpu) stats->serial_stages = graph.serial_stages();
  return Status::Ok();
}

}  // namespace

Status RunRestore(ByteSource* source, const std::vector<Device*>& devices, const RestoreResolver& resolve,
                  const PipelineOptions& options, PipelineStats* stats, const ObjectEndHook& on_object_end) {
  return ExceptionBoundary("the restore graph",
                           [&] { return Restore(source, devices, resolve, options, stats, on_object_end); });
}

}  // namespace vramflow
