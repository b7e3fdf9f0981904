// SPDX-License-Identifier: MIT
// Fitting a pipeline to the machine: the thread count and memory budget a
// dump or restore uses when it is not told (PipelineOptions::threads 0,
// max_memory 0), and how many threads a budget can feed.
//
// Threads: the CPUs the process may use (affinity mask, cgroup CPU quota
// rounded up), never more than oneTBB runs, at least 1.
// Budget: enough for every thread to hold its codec state and two slots of
// buffers, plus 64 MiB, and at least 256 MiB; but no more than a quarter of
// MemAvailable and of the cgroup's memory limit (a container's page cache
// and the checkpointed application need the rest), and at least 32 MiB.
// A graph that is given more threads than its budget feeds (codec state for
// each, a slot of buffers for each, at least two slots) runs fewer and says
// so through PipelineOptions::note, rather than failing.
#pragma once

#include <cstdint>
#include <string>

#include "streamer/machine/machine_limits.h"
#include "streamer/pipeline.h"

namespace vramflow {

inline constexpr uint64_t kMinDefaultBudget = 256ull << 20;
inline constexpr uint64_t kDefaultBudgetFloor = 32ull << 20;

unsigned DefaultThreads(const MachineLimits& limits);

// Bytes of one thread's codec state (encoder or decoder, the larger) for
// `options`' chunk size and encoder settings, and of one slot of buffers.
uint64_t CodecStateBytesPerThread(const PipelineOptions& options);
uint64_t SlotBytes(const PipelineOptions& options);

uint64_t DefaultMemoryBudget(const MachineLimits& limits, const PipelineOptions& options, unsigned threads);

// Sets threads (when 0) and then max_memory (when 0) from `limits`.
void ResolveMachineDefaults(PipelineOptions* options, const MachineLimits& limits);
// `options` with its zeros resolved from ReadMachineLimits() (read only when
// there is a zero).
PipelineOptions WithMachineDefaults(const PipelineOptions& options);

// The threads a pipeline asks for where its threads read a base's chunks
// (`reads_base`: a restore of an incremental stream, a dump coding deltas
// against its base): at least as many as the base asks to keep reads in
// flight (BaseStream::concurrent_reads; on S3 its concurrency), since each
// such thread waits for its chunk's request. Else `threads`.
unsigned ThreadsWithBaseReads(unsigned threads, const BaseStream* base, bool reads_base);

// The note a graph gives when it runs `threads` instead of `wanted`.
std::string ThreadCapNote(unsigned wanted, unsigned threads, uint64_t budget);

// The most threads, from 1 to `wanted`, for which `fixed` + threads ×
// `per_thread` + max(threads, 2) × `slot` bytes fit in `budget` (1 when
// not even one fits: the graph then fails with its own message).
unsigned ThreadsTheBudgetFeeds(unsigned wanted, uint64_t budget, uint64_t fixed, uint64_t per_thread, uint64_t slot);

}  // namespace vramflow
