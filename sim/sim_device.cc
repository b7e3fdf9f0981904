#include "sim/sim_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace vramflow {

Result<UniqueFd> CreateSimBo(const std::string& name, uint64_t size) {
  UniqueFd fd(::memfd_create(("vramflow-bo-" + name).c_str(), MFD_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("memfd_create for simulated BO '" + name + "'", errno);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    return Status::FromErrno("sizing simulated BO '" + name + "'", errno);
  return fd;
}

Result<BoMapping> BoMapping::Map(int fd, uint64_t size) {
  BoMapping m;
  m.size_ = size;
  if (size == 0) return m;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
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

SimDevice::SimDevice(std::string name, SimDeviceOptions options) : name_(std::move(name)), options_(options) {
  uint32_t rings = std::max<uint32_t>(1, options_.rings);
  for (uint32_t i = 0; i < rings; ++i) rings_.push_back(std::make_unique<Ring>());
  for (auto& ring : rings_) ring->worker = std::thread([this, r = ring.get()] { RunRing(*r); });
}

SimDevice::~SimDevice() {
  {
    std::lock_guard<std::mutex> lock(tables_mu_);
    stopping_ = true;
  }
  for (auto& ring : rings_) {
    {
      std::lock_guard<std::mutex> lock(ring->mu);
      ring->stalled = true;  // tells the worker to leave
    }
    ring->cv.notify_all();
    ring->worker.join();
  }
}

void SimDevice::RunRing(Ring& ring) {
  const auto start = std::chrono::steady_clock::now();
  double busy_until = 0;  // seconds since start, for the bandwidth model
  for (;;) {
    Copy copy;
    {
      std::unique_lock<std::mutex> lock(ring.mu);
      ring.cv.wait(lock, [&] { return ring.stalled || !ring.queue.empty(); });
      if (ring.stalled) return;
      copy = ring.queue.front();
      ring.queue.pop_front();
      if (copy.stall) {  // the engine hangs: nothing after this completes
        ring.stalled = true;
        return;
      }
    }
    if (!copy.fail) {
      if (copy.direction == DmaDirection::kDeviceToHost) std::memcpy(copy.staging, copy.bo, copy.size);
      else std::memcpy(copy.bo, copy.staging, copy.size);
    }
    if (options_.bytes_per_second > 0 || options_.latency.count() > 0) {
      double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double cost = std::chrono::duration<double>(options_.latency).count() +
                    (options_.bytes_per_second > 0 ? copy.size / options_.bytes_per_second : 0);
      busy_until = std::max(busy_until, now) + cost;
      if (busy_until > now) std::this_thread::sleep_for(std::chrono::duration<double>(busy_until - now));
    }
    {
      std::lock_guard<std::mutex> lock(ring.mu);
      ring.completed = copy.sequence;
      if (copy.fail) ring.errors[copy.sequence] = "injected copy failure";
    }
    ring.cv.notify_all();
  }
}

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

Result<uint32_t> SimDevice::RegisterStaging(uint8_t* data, size_t size) {
  std::lock_guard<std::mutex> lock(tables_mu_);
  uint32_t handle = next_handle_++;
  staging_[handle] = {data, size};
  return handle;
}

Status SimDevice::UnregisterStaging(uint32_t staging) {
  std::lock_guard<std::mutex> lock(tables_mu_);
  if (!staging_.erase(staging)) return Status::InvalidArgument(Describe() + ": no staging buffer " + std::to_string(staging));
  return Status::Ok();
}

Result<DmaFence> SimDevice::SubmitCopy(uint32_t ring_index, DmaDirection direction, uint32_t bo, uint64_t bo_offset,
                                       uint32_t staging, size_t staging_offset, size_t size) {
  Copy copy{};
  copy.direction = direction;
  copy.size = size;
  {
    std::lock_guard<std::mutex> lock(tables_mu_);
    if (ring_index >= rings_.size()) return Status::InvalidArgument(Describe() + ": no ring " + std::to_string(ring_index));
    auto b = bos_.find(bo);
    auto s = staging_.find(staging);
    if (b == bos_.end()) return Status::InvalidArgument(Describe() + ": no BO " + std::to_string(bo));
    if (s == staging_.end()) return Status::InvalidArgument(Describe() + ": no staging buffer " + std::to_string(staging));
    if (bo_offset > b->second.size() || size > b->second.size() - bo_offset)
      return Status::InvalidArgument(Describe() + ": copy [" + std::to_string(bo_offset) + ", +" + std::to_string(size) +
                                     ") outside a BO of " + std::to_string(b->second.size()) + " bytes");
    if (staging_offset > s->second.second || size > s->second.second - staging_offset)
      return Status::InvalidArgument(Describe() + ": copy outside its staging buffer");
    copy.bo = b->second.data() + bo_offset;
    copy.staging = s->second.first + staging_offset;
    int64_t n = static_cast<int64_t>(copies_++);
    copy.fail = n == options_.fail_copy_at;
    copy.stall = n == options_.stall_copy_at;
  }
  Ring& ring = *rings_[ring_index];
  DmaFence fence;
  fence.ring = ring_index;
  {
    std::lock_guard<std::mutex> lock(ring.mu);
    copy.sequence = fence.sequence = ring.next_sequence++;
    ring.queue.push_back(copy);
  }
  ring.cv.notify_all();
  return fence;
}

Status SimDevice::WaitFence(const DmaFence& fence, std::chrono::milliseconds timeout) {
  if (fence.ring >= rings_.size()) return Status::InvalidArgument(Describe() + ": no ring " + std::to_string(fence.ring));
  Ring& ring = *rings_[fence.ring];
  std::unique_lock<std::mutex> lock(ring.mu);
  if (!ring.cv.wait_for(lock, timeout, [&] { return ring.completed >= fence.sequence; }))
    return Status::TimedOut(Describe() + ": DMA fence " + std::to_string(fence.sequence) + " on ring " +
                           std::to_string(fence.ring) + " did not signal within " + std::to_string(timeout.count()) +
                           " ms");
  auto error = ring.errors.find(fence.sequence);
  if (error != ring.errors.end()) {
    std::string what = error->second;
    ring.errors.erase(error);
    return Status::IoError(Describe() + ": DMA copy " + std::to_string(fence.sequence) + " on ring " +
                           std::to_string(fence.ring) + " failed: " + what);
  }
  return Status::Ok();
}

uint64_t SimDevice::copies_submitted() const {
  std::lock_guard<std::mutex> lock(tables_mu_);
  return copies_;
}

}  // namespace vramflow
