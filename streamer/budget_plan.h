// SPDX-License-Identifier: MIT
// A command's memory budget (--max-memory, -m), planned once, in one place,
// and handed down: the share the transport of the command's stream takes
// (TransportShare), what the pipeline or the reader keeps, and what a base
// chain's indexes may take; and, for an error about the pipeline's smaller
// budget, how --max-memory was split (BudgetPlan::Explain). Every command
// plans its budget here and passes the shares on; no layer below cuts it
// again.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "streamer/pipeline.h"
#include "transport/open_uri.h"

namespace vramflow {

// When `uri` is a network address, gives its window (the unacknowledged
// bytes a sender keeps, the reorder buffer of a receiver) a share of
// `budget`: a quarter, at most 64 MiB, at least two segments. An s3:// URI
// gets a quarter too, at most 256 MiB, at least two 5 MiB parts, as its
// S3Options::memory_budget. Returns the share (0 for any other URI), set in
// `transport`; the caller keeps `budget` less it, so one budget still
// covers every buffer.
uint64_t TransportShare(const std::string& uri, uint64_t budget, TransportOptions* transport);

struct BudgetPlan {
  uint64_t max_memory = 0;  // --max-memory as given (0: the machine's default, resolved by the engine)
  uint64_t pipeline = 0;    // what the pipeline or the reader keeps after the shares (0 as above)
  uint64_t base_index = 0;  // the most a base chain's indexes may take: the pipeline's, resolved
  std::string uri;          // the stream whose buffers took the rest

  // `status`, when it is an error about the pipeline's memory budget
  // (InvalidArgument naming "memory budget") and the plan kept less than
  // --max-memory, with how --max-memory was split; any other status as it
  // is. `pipeline` and `what` stand for the plan's own where the caller cut
  // the pipeline's budget further (unpack's fetch ahead).
  Status Explain(const Status& status) const { return Explain(status, pipeline, uri); }
  Status Explain(const Status& status, uint64_t pipeline_budget, const std::string& what) const;
};

// A reader's budget (inspect, verify, flatten, recv, streamer serve): the
// transport of `uri` takes its share of `max_memory`; the reader keeps the
// rest, which also bounds its base chain's indexes.
BudgetPlan PlanReaderBudget(uint64_t max_memory, const std::string& uri, TransportOptions* transport);

// A dump's or restore's budget (pack, unpack, demo, streamer capture): the
// transport of `uri` takes its share of pipeline->max_memory, and, where
// `write_behind` (a file written by pack) and a CPU is spare, the buffers
// that write it on a thread of its own; pipeline->max_memory is left as the
// rest. A base chain's indexes must fit that rest, resolved against the
// machine when it is 0 (WithMachineDefaults).
BudgetPlan PlanPipelineBudget(PipelineOptions* pipeline, const std::string& uri, TransportOptions* transport,
                              bool write_behind = false);

}  // namespace vramflow
