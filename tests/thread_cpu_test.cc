// SPDX-License-Identifier: MIT
// CpuUse: the DMA rings' CPU time is told apart from the rest of the process.
#include "tools/cli/thread_cpu.h"

#include <gtest/gtest.h>
#include <time.h>

#include "streamer/device/copy_rings.h"

namespace vramflow {
namespace {

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Spins on the calling thread until it has used `seconds` of CPU.
void Burn(double seconds) {
  const double until = ThreadCpuSeconds() + seconds;
  volatile uint64_t sink = 0;
  while (ThreadCpuSeconds() < until) sink = sink + 1;
}

TEST(ThreadCpu, RingCopiesCountAsDmaAndTheCallerDoesNot) {
  CopyRings rings("test device", 1);
  Result<CpuUse> before = ProcessCpuUse();
  ASSERT_TRUE(before.ok()) << before.status().ToString();

  Result<DmaFence> fence = rings.Submit(0, 0, [] {
    Burn(0.3);
    return Status::Ok();
  });
  ASSERT_TRUE(fence.ok()) << fence.status().ToString();
  ASSERT_TRUE(rings.Wait(*fence, std::chrono::seconds(30)).ok());
  Result<CpuUse> after_ring = ProcessCpuUse();
  ASSERT_TRUE(after_ring.ok());
  const CpuUse ring = *after_ring - *before;
  // Clock ticks are 10 ms: allow a few for rounding.
  EXPECT_GE(ring.dma_ring_seconds, 0.25);
  EXPECT_GE(ring.total_seconds, ring.dma_ring_seconds - 0.02);
  EXPECT_GE(ring.wall_seconds, 0.29);  // the ring burned 0.3 s of CPU on one thread
  EXPECT_GT(ring.cores_busy(), 0.0);

  Burn(0.3);  // on this thread, not a ring
  Result<CpuUse> after_main = ProcessCpuUse();
  ASSERT_TRUE(after_main.ok());
  const CpuUse main = *after_main - *after_ring;
  EXPECT_GE(main.total_seconds, 0.25);
  EXPECT_LT(main.dma_ring_seconds, 0.05);
}

TEST(ThreadCpu, UsableCpusIsTheAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(UsableCpus(), static_cast<unsigned>(CPU_COUNT(&set)));
  EXPECT_GE(UsableCpus(), 1u);
}

}  // namespace
}  // namespace vramflow
