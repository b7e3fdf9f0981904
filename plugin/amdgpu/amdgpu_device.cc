// SPDX-License-Identifier: MIT
#include "plugin/amdgpu/amdgpu_device.h"

#include <amdgpu_drm.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

namespace vramflow {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kIbSlots = 16;        // copies in flight per ring
constexpr uint32_t kIbSlotBytes = 4096;  // up to 146 packets (292 MiB) per copy
constexpr uint64_t kIbWaitNs = 30ull * 1000 * 1000 * 1000;

Status DrmError(const std::string& what, int r) { return Status::FromErrno(what, r < 0 ? -r : r); }

uint64_t PageRound(uint64_t n) { return (n + kPage - 1) / kPage * kPage; }

}  // namespace

Result<std::unique_ptr<AmdgpuDevice>> AmdgpuDevice::Open(const std::string& render_node) {
  std::unique_ptr<AmdgpuDevice> device(new AmdgpuDevice());
  VF_RETURN_IF_ERROR(device->Init(render_node));
  return device;
}

Status AmdgpuDevice::Init(const std::string& render_node) {
  render_node_ = render_node;
  fd_.Reset(::open(render_node.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd_.valid()) return Status::FromErrno("opening render node " + render_node, errno);
  uint32_t major = 0, minor = 0;
  int r = amdgpu_device_initialize(fd_.get(), &major, &minor, &device_);
  if (r) return DrmError("amdgpu_device_initialize on " + render_node + " (is it an AMD GPU?)", r);

  drm_amdgpu_info_hw_ip info{};
  r = amdgpu_query_hw_ip_info(device_, AMDGPU_HW_IP_DMA, 0, &info);
  if (r) return DrmError(Describe() + ": querying the SDMA engines", r);
  if (info.available_rings == 0) return Status::NotSupported(Describe() + " reports no SDMA rings");
  convention_ = CopyConventionForSdmaMajor(info.hw_ip_version_major);

  for (uint32_t bits = info.available_rings; bits; bits &= bits - 1) {
    auto ring = std::make_unique<Ring>();
    ring->hw_ring = static_cast<uint32_t>(std::countr_zero(bits));
    r = amdgpu_cs_ctx_create(device_, &ring->context);
    if (r) return DrmError(Describe() + ": creating a context for SDMA ring " + std::to_string(ring->hw_ring), r);
    amdgpu_bo_alloc_request request{};
    request.alloc_size = uint64_t{kIbSlots} * kIbSlotBytes;
    request.phys_alignment = kPage;
    request.preferred_heap = AMDGPU_GEM_DOMAIN_GTT;
    amdgpu_bo_handle ib = nullptr;
    r = amdgpu_bo_alloc(device_, &request, &ib);
    if (r) return DrmError(Describe() + ": allocating the IB buffer", r);
    Result<MappedBo> mapped = MapBo(ib, request.alloc_size);
    if (!mapped.ok()) {
      amdgpu_bo_free(ib);
      return mapped.status();
    }
    ring->ib = *mapped;
    void* cpu = nullptr;
    r = amdgpu_bo_cpu_map(ib, &cpu);
    if (r) return DrmError(Describe() + ": mapping the IB buffer", r);
    ring->ib_cpu = static_cast<uint32_t*>(cpu);
    ring->slot_fence.assign(kIbSlots, 0);
    rings_.push_back(std::move(ring));
  }
  return Status::Ok();
}

AmdgpuDevice::~AmdgpuDevice() {
  for (auto& ring : rings_) {
    // Let in-flight copies finish before their IBs and BOs go away.
    for (uint64_t seq : ring->slot_fence)
      if (seq) (void)WaitSequence(*ring, seq, kIbWaitNs);
    if (ring->ib_cpu) amdgpu_bo_cpu_unmap(ring->ib.bo);
    if (ring->ib.bo) UnmapBo(ring->ib);
    if (ring->context) amdgpu_cs_ctx_free(ring->context);
  }
  for (auto& [handle, bo] : bos_) UnmapBo(bo);
  if (device_) amdgpu_device_deinitialize(device_);
}

Result<AmdgpuDevice::MappedBo> AmdgpuDevice::MapBo(amdgpu_bo_handle bo, uint64_t size) {
  MappedBo m;
  m.bo = bo;
  m.size = size;
  m.mapped_size = PageRound(size);
  int r = amdgpu_va_range_alloc(device_, amdgpu_gpu_va_range_general, m.mapped_size, kPage, 0, &m.va, &m.va_handle, 0);
  if (r) return DrmError(Describe() + ": allocating " + std::to_string(m.mapped_size) + " bytes of GPU VA", r);
  r = amdgpu_bo_va_op(bo, 0, m.mapped_size, m.va, 0, AMDGPU_VA_OP_MAP);
  if (r) {
    amdgpu_va_range_free(m.va_handle);
    return DrmError(Describe() + ": mapping a BO into the GPU VA space", r);
  }
  return m;
}

void AmdgpuDevice::UnmapBo(MappedBo& m) {
  if (m.va_handle) {
    amdgpu_bo_va_op(m.bo, 0, m.mapped_size, m.va, 0, AMDGPU_VA_OP_UNMAP);
    amdgpu_va_range_free(m.va_handle);
  }
  if (m.bo) amdgpu_bo_free(m.bo);
  m = MappedBo{};
}

Result<uint32_t> AmdgpuDevice::ImportBo(int dmabuf_fd, uint64_t size) {
  amdgpu_bo_import_result imported{};
  int r = amdgpu_bo_import(device_, amdgpu_bo_handle_type_dma_buf_fd, static_cast<uint32_t>(dmabuf_fd), &imported);
  if (r) return DrmError(Describe() + ": importing dma-buf fd " + std::to_string(dmabuf_fd), r);
  if (imported.alloc_size < size) {
    amdgpu_bo_free(imported.buf_handle);
    return Status::InvalidArgument(Describe() + ": dma-buf of " + std::to_string(imported.alloc_size) +
                                   " bytes is smaller than the expected " + std::to_string(size));
  }
  return AddBo(imported.buf_handle, size);
}

Result<uint32_t> AmdgpuDevice::AddBo(amdgpu_bo_handle bo, uint64_t size) {
  Result<MappedBo> mapped = MapBo(bo, size);
  if (!mapped.ok()) {
    amdgpu_bo_free(bo);
    return mapped.status();
  }
  std::lock_guard<std::mutex> lock(tables_mu_);
  uint32_t handle = next_handle_++;
  bos_[handle] = *mapped;
  return handle;
}

Result<uint32_t> AmdgpuDevice::RegisterStaging(uint8_t* data, size_t size) {
  if (reinterpret_cast<uintptr_t>(data) % kPage)
    return Status::InvalidArgument(Describe() + ": staging buffers must be page aligned");
  amdgpu_bo_handle bo = nullptr;
  int r = amdgpu_create_bo_from_user_mem(device_, data, PageRound(size), &bo);
  if (r) return DrmError(Describe() + ": registering " + std::to_string(size) + " bytes of host memory (userptr)", r);
  return AddBo(bo, size);
}

Status AmdgpuDevice::ReleaseBo(uint32_t handle) {
  MappedBo bo;
  {
    std::lock_guard<std::mutex> lock(tables_mu_);
    auto it = bos_.find(handle);
    if (it == bos_.end()) return Status::InvalidArgument(Describe() + ": no BO " + std::to_string(handle));
    bo = it->second;
    bos_.erase(it);
  }
  UnmapBo(bo);
  return Status::Ok();
}

Status AmdgpuDevice::UnregisterStaging(uint32_t staging) { return ReleaseBo(staging); }

Status AmdgpuDevice::WaitSequence(Ring& ring, uint64_t sequence, uint64_t timeout_ns) {
  amdgpu_cs_fence fence{};
  fence.context = ring.context;
  fence.ip_type = AMDGPU_HW_IP_DMA;
  fence.ip_instance = 0;
  fence.ring = ring.hw_ring;
  fence.fence = sequence;
  uint32_t expired = 0;
  int r = amdgpu_cs_query_fence_status(&fence, timeout_ns, 0, &expired);
  if (r) return DrmError(Describe() + ": waiting for SDMA ring " + std::to_string(ring.hw_ring), r);
  if (!expired)
    return Status::TimedOut(Describe() + ": SDMA fence " + std::to_string(sequence) + " on ring " +
                            std::to_string(ring.hw_ring) + " did not signal within " +
                            std::to_string(timeout_ns / 1000000) + " ms");
  return Status::Ok();
}

Result<DmaFence> AmdgpuDevice::SubmitCopy(uint32_t ring_index, DmaDirection direction, uint32_t bo, uint64_t bo_offset,
                                          uint32_t staging, size_t staging_offset, size_t size) {
  if (ring_index >= rings_.size())
    return Status::InvalidArgument(Describe() + ": no ring " + std::to_string(ring_index));
  uint64_t bo_va, staging_va;
  amdgpu_bo_handle bo_handle, staging_handle;
  {
    std::lock_guard<std::mutex> lock(tables_mu_);
    auto b = bos_.find(bo);
    auto s = bos_.find(staging);
    if (b == bos_.end() || s == bos_.end())
      return Status::InvalidArgument(Describe() + ": unknown BO or staging buffer");
    if (bo_offset > b->second.size || size > b->second.size - bo_offset || staging_offset > s->second.size ||
        size > s->second.size - staging_offset)
      return Status::InvalidArgument(Describe() + ": copy outside its BO or staging buffer");
    bo_va = b->second.va + bo_offset;
    staging_va = s->second.va + staging_offset;
    bo_handle = b->second.bo;
    staging_handle = s->second.bo;
  }
  const bool to_host = direction == DmaDirection::kDeviceToHost;
  uint64_t src = to_host ? bo_va : staging_va;
  uint64_t dst = to_host ? staging_va : bo_va;
  std::vector<uint32_t> ib;
  VF_RETURN_IF_ERROR(BuildCopyIb(src, dst, size, convention_, &ib));
  if (ib.size() * 4 > kIbSlotBytes) return Status::InvalidArgument(Describe() + ": copy too large for one IB");

  Ring& ring = *rings_[ring_index];
  std::lock_guard<std::mutex> lock(ring.mu);
  uint32_t slot = ring.next_slot;
  ring.next_slot = (ring.next_slot + 1) % kIbSlots;
  if (ring.slot_fence[slot]) VF_RETURN_IF_ERROR(WaitSequence(ring, ring.slot_fence[slot], kIbWaitNs));
  std::memcpy(reinterpret_cast<uint8_t*>(ring.ib_cpu) + uint64_t{slot} * kIbSlotBytes, ib.data(), ib.size() * 4);

  std::vector<amdgpu_bo_handle> listed =
      CopySubmissionBos(ring.ib.bo, to_host ? bo_handle : staging_handle, to_host ? staging_handle : bo_handle);
  amdgpu_bo_list_handle bo_list = nullptr;
  int r = amdgpu_bo_list_create(device_, static_cast<uint32_t>(listed.size()), listed.data(), nullptr, &bo_list);
  if (r) return DrmError(Describe() + ": building the BO list of a copy on ring " + std::to_string(ring.hw_ring), r);

  amdgpu_cs_ib_info ib_info{};
  ib_info.ib_mc_address = ring.ib.va + uint64_t{slot} * kIbSlotBytes;
  ib_info.size = static_cast<uint32_t>(ib.size());
  amdgpu_cs_request request{};
  request.ip_type = AMDGPU_HW_IP_DMA;
  request.ip_instance = 0;
  request.ring = ring.hw_ring;
  request.resources = bo_list;
  request.number_of_ibs = 1;
  request.ibs = &ib_info;
  r = amdgpu_cs_submit(ring.context, 0, &request, 1);
  // The kernel resolves the list while it takes the submission; the job
  // holds its own references to the BOs from then on.
  amdgpu_bo_list_destroy(bo_list);
  if (r) return DrmError(Describe() + ": submitting an SDMA copy on ring " + std::to_string(ring.hw_ring), r);
  ring.slot_fence[slot] = request.seq_no;
  return DmaFence{ring_index, request.seq_no};
}

Status AmdgpuDevice::WaitFence(const DmaFence& fence, std::chrono::milliseconds timeout) {
  if (fence.ring >= rings_.size())
    return Status::InvalidArgument(Describe() + ": no ring " + std::to_string(fence.ring));
  Ring& ring = *rings_[fence.ring];
  return WaitSequence(ring, fence.sequence, static_cast<uint64_t>(timeout.count()) * 1000000);
}

std::vector<std::string> FindAmdgpuRenderNodes(const std::string& sysfs_root) {
  std::vector<std::string> nodes;
  std::string dir = sysfs_root + "/class/drm";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return nodes;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("renderD", 0) != 0) continue;
    char target[512];
    ssize_t n = ::readlink((dir + "/" + name + "/device/driver").c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    std::string driver = target;
    if (driver.size() >= 7 && driver.compare(driver.size() - 7, 7, "/amdgpu") == 0) nodes.push_back("/dev/dri/" + name);
  }
  ::closedir(d);
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace vramflow
