#include "streamer/dma_completer.h"

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

void DmaCompleter::Watch(Device* device, const DmaFence& fence, Callback done) {
  Waiter* waiter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = waiters_[{device, fence.ring}];
    if (!slot) {
      slot = std::make_unique<Waiter>();
      slot->thread = std::thread([this, device, w = slot.get()] { Run(device, w); });
    }
    waiter = slot.get();
  }
  {
    std::lock_guard<std::mutex> lock(waiter->mu);
    waiter->queue.emplace_back(fence, std::move(done));
  }
  waiter->cv.notify_one();
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
