// SPDX-License-Identifier: MIT
// SimDevice: a simulated GPU for tests and the demo.
//
// BOs are memfds (handed around as fds, like the dma-bufs KFD gives out);
// each DMA ring is a worker thread that executes copies in submission order
// with memcpy, optionally slowed to a bandwidth and a per-copy latency.
// Faults can be injected: a copy that fails, a fence that never signals.
// It exercises everything above the hardware; it is never a shortcut for
// the amdgpu backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "streamer/device/copy_rings.h"
#include "streamer/device/device.h"
#include "streamer/device/host_staging.h"

namespace vramflow {

struct SimDeviceOptions {
  uint32_t rings = 2;
  double bytes_per_second = 0;  // per ring; 0 = as fast as memcpy
  std::chrono::microseconds latency{0};
  // Pins the ring threads to these CPUs (empty: wherever the scheduler puts
  // them). Benchmarks use it to keep the emulated copies off the CPUs the
  // pipeline runs on, as SDMA would.
  std::vector<int> ring_cpus;
  // Fault injection, by copy number across all rings (0-based); -1 = never.
  int64_t fail_copy_at = -1;   // that copy reports an error
  int64_t stall_copy_at = -1;  // that copy's fence never signals (and its ring stops)
};

// Creates a simulated BO: a memfd of `size` bytes with its pages allocated
// (reads as zeros).
Result<UniqueFd> CreateSimBo(const std::string& name, uint64_t size);

// A read/write mapping of a whole simulated BO, unmapped on destruction.
class BoMapping {
 public:
  static Result<BoMapping> Map(int fd, uint64_t size);
  BoMapping() = default;
  ~BoMapping();
  BoMapping(BoMapping&& other) noexcept;
  BoMapping& operator=(BoMapping&& other) noexcept;
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

class SimDevice final : public Device {
 public:
  SimDevice(std::string name, SimDeviceOptions options);
  ~SimDevice() override;

  std::string Describe() const override { return "sim " + name_; }
  uint32_t RingCount() const override { return rings_.count(); }
  Result<uint32_t> ImportBo(int dmabuf_fd, uint64_t size) override;
  Status ReleaseBo(uint32_t bo) override;
  Result<uint32_t> RegisterStaging(uint8_t* data, size_t size) override;
  Status UnregisterStaging(uint32_t staging) override;
  Result<DmaFence> SubmitCopy(uint32_t ring, DmaDirection direction, uint32_t bo, uint64_t bo_offset, uint32_t staging,
                              size_t staging_offset, size_t size) override;
  Status WaitFence(const DmaFence& fence, std::chrono::milliseconds timeout) override;

  uint64_t copies_submitted() const;

 private:
  std::string name_;
  SimDeviceOptions options_;
  CopyRings rings_;
  mutable std::mutex tables_mu_;
  std::map<uint32_t, BoMapping> bos_;
  HostStagingTable staging_;
  uint32_t next_handle_ = 1;
  uint64_t copies_ = 0;
};

}  // namespace vramflow
