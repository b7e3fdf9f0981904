// SPDX-License-Identifier: MIT
// CopyRings: DMA rings emulated by threads, for devices without hardware
// engines (the simulated GPU, the file device).
//
// Each ring is a worker thread running submitted copies in order. A copy is
// a closure; its fence signals when the closure has run, carrying its
// Status. An optional bandwidth and per-copy latency model slows the ring
// down to a chosen speed. A copy submitted with `stall` hangs its ring: its
// fence and every later one on that ring never signal (fault injection).
// Optionally the workers are pinned to given CPUs (benchmarks: copies that
// take no CPU from the pipeline, as with SDMA); a worker that cannot be
// pinned fails every copy, saying why; a ring whose thread cannot be
// started refuses every copy (Submit fails, saying why). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "streamer/device/device.h"

namespace vramflow {

// The name every ring thread carries (/proc/self/task/*/comm), so that
// benchmarks can tell the CPU time of emulated DMA from the pipeline's own.
inline constexpr char kDmaRingThreadName[] = "vf-dma-ring";

class CopyRings {
 public:
  CopyRings(std::string owner, uint32_t count, double bytes_per_second = 0,
            std::chrono::microseconds latency = std::chrono::microseconds(0), std::vector<int> cpus = {});
  ~CopyRings();  // abandons queued copies
  CopyRings(const CopyRings&) = delete;
  CopyRings& operator=(const CopyRings&) = delete;

  uint32_t count() const { return static_cast<uint32_t>(rings_.size()); }
  Result<DmaFence> Submit(uint32_t ring, size_t bytes, std::function<Status()> copy, bool stall = false);
  Status Wait(const DmaFence& fence, std::chrono::milliseconds timeout);

 private:
  struct Work {
    uint64_t sequence;
    size_t bytes;
    std::function<Status()> copy;
    bool stall;
  };
  struct Ring {
    uint32_t index = 0;
    std::mutex mu;
    std::condition_variable work_cv;  // the worker waits here for copies (and stop)
    std::condition_variable done_cv;  // Wait() callers wait here for completions
    std::deque<Work> queue;
    uint64_t next_sequence = 1;
    uint64_t completed = 0;
    std::map<uint64_t, Status> errors;  // failed sequences, until waited on
    bool stop = false;
    Status start_error;  // why `worker` could not be started
    std::thread worker;
  };
  void Run(Ring& ring);

  const std::string owner_;
  const double bytes_per_second_;
  const std::chrono::microseconds latency_;
  const std::vector<int> cpus_;
  std::vector<std::unique_ptr<Ring>> rings_;
};

}  // namespace vramflow
