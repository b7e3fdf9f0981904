// SPDX-License-Identifier: MIT
#include "sim/gpu/sim_device.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/streaming_copy.h"

namespace vramflow {

Result<UniqueFd> CreateSimBo(const std::string& name, uint64_t size) {
  UniqueFd fd(::memfd_create(("vramflow-bo-" + name).c_str(), MFD_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("memfd_create for simulated BO '" + name + "'", errno);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    return Status::FromErrno("sizing simulated BO '" + name + "'", errno);
  // VRAM exists before anyone copies into it: allocate the pages now, so
  // copies do not pay for page allocation (which a real GPU never does).
  if (size > 0 && ::fallocate(fd.get(), 0, 0, static_cast<off_t>(size)) != 0)
    return Status::FromErrno("allocating " + std::to_string(size) + " bytes for simulated BO '" + name + "'", errno);
  return fd;
}

Result<BoMapping> BoMapping::Map(int fd, uint64_t size) {
  BoMapping m;
  m.size_ = size;
  if (size == 0) return m;
  // Populated up front: a device's view of its memory takes no page faults.
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) return Status::FromErrno("mapping a BO of " + std::to_string(size) + " bytes", errno);
  m.data_ = static_cast<uint8_t*>(p);
  return m;
}

BoMapping::~BoMapping() {
  if (data_) ::munmap(data_, size_);
}

BoMapping::BoMapping(BoMapping&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

BoMapping& BoMapping::operator=(BoMapping&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SimDevice::SimDevice(std::string name, SimDeviceOptions options)
    : name_(std::move(name)),
      options_(options),
      rings_("sim " + name_, options.rings, options.bytes_per_second, options.latency, options.ring_cpus),
      staging_("sim " + name_) {}

SimDevice::~SimDevice() = default;

Result<uint32_t> SimDevice::ImportBo(int dmabuf_fd, uint64_t size) {
  VF_ASSIGN_OR_RETURN(BoMapping mapping, BoMapping::Map(dmabuf_fd, size));
  std::lock_guard<std::mutex> lock(tables_mu_);
  uint32_t handle = next_handle_++;
  bos_.emplace(handle, std::move(mapping));
  return handle;
}

Status SimDevice::ReleaseBo(uint32_t bo) {
  std::lock_guard<std::mutex> lock(tables_mu_);
  if (!bos_.erase(bo)) return Status::InvalidArgument(Describe() + ": no BO " + std::to_string(bo));
  return Status::Ok();
}

Result<uint32_t> SimDevice::RegisterStaging(uint8_t* data, size_t size) { return staging_.Register(data, size); }

Status SimDevice::UnregisterStaging(uint32_t staging) { return staging_.Unregister(staging); }

Result<DmaFence> SimDevice::SubmitCopy(uint32_t ring, DmaDirection direction, uint32_t bo, uint64_t bo_offset,
                                       uint32_t staging, size_t staging_offset, size_t size) {
  VF_ASSIGN_OR_RETURN(uint8_t * staging_bytes, staging_.Range(staging, staging_offset, size));
  uint8_t* bo_bytes;
  bool fail, stall;
  {
    std::lock_guard<std::mutex> lock(tables_mu_);
    auto b = bos_.find(bo);
    if (b == bos_.end()) return Status::InvalidArgument(Describe() + ": no BO " + std::to_string(bo));
    if (bo_offset > b->second.size() || size > b->second.size() - bo_offset)
      return Status::InvalidArgument(Describe() + ": copy [" + std::to_string(bo_offset) + ", +" +
                                     std::to_string(size) + ") outside a BO of " + std::to_string(b->second.size()) +
                                     " bytes");
    bo_bytes = b->second.data() + bo_offset;
    int64_t n = static_cast<int64_t>(copies_++);
    fail = n == options_.fail_copy_at;
    stall = n == options_.stall_copy_at;
  }
  return rings_.Submit(
      ring, size,
      [=]() -> Status {
        if (fail) return Status::IoError("injected copy failure");
        if (direction == DmaDirection::kDeviceToHost) std::memcpy(staging_bytes, bo_bytes, size);
        else CopyAroundCache(bo_bytes, staging_bytes, size);  // VRAM: not read back by the CPU
        return Status::Ok();
      },
      stall);
}

Status SimDevice::WaitFence(const DmaFence& fence, std::chrono::milliseconds timeout) {
  return rings_.Wait(fence, timeout);
}

uint64_t SimDevice::copies_submitted() const {
  std::lock_guard<std::mutex> lock(tables_mu_);
  return copies_;
}

}  // namespace vramflow
