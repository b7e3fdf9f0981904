// SPDX-License-Identifier: MIT
#include "streamer/device/file_device.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace vramflow {

FileDevice::FileDevice(std::string name, uint32_t rings, size_t cached_files)
    : name_(std::move(name)),
      cache_(cached_files),
      rings_("file device " + name_, rings),
      staging_("file device " + name_) {}

Result<uint32_t> FileDevice::ImportBo(int fd, uint64_t size) {
  return ImportFileRange(fd, 0, size, "fd " + std::to_string(fd));
}

Result<uint32_t> FileDevice::ImportFileRange(int fd, uint64_t base, uint64_t size, std::string description) {
  UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!own.valid()) return Status::FromErrno("duplicating the fd of " + description, errno);
  return Add(Range{{}, std::make_shared<const UniqueFd>(std::move(own)), base, size, std::move(description)});
}

Result<uint32_t> FileDevice::ImportFile(FileOpener open, uint64_t base, uint64_t size, std::string description) {
  if (!open) return Status::InvalidArgument(Describe() + ": no way to open " + description);
  return Add(Range{std::move(open), nullptr, base, size, std::move(description)});
}

Result<uint32_t> FileDevice::Add(Range range) {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t handle = next_handle_++;
  ranges_.emplace(handle, std::make_shared<const Range>(std::move(range)));
  return handle;
}

Status FileDevice::ReleaseBo(uint32_t bo) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ranges_.erase(bo)) return Status::InvalidArgument(Describe() + ": no file " + std::to_string(bo));
  }
  cache_.Drop(bo);
  return Status::Ok();
}

Result<uint32_t> FileDevice::RegisterStaging(uint8_t* data, size_t size) { return staging_.Register(data, size); }

Status FileDevice::UnregisterStaging(uint32_t staging) { return staging_.Unregister(staging); }

Result<std::shared_ptr<const UniqueFd>> FileDevice::Acquire(uint32_t bo, const Range& range) {
  if (range.pinned) return range.pinned;
  return cache_.Get(bo, range.open);
}

Result<DmaFence> FileDevice::SubmitCopy(uint32_t ring, DmaDirection direction, uint32_t bo, uint64_t bo_offset,
                                        uint32_t staging, size_t staging_offset, size_t size) {
  std::shared_ptr<const Range> range;
  VF_ASSIGN_OR_RETURN(uint8_t * bytes, staging_.Range(staging, staging_offset, size));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto r = ranges_.find(bo);
    if (r == ranges_.end()) return Status::InvalidArgument(Describe() + ": no file " + std::to_string(bo));
    range = r->second;
  }
  if (range->size != kUnbounded && (bo_offset > range->size || size > range->size - bo_offset))
    return Status::InvalidArgument(Describe() + ": copy past the end of " + range->description);
  const uint64_t position = range->base + bo_offset;
  // The file is opened (or found in the cache) only when the copy runs, and
  // held just as long, so queued copies hold no files.
  return rings_.Submit(ring, size, [this, range, bo, direction, bytes, position, size]() -> Status {
    VF_ASSIGN_OR_RETURN(std::shared_ptr<const UniqueFd> file, Acquire(bo, *range));
    const int fd = file->get();
    const std::string& what = range->description;
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
      if (n == 0)
        return Status::Truncated(what + " ended at offset " + std::to_string(position + done) +
                                 " (did it shrink while being read?)");
      done += static_cast<size_t>(n);
    }
    if (direction == DmaDirection::kHostToDevice) write_behind_.Wrote(std::move(file), position, size);
    return Status::Ok();
  });
}

}  // namespace vramflow
