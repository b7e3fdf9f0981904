// SPDX-License-Identifier: MIT
#include "tools/output_limit.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>

#include "common/units.h"

namespace vramflow {

OutputLimit::OutputLimit(uint64_t max_output, uint64_t free_bytes, std::string where)
    : max_output_(max_output), free_bytes_(free_bytes), where_(std::move(where)) {}

Result<uint64_t> OutputLimit::FreeBytes(int fd, const std::string& what) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno("stat " + what, errno);
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return kNone;
  struct statvfs fs;
  if (::fstatvfs(fd, &fs) != 0) return Status::FromErrno("statvfs " + what, errno);
  return static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize);
}

Status OutputLimit::Claim(uint64_t bytes, const std::string& what) {
  const uint64_t before = claimed_;
  const bool overflow = bytes > kNone - before;
  const uint64_t total = overflow ? kNone : before + bytes;
  const std::string sizes = what + " needs " + FormatSize(bytes) + " (" + std::to_string(bytes) + " bytes)" +
                            (before ? ", " + FormatSize(total) + " with the objects before it" : "");
  if (max_output_ != 0 && (overflow || total > max_output_))
    return Status::InvalidArgument(sizes + ": more than --max-output " + FormatSize(max_output_) +
                                   "; nothing of it was written");
  if (free_bytes_ != kNone && (overflow || total > free_bytes_))
    return Status::InvalidArgument(sizes + ": more than the " + FormatSize(free_bytes_) + " free in " + where_ +
                                   " (is the stream a decompression bomb? zero runs are declared, not stored); "
                                   "nothing of it was written");
  claimed_ = total;
  return Status::Ok();
}

}  // namespace vramflow
