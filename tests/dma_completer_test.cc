// SPDX-License-Identifier: MIT
#include "streamer/device/dma_completer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "sim/gpu/sim_device.h"

namespace vramflow {
namespace {

using namespace std::chrono_literals;

// One simulated GPU with a 1 MiB BO and a staging buffer with room for 64
// copies of 4 KiB, each copy to its own place (rings run concurrently).
struct Rig {
  explicit Rig(SimDeviceOptions options) : device("completer test", options), staging(64 * 4096) {
    Result<UniqueFd> fd = CreateSimBo("completer", 1 << 20);
    bo = *device.ImportBo(fd->get(), 1 << 20);
    staging_handle = *device.RegisterStaging(staging.data(), staging.size());
  }
  ~Rig() { (void)device.UnregisterStaging(staging_handle); }
  Result<DmaFence> Read(uint32_t ring, size_t copy) {
    return device.SubmitCopy(ring, DmaDirection::kDeviceToHost, bo, copy * 4096, staging_handle, copy * 4096, 4096);
  }
  SimDevice device;
  std::vector<uint8_t> staging;
  uint32_t bo = 0;
  uint32_t staging_handle = 0;
};

struct Outcomes {
  std::mutex mu;
  std::vector<Status> statuses;
  std::atomic<int> calls{0};
  DmaCompleter::Callback Collect(size_t i) {
    return [this, i](Status s) {
      std::lock_guard<std::mutex> lock(mu);
      if (statuses.size() <= i) statuses.resize(i + 1);
      statuses[i] = std::move(s);
      ++calls;
    };
  }
};

// Every fence is delivered once, with its outcome.
TEST(DmaCompleterTest, EveryFenceCompletesOnceWithItsOutcome) {
  SimDeviceOptions options;
  options.rings = 2;
  options.fail_copy_at = 5;
  Rig rig(options);
  Outcomes out;
  {
    DmaCompleter completer(5s);
    for (size_t i = 0; i < 40; ++i) {
      Result<DmaFence> fence = rig.Read(static_cast<uint32_t>(i % 2), i);
      ASSERT_TRUE(fence.ok()) << fence.status().ToString();
      ASSERT_TRUE(completer.Watch(&rig.device, *fence, out.Collect(i)).ok());
    }
  }  // the destructor returns once every callback has run
  EXPECT_EQ(out.calls.load(), 40);
  ASSERT_EQ(out.statuses.size(), 40u);
  for (size_t i = 0; i < 40; ++i) {
    if (i == 5) {
      EXPECT_FALSE(out.statuses[i].ok());
      EXPECT_NE(out.statuses[i].message().find("injected copy failure"), std::string::npos)
          << out.statuses[i].ToString();
      EXPECT_NE(out.statuses[i].message().find("DMA copy"), std::string::npos) << out.statuses[i].ToString();
    } else {
      EXPECT_TRUE(out.statuses[i].ok()) << i << ": " << out.statuses[i].ToString();
    }
  }
}

// A fence that never signals times out; later fences on its ring end at
// once; the other ring is not affected; nothing hangs.
TEST(DmaCompleterTest, StuckRingTimesOutItsFencesAndNotTheOtherRings) {
  SimDeviceOptions options;
  options.rings = 2;
  options.stall_copy_at = 2;  // copy 2 goes to ring 0 and hangs it
  Rig rig(options);
  Outcomes out;
  const auto start = std::chrono::steady_clock::now();
  {
    DmaCompleter completer(300ms);
    for (size_t i = 0; i < 8; ++i) {
      Result<DmaFence> fence = rig.Read(static_cast<uint32_t>(i % 2), i);
      ASSERT_TRUE(fence.ok());
      ASSERT_TRUE(completer.Watch(&rig.device, *fence, out.Collect(i)).ok());
    }
  }
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(out.calls.load(), 8);
  ASSERT_EQ(out.statuses.size(), 8u);
  EXPECT_TRUE(out.statuses[0].ok());
  EXPECT_EQ(out.statuses[2].code(), Status::Code::kTimedOut) << out.statuses[2].ToString();
  EXPECT_NE(out.statuses[2].message().find("did not signal within 300 ms"), std::string::npos)
      << out.statuses[2].ToString();
  for (size_t i : {4, 6}) EXPECT_FALSE(out.statuses[i].ok()) << "ring 0, fence " << i;
  for (size_t i : {1, 3, 5, 7})
    EXPECT_TRUE(out.statuses[i].ok()) << "ring 1, fence " << i << ": " << out.statuses[i].ToString();
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);
}

}  // namespace
}  // namespace vramflow
