#include "streamer/dma_completer.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "sim/sim_device.h"

namespace vramflow {
namespace {

using namespace std::chrono_literals;

// A device that forwards everything but CallOnCompletion, as the amdgpu
// backend does: DmaCompleter must wait on its fences with threads.
class NoCallbackDevice final : public Device {
 public:
  explicit NoCallbackDevice(Device* inner) : inner_(inner) {}
  std::string Describe() const override { return inner_->Describe(); }
  uint32_t RingCount() const override { return inner_->RingCount(); }
  Result<uint32_t> ImportBo(int fd, uint64_t size) override { return inner_->ImportBo(fd, size); }
  Status ReleaseBo(uint32_t bo) override { return inner_->ReleaseBo(bo); }
  Result<uint32_t> RegisterStaging(uint8_t* data, size_t size) override { return inner_->RegisterStaging(data, size); }
  Status UnregisterStaging(uint32_t staging) override { return inner_->UnregisterStaging(staging); }
  Result<DmaFence> SubmitCopy(uint32_t ring, DmaDirection direction, uint32_t bo, uint64_t bo_offset, uint32_t staging,
                              size_t staging_offset, size_t size) override {
    return inner_->SubmitCopy(ring, direction, bo, bo_offset, staging, staging_offset, size);
  }
  Status WaitFence(const DmaFence& fence, std::chrono::milliseconds timeout) override {
    return inner_->WaitFence(fence, timeout);
  }

 private:
  Device* inner_;
};

// One simulated GPU with a 1 MiB BO and a staging buffer with room for 64
// copies of 4 KiB, each copy to its own place (rings run concurrently).
struct Rig {
  explicit Rig(SimDeviceOptions options) : device("completer test", options), staging(64 * 4096) {
    Result<UniqueFd> fd = CreateSimBo("completer", 1 << 20);
    bo = *device.ImportBo(fd->get(), 1 << 20);
    staging_handle = *device.RegisterStaging(staging.data(), staging.size());
  }
  ~Rig() { (void)device.UnregisterStaging(staging_handle); }
  Result<DmaFence> Read(Device& d, uint32_t ring, size_t copy) {
    return d.SubmitCopy(ring, DmaDirection::kDeviceToHost, bo, copy * 4096, staging_handle, copy * 4096, 4096);
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

// Both ways of learning of a completion deliver every fence once, with its outcome.
TEST(DmaCompleterTest, EveryFenceCompletesOnceWithOrWithoutDeviceCallbacks) {
  for (bool callbacks : {true, false}) {
    SimDeviceOptions options;
    options.rings = 2;
    options.fail_copy_at = 5;
    Rig rig(options);
    NoCallbackDevice plain(&rig.device);
    Device& device = callbacks ? static_cast<Device&>(rig.device) : plain;
    Outcomes out;
    {
      DmaCompleter completer(5s);
      for (size_t i = 0; i < 40; ++i) {
        Result<DmaFence> fence = rig.Read(device, static_cast<uint32_t>(i % 2), i);
        ASSERT_TRUE(fence.ok()) << fence.status().ToString();
        completer.Watch(&device, *fence, out.Collect(i));
      }
    }  // the destructor returns once every callback has run
    EXPECT_EQ(out.calls.load(), 40) << "callbacks " << callbacks;
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
}

// A fence that never signals times out; later fences on its ring end at
// once; the other ring is not affected; nothing hangs.
TEST(DmaCompleterTest, StuckRingTimesOutItsFencesAndNotTheOtherRings) {
  for (bool callbacks : {true, false}) {
    SimDeviceOptions options;
    options.rings = 2;
    options.stall_copy_at = 2;  // copy 2 goes to ring 0 and hangs it
    Rig rig(options);
    NoCallbackDevice plain(&rig.device);
    Device& device = callbacks ? static_cast<Device&>(rig.device) : plain;
    Outcomes out;
    const auto start = std::chrono::steady_clock::now();
    {
      DmaCompleter completer(300ms);
      for (size_t i = 0; i < 8; ++i) {
        Result<DmaFence> fence = rig.Read(device, static_cast<uint32_t>(i % 2), i);
        ASSERT_TRUE(fence.ok());
        completer.Watch(&device, *fence, out.Collect(i));
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
    for (size_t i : {1, 3, 5, 7}) EXPECT_TRUE(out.statuses[i].ok()) << "ring 1, fence " << i << ": " << out.statuses[i].ToString();
    EXPECT_GE(took, 250ms) << "callbacks " << callbacks;
    EXPECT_LT(took, 3s) << "callbacks " << callbacks;
  }
}

// The device's callback runs on its ring thread, not on a completer thread,
// and a fence that completed before Watch is delivered at once.
TEST(DmaCompleterTest, DeviceCallbacksRunOnTheRingThreadOrAtOnce) {
  SimDeviceOptions options;
  options.rings = 1;
  options.latency = 100ms;  // the second copy cannot be done before Watch
  Rig rig(options);
  DmaCompleter completer(5s);
  Result<DmaFence> done_before = rig.Read(rig.device, 0, 0);
  ASSERT_TRUE(done_before.ok());
  ASSERT_TRUE(rig.device.WaitFence(*done_before, 5s).ok());
  std::thread::id ran_on;
  completer.Watch(&rig.device, *done_before, [&](Status s) {
    EXPECT_TRUE(s.ok());
    ran_on = std::this_thread::get_id();
  });
  EXPECT_EQ(ran_on, std::this_thread::get_id());

  std::atomic<bool> delivered{false};
  char name[32] = {};
  Result<DmaFence> later = rig.Read(rig.device, 0, 1);
  ASSERT_TRUE(later.ok());
  completer.Watch(&rig.device, *later, [&](Status s) {
    EXPECT_TRUE(s.ok());
    pthread_getname_np(pthread_self(), name, sizeof(name));
    delivered = true;
  });
  for (int i = 0; i < 2000 && !delivered; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(delivered.load());
  EXPECT_STREQ(name, kDmaRingThreadName);
}

}  // namespace
}  // namespace vramflow
