// SPDX-License-Identifier: MIT
#include "streamer/pipeline_fit.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "codecs/chunk_codec.h"
#include "common/units.h"

namespace vramflow {

unsigned DefaultThreads(const MachineLimits& limits) {
  unsigned threads = limits.affinity_cpus ? limits.affinity_cpus : std::thread::hardware_concurrency();
  if (limits.cgroup_cpus)
    threads = std::min(threads, static_cast<unsigned>(std::max(1.0, std::ceil(*limits.cgroup_cpus))));
  if (limits.tbb_threads) threads = std::min(threads, limits.tbb_threads);
  return std::max(threads, 1u);
}

uint64_t CodecStateBytesPerThread(const PipelineOptions& options) {
  return std::max<uint64_t>(ChunkEncoder::MemoryBytes(options.encoder, options.chunk_size),
                            ChunkDecoder::MemoryBytes(options.chunk_size));
}

uint64_t SlotBytes(const PipelineOptions& options) {
  return uint64_t{options.chunk_size} + ChunkEncoder::MaxPayloadSize(options.chunk_size) + 8192;
}

uint64_t DefaultMemoryBudget(const MachineLimits& limits, const PipelineOptions& options, unsigned threads) {
  const uint64_t wanted = std::max<uint64_t>(
      kMinDefaultBudget,
      uint64_t{threads} * (CodecStateBytesPerThread(options) + 2 * SlotBytes(options)) + (64ull << 20));
  uint64_t ceiling = UINT64_MAX;
  if (limits.mem_available) ceiling = std::min(ceiling, *limits.mem_available / 4);
  if (limits.cgroup_memory) ceiling = std::min(ceiling, *limits.cgroup_memory / 4);
  return std::min(wanted, std::max(ceiling, kDefaultBudgetFloor));
}

void ResolveMachineDefaults(PipelineOptions* options, const MachineLimits& limits) {
  if (options->threads == 0) options->threads = DefaultThreads(limits);
  if (options->max_memory == 0) options->max_memory = DefaultMemoryBudget(limits, *options, options->threads);
}

PipelineOptions WithMachineDefaults(const PipelineOptions& options) {
  PipelineOptions resolved = options;
  if (options.threads == 0 || options.max_memory == 0) ResolveMachineDefaults(&resolved, ReadMachineLimits());
  return resolved;
}

unsigned ThreadsWithBaseReads(unsigned threads, const BaseStream* base, bool reads_base) {
  return base && reads_base ? std::max(threads, base->concurrent_reads()) : threads;
}

std::string ThreadCapNote(unsigned wanted, unsigned threads, uint64_t budget) {
  return "running " + std::to_string(threads) + " threads, not " + std::to_string(wanted) + ": a memory budget of " +
         FormatSize(budget) + " feeds no more";
}

unsigned ThreadsTheBudgetFeeds(unsigned wanted, uint64_t budget, uint64_t fixed, uint64_t per_thread, uint64_t slot) {
  auto fits = [&](unsigned t) {
    const long double need = static_cast<long double>(fixed) + static_cast<long double>(t) * per_thread +
                             static_cast<long double>(std::max(t, 2u)) * slot;
    return need <= static_cast<long double>(budget);
  };
  if (fits(wanted)) return std::max(wanted, 1u);
  unsigned lo = 1, hi = wanted;  // fits(hi) is false
  while (hi - lo > 1) {
    const unsigned mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace vramflow
