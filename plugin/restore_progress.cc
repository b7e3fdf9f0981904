// SPDX-License-Identifier: MIT
#include "plugin/restore_progress.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <new>

namespace vramflow {

Result<std::unique_ptr<RestoreProgress>> RestoreProgress::Create() {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Status::FromErrno("mapping the restore progress page", errno);
  Shared* shared = new (p) Shared{};
  return std::unique_ptr<RestoreProgress>(new RestoreProgress(shared));
}

RestoreProgress::~RestoreProgress() { ::munmap(shared_, static_cast<size_t>(::sysconf(_SC_PAGESIZE))); }

void RestoreProgress::FileDone() { shared_->done.fetch_add(1, std::memory_order_release); }
void RestoreProgress::FileFailed() { shared_->failed.fetch_add(1, std::memory_order_release); }
uint32_t RestoreProgress::done() const { return shared_->done.load(std::memory_order_acquire); }
uint32_t RestoreProgress::failed() const { return shared_->failed.load(std::memory_order_acquire); }

}  // namespace vramflow
