// SPDX-License-Identifier: MIT
// The dump graph (see pipeline.h).
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "codecs/chunk_analysis.h"
#include "common/exception_boundary.h"
#include "common/hash.h"
#include "common/sha256.h"
#include "streamer/base_chunk_coding.h"
#include "streamer/device/dma_completer.h"
#include "streamer/device/lent_slots.h"
#include "streamer/device/slot_pool.h"
#include "streamer/format/dedup_window.h"
#include "streamer/format/stream_writer.h"
#include "streamer/machine/memory_budget.h"
#include "streamer/machine/tbb_workers.h"
#include "streamer/pipeline.h"
#include "streamer/pipeline_common.h"
#include "streamer/pipeline_fit.h"

namespace vramflow {
namespace {

namespace flow = oneapi::tbb::flow;

struct DumpJob {
  enum Kind : uint8_t { kBegin, kChunk, kEnd };
  uint64_t seq = 0;
  Kind kind = kChunk;
  uint32_t source = 0;
  uint32_t ring = 0;
  uint64_t offset = 0;
  uint32_t size = 0;
  uint32_t slot = 0;
  bool zero = false;
  bool duplicate = false;
  Hash128 content;
  std::optional<uint64_t> raw_hash;  // from HashChunk, when dedup hashed the chunk
  uint32_t ref_source = 0;
  uint64_t ref_offset = 0;
  EncodedChunk encoded;
  // The SHA-256 of the chunk's bytes: for DIGEST_BLOCKs and base references.
  Sha256Digest sha256{};
  // An incremental dump: the base chunk at the same place of the matched
  // base object, if there is one (its object id in the base; 0: none).
  uint32_t base_object = 0;
  Sha256Digest base_sha256{};
  bool base_equal = false;    // the bytes are the base chunk's: a BASE_REF
  bool base_differs = false;  // they are not (full mode): coded already, plain and as a delta
  bool use_delta = false;     // the delta is smaller: a BASE_DELTA, `delta` codes the XOR with the base chunk
  EncodedChunk delta;
};

// Produces jobs in stream order: BEGIN, chunks, END for each object, taking
// one job per device in turn so every device's DMA stays busy.
class JobGenerator {
 public:
  JobGenerator(const std::vector<DumpSource>& sources, uint32_t chunk_size)
      : sources_(sources), chunk_size_(chunk_size) {
    std::map<Device*, size_t> lane_of;
    for (uint32_t i = 0; i < sources.size(); ++i) {
      auto [it, inserted] = lane_of.emplace(sources[i].device, lanes_.size());
      if (inserted) lanes_.push_back(Lane{});
      lanes_[it->second].pending.push_back(i);
    }
  }

  bool Next(DumpJob* job) {
    for (size_t tried = 0; tried < lanes_.size(); ++tried) {
      Lane& lane = lanes_[cursor_];
      cursor_ = (cursor_ + 1) % lanes_.size();
      if (NextInLane(lane, job)) {
        job->seq = next_seq_++;
        return true;
      }
    }
    return false;
  }

 private:
  struct Lane {
    std::deque<uint32_t> pending;
    bool begun = false;
    uint64_t offset = 0;
    uint32_t next_ring = 0;
  };

  bool NextInLane(Lane& lane, DumpJob* job) {
    if (lane.pending.empty()) return false;
    *job = DumpJob{};
    job->source = lane.pending.front();
    const DumpSource& s = sources_[job->source];
    if (!lane.begun) {
      lane.begun = true;
      lane.offset = 0;
      job->kind = DumpJob::kBegin;
    } else if (lane.offset < s.size) {
      job->kind = DumpJob::kChunk;
      job->offset = lane.offset;
      job->size = static_cast<uint32_t>(std::min<uint64_t>(chunk_size_, s.size - lane.offset));
      job->ring = lane.next_ring++ % s.device->RingCount();
      lane.offset += job->size;
    } else {
      job->kind = DumpJob::kEnd;
      lane.pending.pop_front();
      lane.begun = false;
    }
    return true;
  }

