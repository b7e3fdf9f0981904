// SPDX-License-Identifier: MIT
// CpuUse: where a process's CPU time went between two points, split into the
// DMA ring threads (CopyRings names them kDmaRingThreadName) and the rest
// (codec workers, hashing, the writer, the main thread).
//
// The simulated GPU and the file device copy with CPU threads where real
// hardware (SDMA) would not use the CPU at all, so a throughput figure on
// such a device is only half the story: `vramflow bench pipeline` prints the
// split beside it, and from it how far more threads could go on these cores.
#pragma once

#include "common/status.h"

namespace vramflow {

struct CpuUse {
  double total_seconds = 0;     // user + system, every thread of the process
  double dma_ring_seconds = 0;  // of that, threads named kDmaRingThreadName
  double wall_seconds = 0;      // a steady clock, for cores busy = total / wall over the same window

  double cores_busy() const { return wall_seconds > 0 ? total_seconds / wall_seconds : 0.0; }
};

// The process's CPU use so far: getrusage for the total (exited threads
// included) and /proc/self/task for the ring threads, which live as long as
// their device.
Result<CpuUse> ProcessCpuUse();

inline CpuUse operator-(const CpuUse& a, const CpuUse& b) {
  return {a.total_seconds - b.total_seconds, a.dma_ring_seconds - b.dma_ring_seconds, a.wall_seconds - b.wall_seconds};
}

// CPUs this process may run on (its affinity mask, as taskset sets it).
unsigned UsableCpus();

}  // namespace vramflow
