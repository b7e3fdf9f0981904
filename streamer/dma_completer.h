// DmaCompleter: calls a completion callback for each watched DMA fence,
// with a deadline, so that flow-graph workers never block on hardware: a
// DMA node submits a copy, hands the fence here and returns; the callback
// puts the job back into the graph.
//
// Devices that report completion themselves (Device::CallOnCompletion: the
// emulated rings) call back from their own threads, and one watchdog thread
// fails the fences that miss their deadline. For the others (amdgpu) one
// thread per (device, ring) waits on the fences in order. Either way a fence
// that does not signal within the timeout completes with a kTimedOut error,
// and later fences on its ring with an error at once, so nothing can hang.
// Every callback is called exactly once. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "streamer/device.h"

namespace vramflow {

class DmaCompleter {
 public:
  using Callback = std::function<void(Status)>;

  explicit DmaCompleter(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  ~DmaCompleter();  // waits for every watched fence (each is bounded by the timeout)
  DmaCompleter(const DmaCompleter&) = delete;
  DmaCompleter& operator=(const DmaCompleter&) = delete;

  void Watch(Device* device, const DmaFence& fence, Callback done);

 private:
  using RingKey = std::pair<Device*, uint32_t>;

  // A fence its device calls back for.
  struct Pending {
    Callback done;
    Device* device = nullptr;
    DmaFence fence;
    std::chrono::steady_clock::time_point deadline;
    std::atomic<bool> finished{false};  // the first of device and watchdog to finish it wins
  };
  void Finish(const std::shared_ptr<Pending>& pending, Status status);
  void Watchdog();

  // A thread waiting on one ring's fences in order, for other devices.
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<DmaFence, Callback>> queue;
    bool stopping = false;
    std::thread thread;
  };
  void Run(Device* device, Waiter* waiter);

  Status RingStopped(Device* device, const DmaFence& fence) const;
  Status DidNotSignal(Device* device, const DmaFence& fence) const;

  const std::chrono::milliseconds timeout_;

  std::mutex mu_;                                  // guards everything below
  std::map<RingKey, std::unique_ptr<Waiter>> waiters_;
  std::deque<std::shared_ptr<Pending>> pending_;  // in deadline order (one timeout for all)
  size_t unfinished_ = 0;                         // pending callbacks not yet returned
  std::set<RingKey> dead_rings_;                  // a fence timed out on them
  bool stopping_ = false;
  std::condition_variable pending_cv_;  // the watchdog's sleep, and the destructor's wait
  std::thread watchdog_;
};

}  // namespace vramflow