  const std::vector<DumpSource>& sources_;
  const uint32_t chunk_size_;
  std::vector<Lane> lanes_;
  size_t cursor_ = 0;
  uint64_t next_seq_ = 0;
};

// Content -> (source, offset) of the latest DATA frames.
using FirstCopies = DedupWindow<Hash128, std::pair<uint32_t, uint64_t>, ContentKeyHash>;

// The dedup window the stream declares: what was asked for (or the default),
// but no more than the dump has chunks.
Result<uint32_t> ChooseDedupWindow(const std::vector<DumpSource>& sources, const PipelineOptions& options) {
  uint64_t window = options.dedup_window ? options.dedup_window : DefaultDedupWindow(options.max_memory);
  if (window > kMaxDedupWindow)
    return Status::InvalidArgument("dedup window of " + std::to_string(window) + " chunks is more than the format's " +
                                   std::to_string(kMaxDedupWindow));
  uint64_t chunks = 0;
  for (const DumpSource& s : sources) chunks += (s.size + options.chunk_size - 1) / options.chunk_size;
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min(window, chunks)));
}

std::string Where(const DumpSource& s, const DumpJob& job) {
  return "object '" + s.metadata.name + "' on " + s.device->Describe() + " at offset " + std::to_string(job.offset);
}

bool HasAttribute(const ObjectMetadata& metadata, const std::string& key) {
  for (const auto& [k, v] : metadata.attributes)
    if (k == key) return true;
  return false;
}

// The base object each source continues, or null (FORMAT.md 4.12, "Matching
// objects"): a GPU buffer (attributes gpu-id and gpu-va) by its GPU's place
// among this dump's GPUs in order of first appearance, its address and size;
// anything else by name (BaseStream::Match).
std::vector<const SeekIndexObject*> MatchBaseObjects(const BaseStream& base, const std::vector<DumpSource>& sources) {
  std::vector<const Device*> gpus;
  std::vector<const SeekIndexObject*> matched;
  for (const DumpSource& s : sources) {
    std::optional<uint32_t> gpu_ordinal;
    if (HasAttribute(s.metadata, "gpu-id") && HasAttribute(s.metadata, "gpu-va")) {
      auto it = std::find(gpus.begin(), gpus.end(), s.device);
      if (it == gpus.end()) it = gpus.insert(gpus.end(), s.device);
      gpu_ordinal = static_cast<uint32_t>(it - gpus.begin());
    }
    matched.push_back(base.Match(s.metadata, s.size, gpu_ordinal));
  }
  return matched;
}

// What one thread's BaseStream::ReadChunk may hold for chunks of `chunk`
// bytes (BaseScratch): a frame and its decoded bytes for every stream of the
// chain, and a decoder's state.
uint64_t BaseReadBytes(uint64_t chunk, uint32_t chain_streams) {
  return uint64_t{chain_streams} * (2 * chunk + kBaseChunkRefSize + ChunkDecoder::MemoryBytes(chunk));
}

}  // namespace

uint32_t DefaultDedupWindow(uint64_t max_memory) {
  const uint64_t affordable = max_memory / 8 / kDedupWindowEntryBytes;
  return static_cast<uint32_t>(std::clamp<uint64_t>(affordable, 1, 65536));
}

