// SPDX-License-Identifier: MIT
#include "streamer/ordered_dump_plan.h"

#include <algorithm>
#include <string>

#include "codecs/chunk_codec.h"
#include "common/units.h"
#include "streamer/pipeline_fit.h"

namespace vramflow {

Result<OrderedDumpPlan> PlanOrderedDump(const PipelineOptions& options, unsigned wanted_threads, uint64_t thread_extra,
                                        size_t wanted_items, MemoryBudget* budget) {
  const uint32_t chunk = options.chunk_size;
  if (chunk == 0 || chunk > kMaxChunkSize) return Status::InvalidArgument("chunk size must be 1 byte .. 64 MiB");
  OrderedDumpPlan plan;
  plan.codec_state = ChunkEncoder::MemoryBytes(options.encoder, chunk);
  plan.item_bytes = chunk + ChunkEncoder::MaxPayloadSize(chunk) + 8192;
  plan.threads = ThreadsTheBudgetFeeds(std::max(wanted_threads, options.threads), options.max_memory, 0,
                                       plan.codec_state + thread_extra, plan.item_bytes);
  if (plan.threads < options.threads && options.note)
    options.note(ThreadCapNote(options.threads, plan.threads, options.max_memory));
  VF_RETURN_IF_ERROR(budget->Charge(uint64_t{plan.threads} * plan.codec_state,
                                    "codec state for " + std::to_string(plan.threads) + " threads"));
  if (thread_extra > 0)
    VF_RETURN_IF_ERROR(
        budget->Charge(uint64_t{plan.threads} * thread_extra,
                       "reading and coding against the base's chunks on " + std::to_string(plan.threads) + " threads"));
  const uint64_t affordable = (budget->limit() - budget->in_use()) / plan.item_bytes;
  plan.items = static_cast<size_t>(std::min<uint64_t>(wanted_items, affordable));
  if (plan.items < 2)
    return Status::InvalidArgument("memory budget of " + FormatSize(options.max_memory) + " holds fewer than two " +
                                   FormatSize(plan.item_bytes) +
                                   " chunk buffers (raise --max-memory or lower --chunk-size)");
  return plan;
}

StreamHeader OrderedDumpHeader(const PipelineOptions& options, const ByteSink& sink) {
  StreamHeader header;
  header.chunk_size = options.chunk_size;
  header.zstd_level = static_cast<int8_t>(std::clamp(options.encoder.zstd_level, -128, 127));
  header.producer = options.producer;
  // The output may still be a file or an object: then it gets its index.
  if (options.seek_index && sink.Seekable()) header.flags |= kStreamFlagSeekIndex;
  return header;
}

}  // namespace vramflow
