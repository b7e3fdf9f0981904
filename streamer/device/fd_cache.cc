// SPDX-License-Identifier: MIT
#include "streamer/device/fd_cache.h"

#include <vector>

namespace vramflow {

FdCache::FdCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

Result<std::shared_ptr<const UniqueFd>> FdCache::Get(uint64_t key, const FileOpener& open) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_key_.find(key);
    if (it != by_key_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second);
      return it->second->second;
    }
  }
  VF_ASSIGN_OR_RETURN(UniqueFd opened, open());
  auto fd = std::make_shared<const UniqueFd>(std::move(opened));
  std::vector<std::shared_ptr<const UniqueFd>> evicted;  // closed after the lock is released
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (by_key_.count(key)) return fd;  // opened by another thread meanwhile: ours is for this user only
    recent_.emplace_front(key, fd);
    by_key_[key] = recent_.begin();
    while (recent_.size() > capacity_) {
      by_key_.erase(recent_.back().first);
      evicted.push_back(std::move(recent_.back().second));
      recent_.pop_back();
    }
  }
  return fd;
}

void FdCache::Drop(uint64_t key) {
  std::shared_ptr<const UniqueFd> dropped;  // closed after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  dropped = std::move(it->second->second);
  recent_.erase(it->second);
  by_key_.erase(it);
}

size_t FdCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recent_.size();
}

}  // namespace vramflow
