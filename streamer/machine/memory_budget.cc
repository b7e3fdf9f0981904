// SPDX-License-Identifier: MIT
#include "streamer/machine/memory_budget.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/units.h"

namespace vramflow {

Status MemoryBudget::Charge(uint64_t bytes, const std::string& what) {
  uint64_t current = in_use_.load();
  do {
    if (bytes > limit_ || current > limit_ - bytes)
      return Status::InvalidArgument("memory budget of " + FormatSize(limit_) + " exceeded by " + what + " (" +
                                     FormatSize(bytes) + " more on top of " + FormatSize(current) + ")");
  } while (!in_use_.compare_exchange_weak(current, current + bytes));
  uint64_t now = current + bytes;
  uint64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return Status::Ok();
}

void MemoryBudget::Refund(uint64_t bytes) { in_use_.fetch_sub(bytes); }

Result<BudgetedBuffer> BudgetedBuffer::Allocate(MemoryBudget* budget, size_t size, const std::string& what) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  size_t mapped = (std::max<size_t>(size, 1) + page - 1) / page * page;
  VF_RETURN_IF_ERROR(budget->Charge(mapped, what));
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    budget->Refund(mapped);
    return Status::FromErrno("allocating " + FormatSize(mapped) + " for " + what, errno);
  }
  BudgetedBuffer b;
  b.budget_ = budget;
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = size;
  b.mapped_ = mapped;
  return b;
}

void BudgetedBuffer::Free() {
  if (data_) {
    ::munmap(data_, mapped_);
    budget_->Refund(mapped_);
  }
  data_ = nullptr;
  size_ = mapped_ = 0;
}

BudgetedBuffer::~BudgetedBuffer() { Free(); }

BudgetedBuffer::BudgetedBuffer(BudgetedBuffer&& other) noexcept
    : budget_(other.budget_),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

BudgetedBuffer& BudgetedBuffer::operator=(BudgetedBuffer&& other) noexcept {
  if (this != &other) {
    Free();
    budget_ = other.budget_;
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

}  // namespace vramflow
