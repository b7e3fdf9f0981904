// SPDX-License-Identifier: MIT
#include "streamer/device/copy_rings.h"

#include <pthread.h>
#include <sched.h>

#include "common/thread_start.h"

namespace vramflow {

CopyRings::CopyRings(std::string owner, uint32_t count, double bytes_per_second, std::chrono::microseconds latency,
                     std::vector<int> cpus)
    : owner_(std::move(owner)), bytes_per_second_(bytes_per_second), latency_(latency), cpus_(std::move(cpus)) {
  for (uint32_t i = 0; i < std::max<uint32_t>(1, count); ++i) {
    rings_.push_back(std::make_unique<Ring>());
    rings_.back()->index = i;
  }
  for (auto& ring : rings_)
    ring->start_error = StartThread(&ring->worker, owner_ + " DMA ring " + std::to_string(ring->index),
                                    [this, r = ring.get()] { Run(*r); });
}

CopyRings::~CopyRings() {
  for (auto& ring : rings_) {
    {
      std::lock_guard<std::mutex> lock(ring->mu);
      ring->stop = true;
    }
    ring->work_cv.notify_all();
    if (ring->worker.joinable()) ring->worker.join();
  }
}

void CopyRings::Run(Ring& ring) {
  pthread_setname_np(pthread_self(), kDmaRingThreadName);
  Status pinned;
  if (!cpus_.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::string list;
    for (int cpu : cpus_) {
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
      if (!list.empty()) list += ',';
      list += std::to_string(cpu);
    }
    if (int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); err != 0)
      pinned = Status::FromErrno(owner_ + ": pinning ring " + std::to_string(ring.index) + " to CPUs " + list, err);
  }
  const auto start = std::chrono::steady_clock::now();
  double busy_until = 0;  // seconds since start, for the bandwidth model
  for (;;) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(ring.mu);
      ring.work_cv.wait(lock, [&] { return ring.stop || !ring.queue.empty(); });
      if (ring.stop) return;
      work = std::move(ring.queue.front());
      ring.queue.pop_front();
      if (work.stall) {  // the engine hangs: wait for shutdown, complete nothing
        ring.work_cv.wait(lock, [&] { return ring.stop; });
        return;
      }
    }
    Status status = pinned.ok() ? work.copy() : pinned;
    if (bytes_per_second_ > 0 || latency_.count() > 0) {
      double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double cost = std::chrono::duration<double>(latency_).count() +
                    (bytes_per_second_ > 0 ? static_cast<double>(work.bytes) / bytes_per_second_ : 0);
      busy_until = std::max(busy_until, now) + cost;
      if (busy_until > now) std::this_thread::sleep_for(std::chrono::duration<double>(busy_until - now));
    }
    {
      std::lock_guard<std::mutex> lock(ring.mu);
      ring.completed = work.sequence;
      if (!status.ok()) ring.errors[work.sequence] = std::move(status);
    }
    ring.done_cv.notify_all();
  }
}

Result<DmaFence> CopyRings::Submit(uint32_t ring_index, size_t bytes, std::function<Status()> copy, bool stall) {
  if (ring_index >= rings_.size()) return Status::InvalidArgument(owner_ + ": no ring " + std::to_string(ring_index));
  Ring& ring = *rings_[ring_index];
  if (!ring.start_error.ok()) return ring.start_error;
  DmaFence fence;
  fence.ring = ring_index;
  {
    std::lock_guard<std::mutex> lock(ring.mu);
    fence.sequence = ring.next_sequence++;
    ring.queue.push_back(Work{fence.sequence, bytes, std::move(copy), stall});
  }
  ring.work_cv.notify_one();  // one worker per ring
  return fence;
}

Status CopyRings::Wait(const DmaFence& fence, std::chrono::milliseconds timeout) {
  if (fence.ring >= rings_.size()) return Status::InvalidArgument(owner_ + ": no ring " + std::to_string(fence.ring));
  Ring& ring = *rings_[fence.ring];
  std::unique_lock<std::mutex> lock(ring.mu);
  if (!ring.done_cv.wait_for(lock, timeout, [&] { return ring.completed >= fence.sequence; }))
    return Status::TimedOut(owner_ + ": DMA fence " + std::to_string(fence.sequence) + " on ring " +
                            std::to_string(fence.ring) + " did not signal within " + std::to_string(timeout.count()) +
                            " ms");
  auto error = ring.errors.find(fence.sequence);
  if (error == ring.errors.end()) return Status::Ok();
  Status s = std::move(error->second);
  ring.errors.erase(error);
  return s.WithContext(owner_ + ": DMA copy " + std::to_string(fence.sequence) + " on ring " +
                       std::to_string(fence.ring));
}

}  // namespace vramflow
