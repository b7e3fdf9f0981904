// SPDX-License-Identifier: MIT
// Device: what the pipeline needs from a GPU (or anything that holds
// objects): buffer objects, DMA engines ("rings"), and asynchronous copies
// between a BO range and registered host staging memory, each completing
// through a fence.
//
// The pipeline depends only on this interface. Implementations: the amdgpu
// backend (plugin/amdgpu/amdgpu_device.h, libdrm_amdgpu + SDMA), the simulated GPU
// (sim/gpu/sim_device.h, memfd BOs + ring threads) and the file device
// (streamer/device/file_device.h) that lets pack/unpack ride the same graphs.
//
// Thread safety: every method may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace vramflow {

enum class DmaDirection {
  kDeviceToHost,  // BO -> staging (dump)
  kHostToDevice,  // staging -> BO (restore)
};

struct DmaFence {
  uint32_t ring = 0;
  uint64_t sequence = 0;  // per ring, increasing
};

class Device {
 public:
  virtual ~Device() = default;

  // "sim gpu 0", "amdgpu renderD128", ...
  virtual std::string Describe() const = 0;
  // DMA engines that can run copies concurrently (at least 1).
  virtual uint32_t RingCount() const = 0;

  // Makes a BO usable for copies. `dmabuf_fd` stays owned by the caller.
  virtual Result<uint32_t> ImportBo(int dmabuf_fd, uint64_t size) = 0;
  virtual Status ReleaseBo(uint32_t bo) = 0;

  // Registers page-aligned host memory as a copy source/target.
  virtual Result<uint32_t> RegisterStaging(uint8_t* data, size_t size) = 0;
  virtual Status UnregisterStaging(uint32_t staging) = 0;

  // Queues a copy of `size` bytes between bo[bo_offset..] and
  // staging[staging_offset..] on `ring` and returns without waiting.
  virtual Result<DmaFence> SubmitCopy(uint32_t ring, DmaDirection direction, uint32_t bo, uint64_t bo_offset,
                                      uint32_t staging, size_t staging_offset, size_t size) = 0;
  // Waits for a fence. A failed copy is an error, a fence still unsignalled
  // after `timeout` a kTimedOut error, each naming device, ring and sequence.
  virtual Status WaitFence(const DmaFence& fence, std::chrono::milliseconds timeout) = 0;
};

}  // namespace vramflow