namespace {

// What a dump runs with, decided before it charges or writes anything.
struct DumpPlan {
  PipelineOptions options;  // with the machine's defaults
  std::vector<Device*> devices;
  uint32_t rings = 0;  // of every device
  const BaseStream* base = nullptr;
  // Every base chunk the stream will name is read, as a restore reads it,
  // before the dump can succeed. Full mode also reads the chunks it compares
  // and codes deltas; refs-only matches by the base's digests and reads only
  // the chunks they say are equal.
  bool read_base = false;
  bool deltas = false;
  uint32_t dedup_window = 0;
  uint64_t codec_state = 0;  // per thread
  uint64_t base_index = 0;   // the base's index, held throughout
  size_t slot_scratch = 0;   // per slot
  unsigned threads = 0;
};

// Checks the options and sources, and sizes the dump: as many threads as the
// budget feeds (said through options.note when fewer than asked for).
Result<DumpPlan> PlanDump(const std::vector<DumpSource>& sources, const PipelineOptions& requested) {
  DumpPlan plan;
  plan.options = WithMachineDefaults(requested);
  const PipelineOptions& options = plan.options;
  const uint32_t chunk = options.chunk_size;
  if (chunk == 0 || chunk > kMaxChunkSize) return Status::InvalidArgument("chunk size must be 1 byte .. 64 MiB");

  for (const DumpSource& s : sources) {
    if (!s.device) return Status::InvalidArgument("dump source '" + s.metadata.name + "' has no device");
    if (std::find(plan.devices.begin(), plan.devices.end(), s.device) == plan.devices.end()) {
      plan.devices.push_back(s.device);
      plan.rings += s.device->RingCount();
    }
  }

  VF_RETURN_IF_ERROR(CheckDumpBase(options));
  const BaseStream* base = options.base.get();
  plan.base = base;
  plan.read_base = base != nullptr;
  plan.deltas = base && !options.base_refs_only;
  const uint32_t chain_streams = base ? base->DescriptorForDependent().chain_length : 0;  // the base and its own bases

  if (options.dedup) {
    VF_ASSIGN_OR_RETURN(plan.dedup_window, ChooseDedupWindow(sources, options));
  }
  // As many threads as the budget feeds: codec state and a slot each. A
  // full-mode incremental dump needs, per thread, room to read base chunks,
  // and per slot a base chunk and its delta's payload (the slot's scratch).
  plan.codec_state =
      ChunkEncoder::MemoryBytes(options.encoder, chunk) + (plan.read_base ? BaseReadBytes(chunk, chain_streams) : 0);
  plan.base_index = base ? base->memory_bytes() : 0;
  plan.slot_scratch = plan.read_base ? chunk + (plan.deltas ? ChunkEncoder::MaxPayloadSize(chunk) : 0) : 0;
  // A thread coding against a base on S3 waits for its chunk: as many
  // threads as the base asks to keep reads in flight.
  plan.threads = ThreadsTheBudgetFeeds(
      ThreadsWithBaseReads(options.threads, base, plan.read_base), options.max_memory,
      uint64_t{plan.dedup_window} * kDedupWindowEntryBytes + plan.base_index, plan.codec_state,
      chunk + ChunkEncoder::MaxPayloadSize(chunk) + 8192 + (plan.slot_scratch ? plan.slot_scratch + 4096 : 0));
  if (plan.threads < options.threads && options.note)
    options.note(ThreadCapNote(options.threads, plan.threads, options.max_memory));
  return plan;
}

// Charges the plan's fixed costs to `budget`, then makes the slot pool of
// what is left.
Result<std::unique_ptr<SlotPool>> CreateDumpPool(const DumpPlan& plan, MemoryBudget* budget) {
  const uint32_t chunk = plan.options.chunk_size;
  if (plan.base) VF_RETURN_IF_ERROR(budget->Charge(plan.base_index, "the base's index"));
  VF_RETURN_IF_ERROR(budget->Charge(uint64_t{plan.threads} * plan.codec_state,
                                    "codec state for " + std::to_string(plan.threads) + " threads"));
  // Charged before the pool, which takes what is left.
  if (plan.options.dedup)
    VF_RETURN_IF_ERROR(budget->Charge(uint64_t{plan.dedup_window} * kDedupWindowEntryBytes,
                                      "dedup window of " + std::to_string(plan.dedup_window) + " chunks"));
  // Two slots per ring (one copying, one queued behind it) and two per
  // thread (one being coded, one coded and waiting for its turn to be
  // written). More only spreads the chunks in flight over more memory: each
  // slot is touched afresh and falls out of the cache before it comes round
  // again (pack -j 2 on 2 CPUs: 2-8% faster with 8 slots than with the 14 of
  // three per thread and four spare).
  Result<std::unique_ptr<SlotPool>> created =
      SlotPool::Create(budget, plan.devices, chunk, ChunkEncoder::MaxPayloadSize(chunk), /*min_slots=*/2,
                       /*max_slots=*/2 * plan.rings + 2 * plan.threads, plan.slot_scratch);
  if (!created.ok() && created.status().code() == Status::Code::kInvalidArgument)
    return Status::InvalidArgument(created.status().message() + " (raise --max-memory or lower --chunk-size)");
  return created;
}

// The stream's header for the plan, written to `sink`.
StreamHeader DumpHeader(const DumpPlan& plan, const ByteSink& sink) {
  const PipelineOptions& options = plan.options;
  StreamHeader header;
  header.chunk_size = options.chunk_size;
  header.zstd_level = static_cast<int8_t>(std::clamp(options.encoder.zstd_level, -128, 127));
  header.producer = options.producer;
  header.flags = (options.dedup ? kStreamFlagDedup : 0) |
                 (options.seek_index && sink.Seekable() ? kStreamFlagSeekIndex : 0) | (plan.base ? kStreamFlagBase : 0);
  header.dedup_window = plan.dedup_window;
  return header;
}

// Names the base (if any) and turns on chunk digests where wanted, then
// writes the stream's start.
Status StartDumpStream(const DumpPlan& plan, StreamWriter* writer) {
  if (plan.base) {
    BaseDescriptor descriptor = plan.base->DescriptorForDependent();
    if (!plan.options.base_location.empty()) descriptor.location = plan.options.base_location;
    writer->SetBase(std::move(descriptor));
  }
  // An incremental stream carries digests too, so that it can be a base.
  writer->SetChunkDigests(plan.options.chunk_digests || plan.base);
  return writer->Start();
}

// The codec state of the graph's parallel stages, one per thread, made
// inside the graph's arena.
struct StageCoders {
  explicit StageCoders(const EncoderOptions& encoder) : encoders(encoder) {}
  oneapi::tbb::enumerable_thread_specific<ChunkEncoder> encoders;
  oneapi::tbb::enumerable_thread_specific<BaseScratch> base_scratch;
};

// The dump graph (pipeline.h): its shared state, and each node's body as a
// method that RunGraph() wires to the others. The members that only one
// serial stage touches say which.
class DumpGraph {
 public:
  // Everything given must outlive the graph; the writer has started.
  DumpGraph(const std::vector<DumpSource>& sources, ByteSink* sink, const DumpPlan& plan, SlotPool* pool,
            StreamWriter* writer, LentSlots* lent)
      : sources_(sources),
        sink_(sink),
        plan_(plan),
        options_(plan.options),
        chunk_(plan.options.chunk_size),
        pool_(pool),
        writer_(writer),
        lent_(lent),
        // Each non-zero chunk's SHA-256, computed once: for the digests, and
        // for comparing with or naming a base chunk.
        hash_chunks_(writer->chunk_digests() || plan.base),
        generator_(sources, chunk_),
        object_ids_(sources.size(), 0),
        first_copies_(plan.dedup_window),
        completer_(plan.options.dma_timeout) {
    device_index_.resize(sources.size());
    for (size_t i = 0; i < sources.size(); ++i) device_index_[i] = pool->DeviceIndex(sources[i].device);
    if (plan.base) base_objects_ = MatchBaseObjects(*plan.base, sources);
  }

