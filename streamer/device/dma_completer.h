// SPDX-License-Identifier: MIT
// DmaCompleter: waits for DMA fences on its own threads, one per
// (device, ring), and calls a completion callback for each, in fence order.
//
// Flow-graph workers never block on hardware: a DMA node submits a copy,
// hands the fence here and returns; the callback puts the job back into the
// graph. A fence that does not signal within the timeout completes with an
// error, so nothing can hang. A waiting thread that cannot be created is an
// error value from Watch (the callback is then never called), never an
// exception. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "streamer/device/device.h"

namespace vramflow {

class DmaCompleter {
 public:
  using Callback = std::function<void(Status)>;

  explicit DmaCompleter(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  ~DmaCompleter();  // waits for every watched fence (each is bounded by the timeout)
  DmaCompleter(const DmaCompleter&) = delete;
  DmaCompleter& operator=(const DmaCompleter&) = delete;

  // Calls `done` once `fence` has signalled (or failed or timed out), on the
  // waiting thread of its (device, ring), started on first use. Fails, without
  // ever calling `done`, when that thread cannot be started.
  [[nodiscard]] Status Watch(Device* device, const DmaFence& fence, Callback done);

 private:
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<DmaFence, Callback>> queue;
    bool stopping = false;
    std::thread thread;
  };
  void Run(Device* device, Waiter* waiter);

  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::map<std::pair<Device*, uint32_t>, std::unique_ptr<Waiter>> waiters_;
};

}  // namespace vramflow
