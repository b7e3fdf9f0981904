// SPDX-License-Identifier: MIT
#include "tools/planned_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

namespace vramflow {
namespace {

bool SameFile(const PlannedFile& planned, const struct stat& st) {
  return st.st_dev == planned.device && st.st_ino == planned.inode;
}

Status Replaced(const PlannedFile& planned) {
  return Status::IoError("'" + planned.path + "' was replaced while being packed (another file has its name now)");
}

}  // namespace

Result<UniqueFd> ReopenPlannedFile(const PlannedFile& planned) {
  UniqueFd fd(::open(planned.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("opening '" + planned.path + "' again to read it", errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("stat '" + planned.path + "'", errno);
  if (!SameFile(planned, st)) return Replaced(planned);
  return fd;
}

Status CheckPlannedFileUnchanged(const PlannedFile& planned, uint64_t size) {
  struct stat st;
  if (::stat(planned.path.c_str(), &st) != 0)
    return Status::FromErrno("checking '" + planned.path + "' after packing it", errno);
  if (!SameFile(planned, st)) return Replaced(planned);
  if (static_cast<uint64_t>(st.st_size) != size)
    return Status::IoError("'" + planned.path + "' changed size while being packed");
  return Status::Ok();
}

}  // namespace vramflow
