// SPDX-License-Identifier: MIT
#include "streamer/budget_plan.h"

#include <algorithm>

#include "common/units.h"
#include "streamer/machine/machine_limits.h"
#include "streamer/pipeline_fit.h"
#include "transport/core/uri.h"

namespace vramflow {
namespace {

// Workers from which a file output is written on threads of its own (below).
constexpr unsigned kParallelWriteThreads = 8;

// The budget less `share`, never below 0.
uint64_t Less(uint64_t budget, uint64_t share) { return budget > share ? budget - share : 0; }

// Where a CPU is spare beside the workers, a local output (a file, stdout,
// fd:N) is written on a thread of its own (transport/core/background_sink.h):
// writing a file costs about as much CPU as coding fp32 weights, and on the
// workers' thread it made `pack -j 1` a fifth slower on 2 CPUs. Its two
// buffers (a sixteenth of the budget each, 4 MiB at most) come out of the
// pipeline's budget (with `-m auto`, 4 MiB each, out of the 64 MiB an auto
// budget keeps beyond the pipeline's needs); chunk payloads are lent to it
// from their slots, not copied. Where no CPU is spare the thread would only
// take CPU from the workers (-j 2 on 2 CPUs: 17% slower when it copied
// payloads, still 20 to 30% slower without the copy), so the workers write.
// Returns what the two buffers take of the pipeline's budget.
// With kParallelWriteThreads workers or more, one thread that copies every
// payload into the page cache (about 0.15 CPU-s per GiB on tmpfs) would cap
// the dump below 10 GB/s (`bench pipeline`'s serial stages): a regular
// file's payloads are then written at their offsets on a quarter as many
// threads of the file sink's own (2 to 16, transport/core/parallel_writes.h),
// which take nothing from the budget (the payloads stay in their slots).
uint64_t WriteBehindShare(const PipelineOptions& pipeline, TransportOptions* transport) {
  const MachineLimits machine = ReadMachineLimits();
  PipelineOptions resolved = pipeline;
  ResolveMachineDefaults(&resolved, machine);
  if (resolved.threads >= kParallelWriteThreads) {
    transport->file.writer_threads = std::clamp(resolved.threads / 4, 2u, 16u);
    return 0;
  }
  if (resolved.threads >= DefaultThreads(machine)) return 0;
  const uint64_t buffer = std::min<uint64_t>(resolved.max_memory / 16, 4ull << 20);
  transport->background_write_buffer = buffer;
  return pipeline.max_memory != 0 ? 2 * buffer : 0;
}

}  // namespace

uint64_t TransportShare(const std::string& uri, uint64_t budget, TransportOptions* transport) {
  Result<Endpoint> endpoint = ParseEndpoint(uri);
  if (endpoint.ok() && endpoint->kind == Endpoint::Kind::kS3) {
    uint64_t share = std::min<uint64_t>(budget / 4, 256ull << 20);
    share = std::max<uint64_t>(share, 2 * transport->s3.limits.min_part_size);
    transport->s3.memory_budget = share;
    return share;
  }
  if (!endpoint.ok() || !endpoint->is_network()) return 0;
  NetOptions& net = transport->net;
  uint64_t window = std::min<uint64_t>(budget / 4, 64ull << 20);
  window = std::max<uint64_t>(window, 2ull * net.segment_bytes);
  net.window_bytes = window;
  return window;
}

Status BudgetPlan::Explain(const Status& status, uint64_t pipeline_budget, const std::string& what) const {
  if (status.ok() || status.code() != Status::Code::kInvalidArgument || pipeline_budget >= max_memory ||
      status.message().find("memory budget") == std::string::npos)
    return status;
  return status.WithContext("--max-memory " + FormatSize(max_memory) + " less " +
                            FormatSize(max_memory - pipeline_budget) + " for the buffers of " + what +
                            " leaves the pipeline " + FormatSize(pipeline_budget));
}

BudgetPlan PlanReaderBudget(uint64_t max_memory, const std::string& uri, TransportOptions* transport) {
  BudgetPlan plan;
  plan.max_memory = max_memory;
  plan.uri = uri;
  plan.pipeline = Less(max_memory, TransportShare(uri, max_memory, transport));
  plan.base_index = plan.pipeline;
  return plan;
}

BudgetPlan PlanPipelineBudget(PipelineOptions* pipeline, const std::string& uri, TransportOptions* transport,
                              bool write_behind) {
  BudgetPlan plan;
  plan.max_memory = pipeline->max_memory;
  plan.uri = uri;
  pipeline->max_memory = Less(pipeline->max_memory, TransportShare(uri, pipeline->max_memory, transport));
  Result<Endpoint> endpoint = ParseEndpoint(uri);
  if (write_behind && endpoint.ok() && !endpoint->is_network() && endpoint->kind != Endpoint::Kind::kS3)
    pipeline->max_memory -= WriteBehindShare(*pipeline, transport);
  plan.pipeline = pipeline->max_memory;
  plan.base_index = WithMachineDefaults(*pipeline).max_memory;
  return plan;
}

}  // namespace vramflow
