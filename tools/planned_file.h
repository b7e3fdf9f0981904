// SPDX-License-Identifier: MIT
// PlannedFile: an input file as `pack` found it when it planned the stream
// (its path, and the device and inode it names), so that the file can be
// closed and opened again by path when it is read, and a different file
// that has taken its name since is refused instead of packed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

struct PlannedFile {
  std::string path;
  dev_t device = 0;
  ino_t inode = 0;
};

// Opens `planned.path` read-only again. Fails, naming the path, if it cannot
// be opened or is no longer the planned file (replaced, or renamed over).
Result<UniqueFd> ReopenPlannedFile(const PlannedFile& planned);

// Checks, after the file was read, that `planned.path` is still the planned
// file and `size` bytes long (it did not grow, shrink or get replaced while
// it was packed).
Status CheckPlannedFileUnchanged(const PlannedFile& planned, uint64_t size);

}  // namespace vramflow
