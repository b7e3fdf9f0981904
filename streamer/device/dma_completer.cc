// SPDX-License-Identifier: MIT
#include "streamer/device/dma_completer.h"

#include "common/thread_start.h"

namespace vramflow {

DmaCompleter::~DmaCompleter() {
  for (auto& [key, waiter] : waiters_) {
    {
      std::lock_guard<std::mutex> lock(waiter->mu);
      waiter->stopping = true;
    }
    waiter->cv.notify_all();
    waiter->thread.join();
  }
}

Status DmaCompleter::Watch(Device* device, const DmaFence& fence, Callback done) {
  Waiter* waiter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = waiters_[{device, fence.ring}];
    if (!slot) {
      slot = std::make_unique<Waiter>();
      Status started =
          StartThread(&slot->thread, "waiting on DMA ring " + std::to_string(fence.ring) + " of " + device->Describe(),
                      [this, device, w = slot.get()] { Run(device, w); });
      if (!started.ok()) {
        waiters_.erase({device, fence.ring});  // the destructor joins only waiters with a thread
        return started;
      }
    }
    waiter = slot.get();
  }
  {
    std::lock_guard<std::mutex> lock(waiter->mu);
    waiter->queue.emplace_back(fence, std::move(done));
  }
  waiter->cv.notify_one();
  return Status::Ok();
}

void DmaCompleter::Run(Device* device, Waiter* waiter) {
  bool ring_dead = false;  // after a timeout, later fences on the ring cannot signal either
  for (;;) {
    std::pair<DmaFence, Callback> item;
    {
      std::unique_lock<std::mutex> lock(waiter->mu);
      waiter->cv.wait(lock, [&] { return waiter->stopping || !waiter->queue.empty(); });
      if (waiter->queue.empty()) return;  // stopping, and everything delivered
      item = std::move(waiter->queue.front());
      waiter->queue.pop_front();
    }
    Status s = ring_dead ? Status::Cancelled(device->Describe() + ": ring " + std::to_string(item.first.ring) +
                                             " stopped after an earlier fence timed out")
                         : device->WaitFence(item.first, timeout_);
    if (s.code() == Status::Code::kTimedOut) ring_dead = true;
    item.second(std::move(s));
  }
}

}  // namespace vramflow
