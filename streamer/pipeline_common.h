// SPDX-License-Identifier: MIT
// Pieces shared by the dump and restore graphs (internal to streamer/).
#pragma once

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

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

// Asked for more threads than oneTBB runs by default (its CPUs, as the
// affinity mask says, or a lower max_allowed_parallelism): oneTBB would cap
// its workers (and print a warning) unless the limit is raised while the
// graph runs. Holds the raised limit, or nothing. (Behind a pointer: a
// global_control is registered at its address, so it must not be moved.)
inline std::unique_ptr<oneapi::tbb::global_control> AllowTbbThreads(unsigned threads) {
  const auto allowed = oneapi::tbb::global_control::active_value(oneapi::tbb::global_control::max_allowed_parallelism);
  if (threads > static_cast<unsigned>(oneapi::tbb::info::default_concurrency()) || threads > allowed)
    return std::make_unique<oneapi::tbb::global_control>(oneapi::tbb::global_control::max_allowed_parallelism, threads);
  return nullptr;
}

}  // namespace vramflow
