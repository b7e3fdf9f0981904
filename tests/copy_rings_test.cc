// SPDX-License-Identifier: MIT
#include "streamer/device/copy_rings.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>

namespace vramflow {
namespace {

using namespace std::chrono_literals;

// Pinned rings run their copies on the CPUs named, and only there.
TEST(CopyRingsTest, PinnedRingsCopyOnTheirCpus) {
  CopyRings rings("pin test", 2, 0, 0us, {0});
  for (uint32_t ring = 0; ring < 2; ++ring) {
    int cpu = -1;
    int allowed = -1;
    Result<DmaFence> fence = rings.Submit(ring, 1, [&]() -> Status {
      cpu_set_t set;
      CPU_ZERO(&set);
      if (sched_getaffinity(0, sizeof(set), &set) != 0) return Status::Internal("sched_getaffinity");
      allowed = CPU_COUNT(&set);
      cpu = sched_getcpu();
      return Status::Ok();
    });
    ASSERT_TRUE(fence.ok());
    ASSERT_TRUE(rings.Wait(*fence, 5s).ok());
    EXPECT_EQ(cpu, 0) << "ring " << ring;
    EXPECT_EQ(allowed, 1) << "ring " << ring;
  }
}

// A ring that cannot be pinned says so on every copy instead of running
// somewhere else unnoticed.
TEST(CopyRingsTest, ARingThatCannotBePinnedFailsItsCopies) {
  CopyRings rings("pin test", 1, 0, 0us, {CPU_SETSIZE + 1});
  bool ran = false;
  Result<DmaFence> fence = rings.Submit(0, 1, [&]() -> Status {
    ran = true;
    return Status::Ok();
  });
  ASSERT_TRUE(fence.ok());
  Status s = rings.Wait(*fence, 5s);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(ran);
  EXPECT_NE(s.message().find("pinning ring 0 to CPUs " + std::to_string(CPU_SETSIZE + 1)), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace vramflow
