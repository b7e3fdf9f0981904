// SPDX-License-Identifier: MIT
// AmdgpuDevice: the real backend of streamer/device/device.h, on libdrm_amdgpu.
//
// Opens a render node, imports each BO from its dma-buf fd, registers host
// staging buffers as userptr BOs, maps everything into the GPU VA space and
// moves bytes with SDMA COPY_LINEAR packets (plugin/amdgpu/sdma_packets.h) on every
// SDMA ring the device reports (amdgpu_query_hw_ip_info). Each ring keeps one
// context and a pool of IB slots in one GTT BO, reused across copies; a copy
// is one IB, its fence the submission's sequence number. A submission's BO
// list holds only what the copy touches (CopySubmissionBos: the IB buffer,
// the BO, the staging buffer), made for it and destroyed once submitted: the
// kernel validates every listed BO per submission, so listing every imported
// BO and staging buffer would cost each copy work proportional to them all.
// Fence waits have a timeout and name the device and ring when they fail.
//
// Compiled in every build; usable only where /dev/dri/renderD* belongs to an
// AMD GPU. Thread-safe: submissions on one ring are serialised.
#pragma once

#include <amdgpu.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "plugin/amdgpu/sdma_packets.h"
#include "streamer/device/device.h"

namespace vramflow {

class AmdgpuDevice final : public Device {
 public:
  // Opens `render_node` (e.g. "/dev/dri/renderD128").
  static Result<std::unique_ptr<AmdgpuDevice>> Open(const std::string& render_node);
  ~AmdgpuDevice() override;

  std::string Describe() const override { return "amdgpu " + render_node_; }
  uint32_t RingCount() const override { return static_cast<uint32_t>(rings_.size()); }
  Result<uint32_t> ImportBo(int dmabuf_fd, uint64_t size) override;
  Status ReleaseBo(uint32_t bo) override;
  Result<uint32_t> RegisterStaging(uint8_t* data, size_t size) override;
  Status UnregisterStaging(uint32_t staging) override;
  Result<DmaFence> SubmitCopy(uint32_t ring, DmaDirection direction, uint32_t bo, uint64_t bo_offset, uint32_t staging,
                              size_t staging_offset, size_t size) override;
  Status WaitFence(const DmaFence& fence, std::chrono::milliseconds timeout) override;

  const SdmaCopyConvention& convention() const { return convention_; }

 private:
  // A BO mapped into the GPU's VA space.
  struct MappedBo {
    amdgpu_bo_handle bo = nullptr;
    amdgpu_va_handle va_handle = nullptr;
    uint64_t va = 0;
    uint64_t size = 0;         // bytes usable
    uint64_t mapped_size = 0;  // page-rounded size of the VA mapping
  };
  struct Ring {
    uint32_t hw_ring = 0;  // ring index for amdgpu_cs_submit
    std::mutex mu;
    amdgpu_context_handle context = nullptr;
    MappedBo ib;
    uint32_t* ib_cpu = nullptr;
    std::vector<uint64_t> slot_fence;  // sequence that last used each IB slot (0: free)
    uint32_t next_slot = 0;
  };

  AmdgpuDevice() = default;
  Status Init(const std::string& render_node);
  Result<MappedBo> MapBo(amdgpu_bo_handle bo, uint64_t size);
  // Maps `bo` (taking ownership; freed on failure) and gives it a handle.
  Result<uint32_t> AddBo(amdgpu_bo_handle bo, uint64_t size);
  void UnmapBo(MappedBo& bo);
  Status WaitSequence(Ring& ring, uint64_t sequence, uint64_t timeout_ns);

  std::string render_node_;
  UniqueFd fd_;
  amdgpu_device_handle device_ = nullptr;
  SdmaCopyConvention convention_{};
  std::vector<std::unique_ptr<Ring>> rings_;

  std::mutex tables_mu_;
  std::map<uint32_t, MappedBo> bos_;  // imported BOs and staging buffers
  uint32_t next_handle_ = 1;
};

// Render nodes (/dev/dri/renderD*) that belong to the amdgpu driver.
std::vector<std::string> FindAmdgpuRenderNodes(const std::string& sysfs_root = "/sys");

}  // namespace vramflow
