// FileDevice: open files as a device, so `pack` and `unpack` ride the same
// dump and restore graphs as GPUs do. Each "BO" is a byte range of a file;
// a DMA copy is a pread or pwrite run on a ring thread.
#pragma once

#include <map>
#include <mutex>

#include "common/unique_fd.h"
#include "streamer/copy_rings.h"
#include "streamer/device.h"
#include "streamer/host_staging.h"

namespace vramflow {

class FileDevice final : public Device {
 public:
  // A range whose end is not known yet (an output file still growing).
  static constexpr uint64_t kUnbounded = ~uint64_t{0};

  explicit FileDevice(std::string name = "files", uint32_t rings = 2);

  std::string Describe() const override { return "file device '" + name_ + "'"; }
  uint32_t RingCount() const override { return rings_.count(); }
  // The whole file from offset 0; `fd` is duplicated, the caller keeps its own.
  Result<uint32_t> ImportBo(int fd, uint64_t size) override;
  // Bytes [base, base + size) of the file (size may be kUnbounded).
  Result<uint32_t> ImportFileRange(int fd, uint64_t base, uint64_t size, std::string description);
  Status ReleaseBo(uint32_t bo) override;
  Result<uint32_t> RegisterStaging(uint8_t* data, size_t size) override;
  Status UnregisterStaging(uint32_t staging) override;
  Result<DmaFence> SubmitCopy(uint32_t ring, DmaDirection direction, uint32_t bo, uint64_t bo_offset,
                              uint32_t staging, size_t staging_offset, size_t size) override;
  Status WaitFence(const DmaFence& fence, std::chrono::milliseconds timeout) override {
    return rings_.Wait(fence, timeout);
  }

 private:
  struct Range {
    UniqueFd fd;
    uint64_t base;
    uint64_t size;
    std::string description;
  };
  std::string name_;
  CopyRings rings_;
  std::mutex mu_;
  std::map<uint32_t, Range> ranges_;
  HostStagingTable staging_;
  uint32_t next_handle_ = 1;
};

}  // namespace vramflow
