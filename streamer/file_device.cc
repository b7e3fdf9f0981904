#include "streamer/file_device.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace vramflow {

FileDevice::FileDevice(std::string name, uint32_t rings)
    : name_(std::move(name)), rings_("file device " + name_, rings), staging_("file device " + name_) {}

Result<uint32_t> FileDevice::ImportBo(int fd, uint64_t size) { return ImportFileRange(fd, 0, size, "fd " + std::to_string(fd)); }

Result<uint32_t> FileDevice::ImportFileRange(int fd, uint64_t base, uint64_t size, std::string description) {
  UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!own.valid()) return Status::FromErrno("duplicating the fd of " + description, errno);
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t handle = next_handle_++;
  ranges_.emplace(handle, Range{std::move(own), base, size, std::move(description)});
  return handle;
}

Status FileDevice::ReleaseBo(uint32_t bo) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ranges_.erase(bo)) return Status::InvalidArgument(Describe() + ": no file " + std::to_string(bo));
  return Status::Ok();
}

Result<uint32_t> FileDevice::RegisterStaging(uint8_t* data, size_t size) { return staging_.Register(data, size); }

Status FileDevice::UnregisterStaging(uint32_t staging) { return staging_.Unregister(staging); }

Result<DmaFence> FileDevice::SubmitCopy(uint32_t ring, DmaDirection direction, uint32_t bo, uint64_t bo_offset,
                                        uint32_t staging, size_t staging_offset, size_t size) {
  int fd;
  uint64_t position;
  std::string what;
  VF_ASSIGN_OR_RETURN(uint8_t* bytes, staging_.Range(staging, staging_offset, size));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto r = ranges_.find(bo);
    if (r == ranges_.end()) return Status::InvalidArgument(Describe() + ": no file " + std::to_string(bo));
    const Range& range = r->second;
    if (range.size != kUnbounded && (bo_offset > range.size || size > range.size - bo_offset))
      return Status::InvalidArgument(Describe() + ": copy past the end of " + range.description);
    fd = range.fd.get();
    position = range.base + bo_offset;
    what = range.description;
  }
  return rings_.Submit(ring, size, [=]() -> Status {
    size_t done = 0;
    while (done < size) {
      off_t at = static_cast<off_t>(position + done);
      ssize_t n = direction == DmaDirection::kDeviceToHost ? ::pread(fd, bytes + done, size - done, at)
                                                           : ::pwrite(fd, bytes + done, size - done, at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return Status::FromErrno((direction == DmaDirection::kDeviceToHost ? "reading " : "writing ") + what +
                                     " at offset " + std::to_string(position + done),
                                 errno);
      if (n == 0) return Status::Truncated(what + " ended at offset " + std::to_string(position + done) +
                                           " (did it shrink while being read?)");
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  });
}

}  // namespace vramflow
