// SPDX-License-Identifier: MIT
// Pieces shared by the dump and restore engines (internal to streamer/).
#pragma once

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "streamer/format/stream_writer.h"
#include "streamer/machine/tbb_workers.h"
#include "streamer/pipeline.h"

namespace vramflow {

// Keeps the first error; every stage polls failed() and stops doing work.
class ErrorLatch {
 public:
  void Set(const Status& status) {
    if (status.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (first_.ok()) {
      first_ = status;
      failed_.store(true, std::memory_order_release);
    }
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_;
  }

 private:
  mutable std::mutex mu_;
  Status first_;
  std::atomic<bool> failed_{false};
};

// Asked for more threads than oneTBB runs by default (its CPUs, as the
// affinity mask says, or a lower max_allowed_parallelism): oneTBB would cap
// its workers (and print a warning) unless the limit is raised while the
// graph runs. Holds the raised limit, or nothing. (Behind a pointer: a
// global_control is registered at its address, so it must not be moved.)
inline std::unique_ptr<oneapi::tbb::global_control> AllowTbbThreads(unsigned threads) {
  const auto allowed = oneapi::tbb::global_control::active_value(oneapi::tbb::global_control::max_allowed_parallelism);
  if (threads > static_cast<unsigned>(oneapi::tbb::info::default_concurrency()) || threads > allowed)
    return std::make_unique<oneapi::tbb::global_control>(oneapi::tbb::global_control::max_allowed_parallelism, threads);
  return nullptr;
}

// Readies oneTBB to run an engine on `threads` threads: raises its limit
// where needed (AllowTbbThreads; held in `*allowed` while they run), then,
// since oneTBB cannot report a worker it fails to start (it aborts or
// stalls), checks first that the workers can start. `context` names the
// engine and its threads in the error.
inline Status ReadyTbbThreads(unsigned threads, const std::string& context,
                              std::unique_ptr<oneapi::tbb::global_control>* allowed) {
  *allowed = AllowTbbThreads(threads);
  return CheckWorkersCanStart(threads - 1).WithContext(context);
}

// Seconds from `start` until now.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The calling thread's CPU time so far (user + system), in seconds.
inline double ThreadCpuSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Adds the CPU time this thread spends in its scope to `*total`; does
// nothing (reads no clock) when `total` is null. For a serial stage's body,
// which never runs on two threads at once.
class StageCpuClock {
 public:
  explicit StageCpuClock(double* total) : total_(total), began_(total ? ThreadCpuSeconds() : 0.0) {}
  ~StageCpuClock() {
    if (total_) *total_ += ThreadCpuSeconds() - began_;
  }
  StageCpuClock(const StageCpuClock&) = delete;
  StageCpuClock& operator=(const StageCpuClock&) = delete;

 private:
  double* const total_;
  const double began_;
};

// What `writer` has written, `objects` objects of `raw_bytes` in all: the
// stream's side of a dump's PipelineStats (the engine's left zero).
inline PipelineStats WrittenStats(const StreamWriter& writer, uint64_t objects, uint64_t raw_bytes) {
  const WriterStats& w = writer.stats();
  return PipelineStats{.objects = objects,
                       .raw_bytes = raw_bytes,
                       .stream_bytes = writer.bytes_written(),
                       .zero_bytes = w.zero_bytes,
                       .dedup_bytes = w.dedup_bytes,
                       .data_chunks = w.data_frames,
                       .base_ref_bytes = w.base_ref_bytes,
                       .base_delta_bytes = w.base_delta_bytes,
                       .serial_stages = {}};
}

// How an engine ran: the machine's side of PipelineStats.
struct EngineFigures {
  uint64_t slots = 0;  // chunk buffers (slots, items) it had
  uint64_t budget_peak = 0;
  unsigned threads = 0;
  std::chrono::steady_clock::time_point start;  // when it began: `seconds` runs from here to the fill
  double serial_seconds = 0;
};

// Every engine's one way to fill its PipelineStats: the stream's figures
// from `stream` (as a writer or a reader counted them: WrittenStats), the
// rest from `engine`; all but a restore's reference_batches, which it sets
// itself.
inline void FillPipelineStats(const PipelineStats& stream, const EngineFigures& engine, PipelineStats* stats) {
  stats->objects = stream.objects;
  stats->raw_bytes = stream.raw_bytes;
  stats->stream_bytes = stream.stream_bytes;
  stats->zero_bytes = stream.zero_bytes;
  stats->dedup_bytes = stream.dedup_bytes;
  stats->data_chunks = stream.data_chunks;
  stats->base_ref_bytes = stream.base_ref_bytes;
  stats->base_delta_bytes = stream.base_delta_bytes;
  stats->slots = engine.slots;
  stats->budget_peak = engine.budget_peak;
  stats->threads = engine.threads;
  stats->seconds = SecondsSince(engine.start);
  stats->serial_seconds = engine.serial_seconds;
}

}  // namespace vramflow
