// SPDX-License-Identifier: MIT
// HostStagingTable: the staging buffers registered with a device whose
// "DMA" is done by the CPU (the simulated GPU, the file device): handles to
// plain host memory, and the bounds check every copy makes. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"

namespace vramflow {

class HostStagingTable {
 public:
  // `owner` names the device in error messages.
  explicit HostStagingTable(std::string owner) : owner_(std::move(owner)) {}

  uint32_t Register(uint8_t* data, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t handle = next_handle_++;
    buffers_[handle] = {data, size};
    return handle;
  }

  Status Unregister(uint32_t handle) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!buffers_.erase(handle))
      return Status::InvalidArgument(owner_ + ": no staging buffer " + std::to_string(handle));
    return Status::Ok();
  }

  // The address of [offset, offset + size) of buffer `handle`, if it lies inside.
  Result<uint8_t*> Range(uint32_t handle, size_t offset, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = buffers_.find(handle);
    if (it == buffers_.end()) return Status::InvalidArgument(owner_ + ": no staging buffer " + std::to_string(handle));
    if (offset > it->second.second || size > it->second.second - offset)
      return Status::InvalidArgument(owner_ + ": copy outside its staging buffer");
    return it->second.first + offset;
  }

 private:
  const std::string owner_;
  std::mutex mu_;
  std::map<uint32_t, std::pair<uint8_t*, size_t>> buffers_;
  uint32_t next_handle_ = 1;
};

}  // namespace vramflow
