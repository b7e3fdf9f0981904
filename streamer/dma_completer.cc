#include "streamer/dma_completer.h"

#include <algorithm>
#include <vector>

namespace vramflow {

DmaCompleter::~DmaCompleter() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    pending_cv_.notify_all();
    pending_cv_.wait(lock, [&] { return unfinished_ == 0; });  // the watchdog ends the stuck ones
  }
  pending_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  for (auto& [key, waiter] : waiters_) {
    {
      std::lock_guard<std::mutex> lock(waiter->mu);
      waiter->stopping = true;
    }
    waiter->cv.notify_all();
    waiter->thread.join();
  }
}

Status DmaCompleter::RingStopped(Device* device, const DmaFence& fence) const {
  return Status::Cancelled(device->Describe() + ": ring " + std::to_string(fence.ring) +
                           " stopped after an earlier fence timed out");
}

Status DmaCompleter::DidNotSignal(Device* device, const DmaFence& fence) const {
  return Status::TimedOut(device->Describe() + ": DMA fence " + std::to_string(fence.sequence) + " on ring " +
                          std::to_string(fence.ring) + " did not signal within " + std::to_string(timeout_.count()) +
                          " ms");
}

void DmaCompleter::Watch(Device* device, const DmaFence& fence, Callback done) {
  auto pending = std::make_shared<Pending>();
  pending->done = std::move(done);
  pending->device = device;
  pending->fence = fence;
  pending->deadline = std::chrono::steady_clock::now() + timeout_;
  bool ring_dead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ring_dead = dead_rings_.count({device, fence.ring}) != 0;
    if (!ring_dead) {
      pending_.push_back(pending);
      ++unfinished_;
      if (!watchdog_.joinable()) watchdog_ = std::thread([this] { Watchdog(); });
    }
  }
  if (ring_dead) {
    pending->done(RingStopped(device, fence));
    return;
  }
  // The callback holds `pending`, not the caller's state: a device that calls
  // back after the watchdog has timed the fence out finds it finished.
  if (device->CallOnCompletion(fence, [this, pending](Status s) { Finish(pending, std::move(s)); })) return;

  // This device cannot call back (it never will): a thread waits instead.
  pending->finished = true;  // the watchdog drops it
  Callback callback = std::move(pending->done);
  Waiter* waiter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --unfinished_;
    auto& slot = waiters_[{device, fence.ring}];
    if (!slot) {
      slot = std::make_unique<Waiter>();
      slot->thread = std::thread([this, device, w = slot.get()] { Run(device, w); });
    }
    waiter = slot.get();
  }
  {
    std::lock_guard<std::mutex> lock(waiter->mu);
    waiter->queue.emplace_back(fence, std::move(callback));
  }
  waiter->cv.notify_one();
}

void DmaCompleter::Finish(const std::shared_ptr<Pending>& pending, Status status) {
  if (pending->finished.exchange(true)) return;  // the other side got there first
  pending->done(std::move(status));
  std::lock_guard<std::mutex> lock(mu_);
  if (--unfinished_ == 0) pending_cv_.notify_all();
}

void DmaCompleter::Watchdog() {
  using namespace std::chrono_literals;
  const auto poll = std::clamp<std::chrono::milliseconds>(timeout_ / 8, 1ms, 100ms);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    while (!pending_.empty() && pending_.front()->finished) pending_.pop_front();
    if (stopping_ && unfinished_ == 0) return;
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::pair<std::shared_ptr<Pending>, Status>> expired;
    for (const auto& p : pending_) {
      if (p->finished) continue;
      const RingKey key{p->device, p->fence.ring};
      if (p->deadline <= now) {
        dead_rings_.insert(key);
        expired.emplace_back(p, DidNotSignal(p->device, p->fence));
      } else if (dead_rings_.count(key)) {
        expired.emplace_back(p, RingStopped(p->device, p->fence));
      }
    }
    if (expired.empty()) {
      pending_cv_.wait_for(lock, poll);
      continue;
    }
    lock.unlock();
    for (auto& [p, status] : expired) Finish(p, std::move(status));
    lock.lock();
  }
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
    Status s = ring_dead ? RingStopped(device, item.first) : device->WaitFence(item.first, timeout_);
    if (s.code() == Status::Code::kTimedOut) ring_dead = true;
    item.second(std::move(s));
  }
}

}  // namespace vramflow
