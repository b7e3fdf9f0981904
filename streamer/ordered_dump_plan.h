// SPDX-License-Identifier: MIT
// What the dumps of inputs of unknown size share (sequential_dump.h, one
// input after another; concurrent_dump.h, many at once): the threads the
// budget feeds, the fixed set of chunk buffers, and the stream header.
//
// Each chunk in flight holds one raw buffer and one payload buffer; with the
// codec state of every thread they are charged to one MemoryBudget, so the
// dump's memory is set before it starts, whatever the inputs' sizes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "streamer/format/frame_format.h"
#include "streamer/machine/memory_budget.h"
#include "streamer/pipeline.h"
#include "transport/core/byte_stream.h"

namespace vramflow {

struct OrderedDumpPlan {
  unsigned threads = 1;
  uint64_t codec_state = 0;  // bytes of one thread's codec state
  uint64_t item_bytes = 0;   // bytes of one chunk's raw and payload buffers
  size_t items = 0;          // how many chunks may be in flight
};

// Fits `wanted_threads` (at least `options.threads`, resolved, not 0: more
// where a base on S3 asks for reads in flight) to `options.max_memory`, each
// with its codec state and `thread_extra` bytes (reading and coding against
// a base), saying so through options.note when fewer than options.threads
// run. Charges both for the threads that run to `budget` (the caller refunds
// `threads × thread_extra` as it builds what they are for), then picks
// `wanted_items` chunk buffers or as many as the rest of the budget holds;
// fails when it holds fewer than two.
Result<OrderedDumpPlan> PlanOrderedDump(const PipelineOptions& options, unsigned wanted_threads, uint64_t thread_extra,
                                        size_t wanted_items, MemoryBudget* budget);

// The stream header of such a dump: options' chunk size, zstd level and
// producer; a seek index when asked for and `sink` is Seekable().
StreamHeader OrderedDumpHeader(const PipelineOptions& options, const ByteSink& sink);

}  // namespace vramflow
