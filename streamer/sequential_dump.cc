// SPDX-License-Identifier: MIT
#include "streamer/sequential_dump.h"

#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "common/exception_boundary.h"
#include "common/sha256.h"
#include "common/units.h"
#include "streamer/base_chunk_coding.h"
#include "streamer/format/stream_writer.h"
#include "streamer/machine/memory_budget.h"
#include "streamer/machine/tbb_workers.h"
#include "streamer/ordered_dump_plan.h"
#include "streamer/pipeline_common.h"
#include "streamer/pipeline_fit.h"

namespace vramflow {
namespace {

// One unit of work: an object's start, a chunk, or an object's end, with
// the buffers it holds while in flight.
struct Item {
  enum Kind { kBegin, kChunk, kEnd } kind = kChunk;
  size_t input = 0;
  uint64_t offset = 0;
  size_t size = 0;
  BudgetedBuffer raw;
  BudgetedBuffer payload;
  ChunkWithBase coded;  // without a base, always coded on its own
};

// Things not in use, taken and given back: the items not in flight (the
// pipeline runs at most as many tokens as there are items, and an item comes
// back before its token is released, so the reader always finds one), and
// the base's coders (one per thread, and at most `threads` chunks are
// encoded at once).
template <typename T>
class FreeList {
 public:
  void Put(T* thing) {
    std::lock_guard<std::mutex> lock(mu_);
    things_.push_back(thing);
  }
  T* Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (things_.empty()) return nullptr;
    T* thing = things_.back();
    things_.pop_back();
    return thing;
  }

 private:
  std::mutex mu_;
  std::vector<T*> things_;
};

// The chunk buffers and base coders a sequential dump works with, and the
// free lists they are taken from.
struct SequentialBuffers {
  std::vector<std::unique_ptr<BaseChunkCoder>> coders;
  FreeList<BaseChunkCoder> free_coders;
  std::vector<std::unique_ptr<Item>> items;
  FreeList<Item> free_items;
};

// Makes the plan's base coders (with a base; their charge, taken by the plan,
// is refunded and charged again as each is made) and chunk buffers.
Status MakeBuffers(const PipelineOptions& options, const OrderedDumpPlan& plan, uint64_t coder_bytes,
                   MemoryBudget* budget, SequentialBuffers* buffers) {
  const uint32_t chunk = options.chunk_size;
  if (options.base) {
    budget->Refund(uint64_t{plan.threads} * coder_bytes);
    for (unsigned i = 0; i < plan.threads; ++i) {
      VF_ASSIGN_OR_RETURN(std::unique_ptr<BaseChunkCoder> coder,
                          BaseChunkCoder::Create(options.base, chunk, options.base_refs_only, budget));
      buffers->free_coders.Put(coder.get());
      buffers->coders.push_back(std::move(coder));
    }
  }
  for (size_t i = 0; i < plan.items; ++i) {
    auto item = std::make_unique<Item>();
    VF_ASSIGN_OR_RETURN(item->raw, BudgetedBuffer::Allocate(budget, chunk, "chunk buffer"));
    VF_ASSIGN_OR_RETURN(item->payload,
                        BudgetedBuffer::Allocate(budget, ChunkEncoder::MaxPayloadSize(chunk), "payload buffer"));
    buffers->free_items.Put(item.get());
    buffers->items.push_back(std::move(item));
  }
  return Status::Ok();
}

// Names the base (if any) and turns on chunk digests where wanted, then
// writes the stream's start.
Status StartSequentialStream(const PipelineOptions& options, StreamWriter* writer) {
  if (options.base) {
    BaseDescriptor descriptor = options.base->DescriptorForDependent();
    if (!options.base_location.empty()) descriptor.location = options.base_location;
    writer->SetBase(std::move(descriptor));
  }
  // Every chunk's SHA-256 goes into DIGEST_BLOCKs (asked for, or a base).
  writer->SetChunkDigests(options.chunk_digests || options.base != nullptr);
  return writer->Start();
}

// The pipeline's three filters (read, encode, write) and their state; Run()
// joins them.
class SequentialStages {
 public:
  // Everything given must outlive the stages; the writer has started.
  SequentialStages(const std::vector<SequentialInput>& inputs, ByteSink* sink, const PipelineOptions& options,
                   SequentialBuffers* buffers, StreamWriter* writer)
      : inputs_(inputs),
        sink_(sink),
        options_(options),
        chunk_(options.chunk_size),
        buffers_(buffers),
        writer_(writer),
        base_objects_(inputs.size(), nullptr),
        object_ids_(inputs.size(), 0) {}

  // Runs every input through the pipeline with `threads` threads and
  // `items` chunks in flight; the first error, if any.
  Status Run(unsigned threads, size_t items);
  uint64_t done_bytes() const { return done_bytes_; }
  double write_seconds() const { return write_seconds_; }  // inside the serial write filter

