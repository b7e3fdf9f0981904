// Pieces shared by the dump and restore graphs (internal to streamer/).
#pragma once

#include <atomic>
#include <mutex>
#include <thread>

#include "common/status.h"

namespace vramflow {

// Keeps the first error; every stage polls failed() and stops doing work.
class ErrorLatch {
 public:
  void Set(const Status& status) {
    if (status.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (first_.ok()) {
      first_ = status;
      failed_.store(true, std::memory_order_release);
    }
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_;
  }

 private:
  mutable std::mutex mu_;
  Status first_;
  std::atomic<bool> failed_{false};
};

inline unsigned ResolveThreads(unsigned threads) {
  if (threads) return threads;
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

}  // namespace vramflow