  // Runs every source through the graph on the plan's threads; the first
  // error, if any.
  Status Run();
  uint64_t done_bytes() const { return done_bytes_; }
  double write_seconds() const { return write_seconds_; }  // inside the serial write stage
  // The serial stages' CPU (with options.measure_serial_cpu); `finish_cpu`:
  // the writer's Finish() after the graph, counted with the write stage.
  std::vector<SerialStageCpu> serial_stages(double finish_cpu) const {
    return {{"generate", generate_cpu_}, {"dedup", dedup_cpu_}, {"write", write_cpu_ + finish_cpu}};
  }

 private:
  using DmaNode = flow::async_node<DumpJob, DumpJob>;
  using WriteNode = flow::multifunction_node<DumpJob, std::tuple<uint32_t>>;

  void RunGraph(StageCoders& coders);
  DumpJob Generate(oneapi::tbb::flow_control& fc);
  void StartDma(const DumpJob& job, DmaNode::gateway_type& gateway);
  DumpJob Analyze(DumpJob job, StageCoders& coders);
  Status CompareWithBase(DumpJob& job, std::span<const uint8_t> data, StageCoders& coders);
  Status TryDelta(DumpJob& job, std::span<const uint8_t> data, StageCoders& coders);
  DumpJob Dedup(DumpJob job);
  DumpJob Encode(DumpJob job, StageCoders& coders);
  void Write(const DumpJob& job, WriteNode::output_ports_type& ports);
  Status WriteFrame(const DumpJob& job, uint64_t* ticket);