 private:
  using Encoders = oneapi::tbb::enumerable_thread_specific<ChunkEncoder>;
  Item* Read(oneapi::tbb::flow_control& fc);
  Item* Encode(Item* item, Encoders& encoders);
  void Write(Item* item);
  Status WriteFrame(const Item& item);
  std::string Where(const Item& item) const {
    return "'" + inputs_[item.input].metadata.name + "' at offset " + std::to_string(item.offset);
  }

  const std::vector<SequentialInput>& inputs_;
  ByteSink* const sink_;
  const PipelineOptions& options_;
  const uint32_t chunk_;
  SequentialBuffers* const buffers_;
  StreamWriter* const writer_;
  ErrorLatch errors_;
  // The reader's state (its filter is serial).
  size_t next_input_ = 0;
  std::unique_ptr<ByteSource> source_;
  uint64_t read_offset_ = 0;
  // Each input's object in the base, matched by name when it is opened.
  std::vector<const SeekIndexObject*> base_objects_;
  // The writer's state (its filter is serial too).
  std::vector<uint32_t> object_ids_;
  uint64_t done_bytes_ = 0;
  double write_seconds_ = 0;
};

Status SequentialStages::Run(unsigned threads, size_t items) {
  std::unique_ptr<oneapi::tbb::global_control> allow_threads;
  VF_RETURN_IF_ERROR(
      ReadyTbbThreads(threads, "packing in order with " + std::to_string(threads) + " threads", &allow_threads));
  oneapi::tbb::task_arena arena(static_cast<int>(threads));
  arena.execute([&] {
    Encoders encoders(options_.encoder);
    oneapi::tbb::parallel_pipeline(
        items,
        oneapi::tbb::make_filter<void, Item*>(oneapi::tbb::filter_mode::serial_in_order,
                                              [this](oneapi::tbb::flow_control& fc) { return Read(fc); }) &
            oneapi::tbb::make_filter<Item*, Item*>(oneapi::tbb::filter_mode::parallel,
                                                   [this, &encoders](Item* item) { return Encode(item, encoders); }) &
            oneapi::tbb::make_filter<Item*, void>(oneapi::tbb::filter_mode::serial_in_order,
                                                  [this](Item* item) { Write(item); }));
  });
  return errors_.status();
}

// The read filter: the next input's start, its next chunk, or its end, in
// a free item.
Item* SequentialStages::Read(oneapi::tbb::flow_control& fc) {
  if (errors_.failed() || (!source_ && next_input_ == inputs_.size())) {
    fc.stop();
    return nullptr;
  }
  Item* item = buffers_->free_items.Take();
  if (!item) {
    errors_.Set(Status::Internal("packing in order: no free chunk buffer"));
    fc.stop();
    return nullptr;
  }
  item->input = next_input_;
  item->offset = read_offset_;
  item->size = 0;
  item->coded = ChunkWithBase{};
  if (!source_) {
    const SequentialInput& input = inputs_[next_input_];
    if (options_.base)
      base_objects_[next_input_] = options_.base->Match(input.metadata, kUnknownObjectSize, std::nullopt);
    Result<std::unique_ptr<ByteSource>> opened = input.open();
    if (!opened.ok()) errors_.Set(opened.status());
    source_ = opened.ok() ? std::move(*opened) : nullptr;
    read_offset_ = 0;
    item->kind = Item::kBegin;
    return item;
  }
  Result<size_t> n = ReadFully(*source_, std::span<uint8_t>(item->raw.data(), chunk_));
  if (!n.ok()) errors_.Set(n.status().WithContext("reading " + Where(*item)));
  if (!n.ok() || *n == 0) {
    source_.reset();
    ++next_input_;
    item->kind = Item::kEnd;
    return item;
  }
  item->kind = Item::kChunk;
  item->size = *n;
  read_offset_ += *n;
  return item;
}

// The encode filter (parallel): codes a chunk, against the base where there
// is one.
Item* SequentialStages::Encode(Item* item, Encoders& encoders) {
  if (item->kind != Item::kChunk || errors_.failed()) return item;
  BaseChunkCoder* coder = options_.base ? buffers_->free_coders.Take() : nullptr;
  if (options_.base && !coder) {
    errors_.Set(Status::Internal("packing in order: no free base coder"));
    return item;
  }
  Status s =
      EncodeChunkWithBase(std::span<const uint8_t>(item->raw.data(), item->size), item->offset,
                          std::span<uint8_t>(item->payload.data(), item->payload.size()), encoders.local(), coder,
                          base_objects_[item->input], /*may_delta=*/true, writer_->chunk_digests(), &item->coded);
  if (coder) buffers_->free_coders.Put(coder);
  if (!s.ok()) errors_.Set(s.WithContext("encoding " + Where(*item)));
  return item;
}

// The write filter, in order: writes the item's frame and frees the item.
void SequentialStages::Write(Item* item) {
  if (!errors_.failed()) {
    const auto began = std::chrono::steady_clock::now();
    Status status = WriteFrame(*item);
    if (!status.ok()) errors_.Set(status.WithContext("writing " + Where(*item) + " to " + sink_->Describe()));
    write_seconds_ += SecondsSince(began);
  }
  buffers_->free_items.Put(item);
}

// One item's frame: an object's start or end, or a chunk as a BASE_REF,
// BASE_DELTA or DATA frame.
Status SequentialStages::WriteFrame(const Item& item) {
  switch (item.kind) {
    case Item::kBegin: {
      Result<uint32_t> id = writer_->BeginObject(inputs_[item.input].metadata, kUnknownObjectSize);
      if (id.ok()) object_ids_[item.input] = *id;
      return id.status();
    }
    case Item::kChunk: {
      const ChunkWithBase& coded = item.coded;
      const uint32_t id = object_ids_[item.input];
      const Sha256Digest* sha256 = coded.sha256 ? &*coded.sha256 : nullptr;
      Status status;
      if (coded.kind == BaseCoding::Kind::kRef)
        status = writer_->AddBaseRef(id, item.offset, item.size, coded.encoded.raw_hash, coded.ref);
      else if (coded.kind == BaseCoding::Kind::kDelta)
        status =
            writer_->AddBaseDelta(id, item.offset, item.size, coded.encoded.raw_hash, coded.ref, coded.encoded, sha256);
      else status = writer_->AddChunk(id, item.offset, item.size, coded.encoded, sha256);
      done_bytes_ += item.size;
      if (options_.progress) options_.progress(done_bytes_);
      return status;
    }
    case Item::kEnd:
      return writer_->EndObject(object_ids_[item.input]);
  }
  return Status::Ok();
}

Status SequentialDump(const std::vector<SequentialInput>& inputs, ByteSink* sink, const PipelineOptions& requested,
                      PipelineStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  const PipelineOptions options = WithMachineDefaults(requested);
  VF_RETURN_IF_ERROR(CheckDumpBase(options));
  // A thread coding against a base on S3 waits for its chunk: as many
  // threads as the base asks to keep reads in flight.
  const unsigned wanted_threads = ThreadsWithBaseReads(options.threads, options.base.get(), true);

  MemoryBudget budget(options.max_memory);
  // With a base: its index, held throughout, and each thread's buffers for
  // reading and XORing base chunks (charged by the plan for the threads it
  // runs, then taken by their coders).
  const uint64_t coder_bytes =
      options.base ? BaseChunkCoder::MemoryBytes(*options.base, options.chunk_size, options.base_refs_only) : 0;
  if (options.base) VF_RETURN_IF_ERROR(budget.Charge(options.base->memory_bytes(), "the base's index"));
  // Enough items for every thread to encode while the reader and the writer
  // work on others; fewer if the budget holds fewer, never under two.
  VF_ASSIGN_OR_RETURN(const OrderedDumpPlan plan,
                      PlanOrderedDump(options, wanted_threads, coder_bytes, 2ull * wanted_threads + 2, &budget));
  SequentialBuffers buffers;
  VF_RETURN_IF_ERROR(MakeBuffers(options, plan, coder_bytes, &budget, &buffers));

  StreamHeader header = OrderedDumpHeader(options, *sink);
  if (options.base) header.flags |= kStreamFlagBase;
  StreamWriter writer(sink, header);
  VF_RETURN_IF_ERROR(StartSequentialStream(options, &writer));

  SequentialStages stages(inputs, sink, options, &buffers, &writer);
  VF_RETURN_IF_ERROR(stages.Run(plan.threads, plan.items));
  const auto finish_began = std::chrono::steady_clock::now();
  VF_RETURN_IF_ERROR(writer.Finish());
  FillPipelineStats(WrittenStats(writer, inputs.size(), stages.done_bytes()),
                    EngineFigures{.slots = plan.items,
                                  .budget_peak = budget.peak(),
                                  .threads = plan.threads,
                                  .start = start,
                                  .serial_seconds = stages.write_seconds() + SecondsSince(finish_began)},
                    stats);
  return Status::Ok();
}

}  // namespace

Status RunSequentialDump(const std::vector<SequentialInput>& inputs, ByteSink* sink, const PipelineOptions& options,
                         PipelineStats* stats) {
  return ExceptionBoundary("packing in order", [&] { return SequentialDump(inputs, sink, options, stats); });
}

}  // namespace vramflow
