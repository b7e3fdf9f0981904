// SPDX-License-Identifier: MIT
// MemoryBudget: one byte budget (--max-memory, KFD_MAX_BUFFER_SIZE) that
// every buffer the pipeline allocates is charged to: staging and payload
// slots, per-thread codec scratch, reader buffers. Charging more than the
// budget fails instead of growing, so peak memory is set up front and does
// not depend on how much VRAM is moved. The peak is recorded so tests can
// check the budget was honoured. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace vramflow {

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Charges `bytes` for `what`; fails (charging nothing) past the limit.
  Status Charge(uint64_t bytes, const std::string& what);
  void Refund(uint64_t bytes);

  uint64_t limit() const { return limit_; }
  uint64_t in_use() const { return in_use_.load(); }
  uint64_t peak() const { return peak_.load(); }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> in_use_{0};
  std::atomic<uint64_t> peak_{0};
};

// Page-aligned anonymous memory charged to a budget; unmapped and refunded
// on destruction.
class BudgetedBuffer {
 public:
  static Result<BudgetedBuffer> Allocate(MemoryBudget* budget, size_t size, const std::string& what);
  BudgetedBuffer() = default;
  ~BudgetedBuffer();
  BudgetedBuffer(BudgetedBuffer&& other) noexcept;
  BudgetedBuffer& operator=(BudgetedBuffer&& other) noexcept;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void Free();
  MemoryBudget* budget_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace vramflow