  const std::vector<DumpSource>& sources_;
  ByteSink* const sink_;
  const DumpPlan& plan_;
  const PipelineOptions& options_;
  const uint32_t chunk_;
  SlotPool* const pool_;
  StreamWriter* const writer_;
  LentSlots* const lent_;  // the write stage's
  const bool hash_chunks_;
  std::vector<size_t> device_index_;                  // per source: its device's in the pool
  std::vector<const SeekIndexObject*> base_objects_;  // per source: its base object, or null
  ErrorLatch errors_;
  JobGenerator generator_;            // the input node's (serial)
  std::vector<uint32_t> object_ids_;  // the write stage's
  FirstCopies first_copies_;          // the dedup stage's (serial)
  uint64_t done_bytes_ = 0;           // the write stage's
  double write_seconds_ = 0;          // the write stage's
  // Each serial stage's CPU seconds, each its own stage's; null: not measured.
  double generate_cpu_ = 0, dedup_cpu_ = 0, write_cpu_ = 0;
  double* CpuOf(double* stage) const { return options_.measure_serial_cpu ? stage : nullptr; }
  // Last: destroyed first, waiting for every watched fence, whose callbacks
  // use the members above.
  DmaCompleter completer_;
  std::unique_ptr<oneapi::tbb::global_control> allow_threads_;
};

Status DumpGraph::Run() {
  const unsigned threads = plan_.threads;
  VF_RETURN_IF_ERROR(
      ReadyTbbThreads(threads, "the dump graph with " + std::to_string(threads) + " threads", &allow_threads_));
  oneapi::tbb::task_arena arena(static_cast<int>(threads));
  arena.execute([this] {
    StageCoders coders(options_.encoder);
    RunGraph(coders);
  });
  return errors_.status();
}

// Wires the stages (see pipeline.h) and runs them until every job is
// written: a job takes a free slot, is read from its device into it,
// analysed, deduplicated and encoded, then written in order, and the slot
// goes back.
void DumpGraph::RunGraph(StageCoders& coders) {
  flow::graph g;
  flow::input_node<DumpJob> generate(g, [this](oneapi::tbb::flow_control& fc) { return Generate(fc); });
  flow::queue_node<uint32_t> free_slots(g);
  flow::join_node<std::tuple<DumpJob, uint32_t>, flow::reserving> take_slot(g);
  flow::function_node<std::tuple<DumpJob, uint32_t>, DumpJob> attach(g, flow::unlimited,
                                                                     [](const std::tuple<DumpJob, uint32_t>& t) {
                                                                       DumpJob job = std::get<0>(t);
                                                                       job.slot = std::get<1>(t);
                                                                       return job;
                                                                     });
  DmaNode dma(g, flow::unlimited, [this](const DumpJob& job, DmaNode::gateway_type& gw) { StartDma(job, gw); });
  flow::function_node<DumpJob, DumpJob> analyze(
      g, flow::unlimited, [this, &coders](DumpJob job) { return Analyze(std::move(job), coders); });
  flow::sequencer_node<DumpJob> order_for_dedup(g, [](const DumpJob& job) { return job.seq; });
  flow::function_node<DumpJob, DumpJob> dedup(g, flow::serial, [this](DumpJob job) { return Dedup(std::move(job)); });
  flow::function_node<DumpJob, DumpJob> encode(g, flow::unlimited,
                                               [this, &coders](DumpJob job) { return Encode(std::move(job), coders); });
  flow::sequencer_node<DumpJob> order_for_write(g, [](const DumpJob& job) { return job.seq; });
  WriteNode write(g, flow::serial,
                  [this](const DumpJob& job, WriteNode::output_ports_type& ports) { Write(job, ports); });

  flow::make_edge(generate, flow::input_port<0>(take_slot));
  flow::make_edge(free_slots, flow::input_port<1>(take_slot));
  flow::make_edge(take_slot, attach);
  flow::make_edge(attach, dma);
  flow::make_edge(dma, analyze);
  flow::make_edge(analyze, order_for_dedup);
  flow::make_edge(order_for_dedup, dedup);
  flow::make_edge(dedup, encode);
  flow::make_edge(encode, order_for_write);
  flow::make_edge(order_for_write, write);
  flow::make_edge(flow::output_port<0>(write), free_slots);

  for (uint32_t i = 0; i < pool_->size(); ++i) free_slots.try_put(i);
  generate.activate();
  g.wait_for_all();
}

// The input node: the next job in stream order, until every source is done
// or the dump failed.
DumpJob DumpGraph::Generate(oneapi::tbb::flow_control& fc) {
  StageCpuClock clock(CpuOf(&generate_cpu_));
  DumpJob job;
  if (errors_.failed() || !generator_.Next(&job)) fc.stop();
  return job;
}

// The DMA stage: copies a chunk from its device into its slot's staging,
// passing the job on once the copy is over (from the completer's thread).
void DumpGraph::StartDma(const DumpJob& job, DmaNode::gateway_type& gateway) {
  if (job.kind != DumpJob::kChunk || errors_.failed()) {
    gateway.try_put(job);
    return;
  }
  const DumpSource& s = sources_[job.source];
  Slot& slot = pool_->slot(job.slot);
  Result<DmaFence> fence = s.device->SubmitCopy(job.ring, DmaDirection::kDeviceToHost, s.bo, job.offset,
                                                slot.staging_handles[device_index_[job.source]], 0, job.size);
  if (!fence.ok()) {
    errors_.Set(fence.status().WithContext("DMA read of " + Where(s, job)));
    gateway.try_put(job);
    return;
  }
  gateway.reserve_wait();
  Status watching = completer_.Watch(s.device, *fence, [this, job, gw = &gateway](Status status) {
    if (!status.ok()) errors_.Set(status.WithContext("DMA read of " + Where(sources_[job.source], job)));
    gw->try_put(job);
    gw->release_wait();
  });
  if (!watching.ok()) {
    // Nobody else waits for this copy: wait here (bounded by the DMA
    // timeout), so that it is over before its slot is reused or freed.
    (void)s.device->WaitFence(*fence, options_.dma_timeout);
    errors_.Set(watching.WithContext("DMA read of " + Where(s, job)));
    gateway.try_put(job);
    gateway.release_wait();
  }
}

// The analyze stage (parallel): zero check, content hash, SHA-256, the
// comparison with the base, and a changed chunk's coding both ways.
DumpJob DumpGraph::Analyze(DumpJob job, StageCoders& coders) {
  if (job.kind != DumpJob::kChunk || errors_.failed()) return job;
  std::span<const uint8_t> data(pool_->slot(job.slot).staging.data(), job.size);
  job.zero = options_.encoder.detect_zero_runs && IsAllZero(data);
  if (job.zero) return job;
  if (options_.dedup) {
    ChunkHashes h = HashChunk(data.data(), data.size());  // one pass: dedup key and frame hash
    job.content = h.content;
    job.raw_hash = h.hash64;
  }
  if (hash_chunks_) job.sha256 = Sha256(data);
  if (plan_.base) {
    Status s = CompareWithBase(job, data, coders);
    if (!s.ok()) errors_.Set(s.WithContext("comparing " + Where(sources_[job.source], job) + " with the base"));
  }
  // A changed chunk is coded here, both ways, so that the dedup stage
  // knows whether it becomes a DATA frame (which a DEDUP_REF may name)
  // or a BASE_DELTA (which it may not).
  if (job.base_differs && !errors_.failed()) {
    Slot& slot = pool_->slot(job.slot);
    Status s = coders.encoders.local().EncodeInto(data, std::span<uint8_t>(slot.payload.data(), slot.payload.size()),
                                                  &job.encoded, job.raw_hash);
    if (s.ok()) s = TryDelta(job, data, coders);
    if (!s.ok()) errors_.Set(s.WithContext("encoding " + Where(sources_[job.source], job)));
  }
  return job;
}

// Compares a chunk with the base chunk at its place, if there is one: equal
// bytes become a BASE_REF; in full mode different ones leave the base
// chunk's bytes in the slot's scratch for a delta. The base's stored SHA-256
// (where it has them) finds equal chunks, but only the base chunk's bytes,
// read and checked as a restore reads them, prove it: a digest or index that
// lies fails the dump, naming the base, instead of a stream no restore can
// read. Refs-only reads no changed chunk.
Status DumpGraph::CompareWithBase(DumpJob& job, std::span<const uint8_t> data, StageCoders& coders) {
  const BaseStream* base = plan_.base;
  const SeekIndexObject* object = base_objects_[job.source];
  if (!object || !base->ChunkAt(object->id, job.offset, job.size)) return Status::Ok();
  job.base_object = object->id;
  const std::optional<Sha256Digest> stored = base->StoredDigest(object->id, job.offset);
  const bool stored_equal = stored && *stored == job.sha256;
  if (!stored_equal && !plan_.deltas) return Status::Ok();  // refs-only: stored whole
  std::span<uint8_t> base_bytes(pool_->slot(job.slot).scratch.data(), job.size);
  if (stored_equal) {
    VF_RETURN_IF_ERROR(base->ReadChunk(object->id, job.offset, base_bytes, coders.base_scratch.local(), &job.sha256)
                           .WithContext("the base's chunk that its digest says is equal"));
    job.base_equal = true;
    job.base_sha256 = job.sha256;
    return Status::Ok();
  }
  // A delta names the base chunk by its digest: a stored one is checked.
  VF_RETURN_IF_ERROR(
      base->ReadChunk(object->id, job.offset, base_bytes, coders.base_scratch.local(), stored ? &*stored : nullptr));
  if (std::memcmp(base_bytes.data(), data.data(), data.size()) == 0) {
    job.base_equal = true;
    job.base_sha256 = job.sha256;
    return Status::Ok();
  }
  job.base_differs = true;
  job.base_sha256 = stored ? *stored : Sha256(base_bytes);
  return Status::Ok();
}

// Codes a changed chunk as the XOR with its base chunk too, and keeps that
// when it is smaller than the plain chunk with the 48 bytes of the base
// reference added.
Status DumpGraph::TryDelta(DumpJob& job, std::span<const uint8_t> data, StageCoders& coders) {
  Slot& slot = pool_->slot(job.slot);
  uint8_t* x = slot.scratch.data();  // the base chunk's bytes, XORed in place
  XorInto(std::span<uint8_t>(x, data.size()), data);
  std::span<uint8_t> delta_payload(slot.scratch.data() + chunk_, slot.scratch.size() - chunk_);
  // The frame's raw_hash is the chunk's own; the delta's hash is not used.
  VF_RETURN_IF_ERROR(coders.encoders.local().EncodeInto(std::span<const uint8_t>(x, data.size()), delta_payload,
                                                        &job.delta, /*known_raw_hash=*/uint64_t{0}));
  job.use_delta = !job.delta.zero_run && job.delta.payload.size() <= data.size() &&
                  job.delta.payload.size() + kBaseChunkRefSize < job.encoded.payload.size();
  return Status::Ok();
}

// The dedup stage, in stream order, so that which chunks become references,
// and which DATA frames leave the window, is the same in every run. A
// reference names only a DATA frame, and the window counts only those: a
// chunk that becomes a BASE_REF or a BASE_DELTA is never a first copy
// (though it may itself repeat one).
DumpJob DumpGraph::Dedup(DumpJob job) {
  StageCpuClock clock(CpuOf(&dedup_cpu_));
  if (job.kind != DumpJob::kChunk || job.zero || job.base_equal || !options_.dedup || errors_.failed()) return job;
  if (const auto* first = first_copies_.Find(job.content)) {
    const auto& [ref_source, ref_offset] = *first;
    uint64_t ref_size = std::min<uint64_t>(chunk_, sources_[ref_source].size - ref_offset);
    if (ref_size == job.size) {
      job.duplicate = true;
      job.use_delta = false;  // 32 bytes beat a delta
      job.ref_source = ref_source;
      job.ref_offset = ref_offset;
      return job;
    }
  }
  if (job.use_delta) return job;
  first_copies_.Add(job.content, {job.source, job.offset});  // written as a DATA frame
  return job;
}

// The encode stage (parallel): codes what becomes a DATA frame, unless the
// analyze stage did.
DumpJob DumpGraph::Encode(DumpJob job, StageCoders& coders) {
  if (job.kind != DumpJob::kChunk || errors_.failed()) return job;
  Slot& slot = pool_->slot(job.slot);
  std::span<const uint8_t> data(slot.staging.data(), job.size);
  if (job.zero) {
    job.encoded.zero_run = true;
  } else if (job.duplicate || job.base_equal) {
    job.encoded.raw_hash = job.raw_hash ? *job.raw_hash : Hash64(data.data(), data.size());
  } else if (!job.base_differs) {  // a changed chunk was coded in the analyze stage
    Status s = coders.encoders.local().EncodeInto(data, std::span<uint8_t>(slot.payload.data(), slot.payload.size()),
                                                  &job.encoded, job.raw_hash);
    if (!s.ok()) errors_.Set(s.WithContext("encoding " + Where(sources_[job.source], job)));
  }
  return job;
}

// The write stage, in stream order: writes the job's frames and gives its
// slot back to the pool; a DATA frame's payload is lent to the sink, and
// its slot given back once the sink is done with it.
void DumpGraph::Write(const DumpJob& job, WriteNode::output_ports_type& ports) {
  StageCpuClock clock(CpuOf(&write_cpu_));
  const auto give_back = [&](uint32_t slot) { std::get<0>(ports).try_put(slot); };
  uint64_t ticket = 0;  // under which the sink holds the payload, if it does
  if (errors_.failed()) {
    lent_->Return(job.slot, ticket, give_back);
    return;
  }
  const auto began = std::chrono::steady_clock::now();
  Status status = WriteFrame(job, &ticket);
  if (!status.ok())
    errors_.Set(status.WithContext("writing " + Where(sources_[job.source], job) + " to " + sink_->Describe()));
  lent_->Return(job.slot, ticket, give_back);
  write_seconds_ += SecondsSince(began);
}

// One job's frame: an object's start or end, or a chunk as a BASE_REF,
// DEDUP_REF, BASE_DELTA or DATA frame (`ticket`: the payload lent to the
// sink, if it was).
Status DumpGraph::WriteFrame(const DumpJob& job, uint64_t* ticket) {
  const DumpSource& s = sources_[job.source];
  switch (job.kind) {
    case DumpJob::kBegin: {
      Result<uint32_t> id = writer_->BeginObject(s.metadata, s.size);
      if (id.ok()) object_ids_[job.source] = *id;
      return id.status();
    }
    case DumpJob::kChunk: {
      const Sha256Digest* sha256 = hash_chunks_ ? &job.sha256 : nullptr;
      const BaseChunkRef base_ref{job.base_object, job.offset, job.base_sha256};
      const uint32_t id = object_ids_[job.source];
      Status status;
      if (job.base_equal) {
        status = writer_->AddBaseRef(id, job.offset, job.size, job.encoded.raw_hash, base_ref);
      } else if (job.duplicate) {
        DedupRef ref{object_ids_[job.ref_source], job.ref_offset, job.content};
        status = writer_->AddDedupRef(id, job.offset, job.size, job.encoded.raw_hash, ref, sha256);
      } else if (job.use_delta) {
        status = writer_->AddBaseDelta(id, job.offset, job.size, job.encoded.raw_hash, base_ref, job.delta, sha256);
      } else {
        status = writer_->AddChunk(id, job.offset, job.size, job.encoded, sha256, ticket);
      }
      done_bytes_ += job.size;
      if (options_.progress) options_.progress(done_bytes_);
      return status;
    }
    case DumpJob::kEnd:
      return writer_->EndObject(object_ids_[job.source]);
  }
  return Status::Ok();
}

Status Dump(const std::vector<DumpSource>& sources, ByteSink* sink, const PipelineOptions& requested,
            PipelineStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  VF_ASSIGN_OR_RETURN(const DumpPlan plan, PlanDump(sources, requested));
  MemoryBudget budget(plan.options.max_memory);
  VF_ASSIGN_OR_RETURN(std::unique_ptr<SlotPool> pool, CreateDumpPool(plan, &budget));
  // Payloads lent to the sink from their slots (after the pool: the sink is
  // done with them before the slots go).
  LentSlots lent(sink, std::max<size_t>(1, pool->size() / 4));
  StreamWriter writer(sink, DumpHeader(plan, *sink));
  VF_RETURN_IF_ERROR(StartDumpStream(plan, &writer));

  DumpGraph graph(sources, sink, plan, pool.get(), &writer, &lent);
  VF_RETURN_IF_ERROR(graph.Run());
  const auto finish_began = std::chrono::steady_clock::now();
  double finish_cpu = 0;
  {
    StageCpuClock clock(plan.options.measure_serial_cpu ? &finish_cpu : nullptr);
    VF_RETURN_IF_ERROR(writer.Finish());
  }
  lent.WaitAll();
  FillPipelineStats(WrittenStats(writer, sources.size(), graph.done_bytes()),
                    EngineFigures{.slots = pool->size(),
                                  .budget_peak = budget.peak(),
                                  .threads = plan.threads,
                                  .start = start,
                                  .serial_seconds = graph.write_seconds() + SecondsSince(finish_began)},
                    stats);
  stats->serial_stages.clear();
  if (plan.options.measure_serial_cpu) stats->serial_stages = graph.serial_stages(finish_cpu);
  return Status::Ok();
}

}  // namespace

Status RunDump(const std::vector<DumpSource>& sources, ByteSink* sink, const PipelineOptions& options,
               PipelineStats* stats) {
  return ExceptionBoundary("the dump graph", [&] { return Dump(sources, sink, options, stats); });
}

}  // namespace vramflow
