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
#include "streamer/machine/memory_budget.h"
#include "streamer/ordered_dump_plan.h"
#include "streamer/pipeline_common.h"
#include "streamer/pipeline_fit.h"
#include "streamer/format/stream_writer.h"
#include "streamer/machine/tbb_workers.h"

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

Status SequentialDump(const std::vector<SequentialInput>& inputs, ByteSink* sink, const PipelineOptions& requested,
                      PipelineStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  const PipelineOptions options = WithMachineDefaults(requested);
  const uint32_t chunk = options.chunk_size;
  VF_RETURN_IF_ERROR(CheckDumpBase(options));
  // A thread coding against a base on S3 waits for its chunk: as many
  // threads as the base asks to keep reads in flight.
  const unsigned wanted_threads = ThreadsWithBaseReads(options.threads, options.base.get(), true);

  MemoryBudget budget(options.max_memory);
  // With a base: its index, held throughout, and each thread's buffers for
  // reading and XORing base chunks (charged by the plan for the threads it
  // runs, then taken by their coders).
  const uint64_t coder_bytes =
      options.base ? BaseChunkCoder::MemoryBytes(*options.base, chunk, options.base_refs_only) : 0;
  if (options.base) VF_RETURN_IF_ERROR(budget.Charge(options.base->memory_bytes(), "the base's index"));
  // Enough items for every thread to encode while the reader and the writer
  // work on others; fewer if the budget holds fewer, never under two.
  VF_ASSIGN_OR_RETURN(const OrderedDumpPlan plan,
                      PlanOrderedDump(options, wanted_threads, coder_bytes, 2ull * wanted_threads + 2, &budget));
  const unsigned threads = plan.threads;
  const size_t item_count = plan.items;
  std::vector<std::unique_ptr<BaseChunkCoder>> coders;
  FreeList<BaseChunkCoder> free_coders;
  if (options.base) {
    budget.Refund(uint64_t{threads} * coder_bytes);
    for (unsigned i = 0; i < threads; ++i) {
      VF_ASSIGN_OR_RETURN(std::unique_ptr<BaseChunkCoder> coder,
                          BaseChunkCoder::Create(options.base, chunk, options.base_refs_only, &budget));
      free_coders.Put(coder.get());
      coders.push_back(std::move(coder));
    }
  }
  std::vector<std::unique_ptr<Item>> items;
  FreeList<Item> free_items;
  for (size_t i = 0; i < item_count; ++i) {
    auto item = std::make_unique<Item>();
    VF_ASSIGN_OR_RETURN(item->raw, BudgetedBuffer::Allocate(&budget, chunk, "chunk buffer"));
    VF_ASSIGN_OR_RETURN(item->payload,
                        BudgetedBuffer::Allocate(&budget, ChunkEncoder::MaxPayloadSize(chunk), "payload buffer"));
    free_items.Put(item.get());
    items.push_back(std::move(item));
  }

  StreamHeader header = OrderedDumpHeader(options, *sink);
  if (options.base) header.flags |= kStreamFlagBase;
  StreamWriter writer(sink, header);
  if (options.base) {
    BaseDescriptor descriptor = options.base->DescriptorForDependent();
    if (!options.base_location.empty()) descriptor.location = options.base_location;
    writer.SetBase(std::move(descriptor));
  }
  // Every chunk's SHA-256 goes into DIGEST_BLOCKs (asked for, or a base).
  writer.SetChunkDigests(options.chunk_digests || options.base != nullptr);
  VF_RETURN_IF_ERROR(writer.Start());

  ErrorLatch errors;
  // The reader's state (its filter is serial).
  size_t next_input = 0;
  std::unique_ptr<ByteSource> source;
  uint64_t read_offset = 0;
  // Each input's object in the base, matched by name when it is opened.
  std::vector<const SeekIndexObject*> base_objects(inputs.size(), nullptr);
  // The writer's state (its filter is serial too).
  std::vector<uint32_t> object_ids(inputs.size(), 0);
  std::vector<uint64_t> object_sizes(inputs.size(), 0);
  uint64_t done_bytes = 0;
  double write_seconds = 0;

  auto where = [&](const Item& item) {
    return "'" + inputs[item.input].metadata.name + "' at offset " + std::to_string(item.offset);
  };

  std::unique_ptr<oneapi::tbb::global_control> allow_threads = AllowTbbThreads(threads);
  VF_RETURN_IF_ERROR(CheckWorkersCanStart(threads - 1).WithContext("packing in order with " + std::to_string(threads) +
                                                                   " threads"));
  oneapi::tbb::task_arena arena(static_cast<int>(threads));
  arena.execute([&] {
    oneapi::tbb::enumerable_thread_specific<ChunkEncoder> encoders(options.encoder);
    auto read = [&](oneapi::tbb::flow_control& fc) -> Item* {
      if (errors.failed() || (!source && next_input == inputs.size())) {
        fc.stop();
        return nullptr;
      }
      Item* item = free_items.Take();
      if (!item) {
        errors.Set(Status::Internal("packing in order: no free chunk buffer"));
        fc.stop();
        return nullptr;
      }
      item->input = next_input;
      item->offset = read_offset;
      item->size = 0;
      item->coded = ChunkWithBase{};
      if (!source) {
        if (options.base) base_objects[next_input] = options.base->Match(inputs[next_input].metadata, kUnknownObjectSize,
                                                                         std::nullopt);
        Result<std::unique_ptr<ByteSource>> opened = inputs[next_input].open();
        if (!opened.ok()) errors.Set(opened.status());
        source = opened.ok() ? std::move(*opened) : nullptr;
        read_offset = 0;
        item->kind = Item::kBegin;
        return item;
      }
      Result<size_t> n = ReadFully(*source, std::span<uint8_t>(item->raw.data(), chunk));
      if (!n.ok()) errors.Set(n.status().WithContext("reading " + where(*item)));
      if (!n.ok() || *n == 0) {
        source.reset();
        ++next_input;
        item->kind = Item::kEnd;
        return item;
      }
      item->kind = Item::kChunk;
      item->size = *n;
      read_offset += *n;
      return item;
    };
    auto encode = [&](Item* item) -> Item* {
      if (item->kind != Item::kChunk || errors.failed()) return item;
      BaseChunkCoder* coder = options.base ? free_coders.Take() : nullptr;
      if (options.base && !coder) {
        errors.Set(Status::Internal("packing in order: no free base coder"));
        return item;
      }
      Status s = EncodeChunkWithBase(std::span<const uint8_t>(item->raw.data(), item->size), item->offset,
                                     std::span<uint8_t>(item->payload.data(), item->payload.size()), encoders.local(),
                                     coder, base_objects[item->input], /*may_delta=*/true, writer.chunk_digests(),
                                     &item->coded);
      if (coder) free_coders.Put(coder);
      if (!s.ok()) errors.Set(s.WithContext("encoding " + where(*item)));
      return item;
    };
    auto write = [&](Item* item) {
      if (!errors.failed()) {
        const auto began = std::chrono::steady_clock::now();
        Status status;
        switch (item->kind) {
          case Item::kBegin: {
            Result<uint32_t> id = writer.BeginObject(inputs[item->input].metadata, kUnknownObjectSize);
            if (id.ok()) object_ids[item->input] = *id;
            status = id.status();
            break;
          }
          case Item::kChunk: {
            const ChunkWithBase& coded = item->coded;
            const uint32_t id = object_ids[item->input];
            const Sha256Digest* sha256 = coded.sha256 ? &*coded.sha256 : nullptr;
            if (coded.kind == BaseCoding::Kind::kRef)
              status = writer.AddBaseRef(id, item->offset, item->size, coded.encoded.raw_hash, coded.ref);
            else if (coded.kind == BaseCoding::Kind::kDelta)
              status = writer.AddBaseDelta(id, item->offset, item->size, coded.encoded.raw_hash, coded.ref,
                                           coded.encoded, sha256);
            else
              status = writer.AddChunk(id, item->offset, item->size, coded.encoded, sha256);
            object_sizes[item->input] += item->size;
            done_bytes += item->size;
            if (options.progress) options.progress(done_bytes);
            break;
          }
          case Item::kEnd:
            status = writer.EndObject(object_ids[item->input]);
            break;
        }
        if (!status.ok()) errors.Set(status.WithContext("writing " + where(*item) + " to " + sink->Describe()));
        write_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      }
      free_items.Put(item);
    };
    oneapi::tbb::parallel_pipeline(
        item_count,
        oneapi::tbb::make_filter<void, Item*>(oneapi::tbb::filter_mode::serial_in_order, read) &
            oneapi::tbb::make_filter<Item*, Item*>(oneapi::tbb::filter_mode::parallel, encode) &
            oneapi::tbb::make_filter<Item*, void>(oneapi::tbb::filter_mode::serial_in_order, write));
  });

  VF_RETURN_IF_ERROR(errors.status());
  const auto finish_began = std::chrono::steady_clock::now();
  VF_RETURN_IF_ERROR(writer.Finish());
  write_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - finish_began).count();
  stats->objects = inputs.size();
  stats->raw_bytes = done_bytes;
  stats->stream_bytes = writer.bytes_written();
  stats->zero_bytes = writer.stats().zero_bytes;
  stats->base_ref_bytes = writer.stats().base_ref_bytes;
  stats->base_delta_bytes = writer.stats().base_delta_bytes;
  stats->data_chunks = writer.stats().data_frames;
  stats->slots = item_count;
  stats->budget_peak = budget.peak();
  stats->threads = threads;
  stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats->serial_seconds = write_seconds;
  return Status::Ok();
}

}  // namespace

Status RunSequentialDump(const std::vector<SequentialInput>& inputs, ByteSink* sink, const PipelineOptions& options,
                         PipelineStats* stats) {
  return ExceptionBoundary("packing in order", [&] { return SequentialDump(inputs, sink, options, stats); });
}

}  // namespace vramflow
