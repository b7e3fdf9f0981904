// SPDX-License-Identifier: MIT
// PrivateDirectory: a directory made by mkdtemp for one command's work
// (unpack's staging area, the streamer's spill and extract areas), removed
// with its contents when the object goes, or by the command's
// CleanupRegistry when a signal stops it first. Never by both at once: two
// walks of one tree each find entries the other has just removed.
#pragma once

#include <string>

#include "common/cleanup_registry.h"
#include "common/status.h"

namespace vramflow {

// Removes `path` and everything under it. An entry that is already gone
// (someone else removed it) is not an error; the walk is repeated while the
// path exists, a few times, for entries made during a walk. Best effort.
void RemoveTree(const std::string& path);

class PrivateDirectory {
 public:
  PrivateDirectory() = default;
  ~PrivateDirectory();
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;

  // Makes `prefix` + six random characters (prefix: a path, its last part
  // the start of the directory's name) and registers its removal with
  // `cleanup` (may be null) in the same step: an interrupt removes it, or it
  // was never made. kCancelled once the cleanup has begun.
  Status Create(const std::string& prefix, CleanupRegistry* cleanup);

  // Empty until Create() succeeded.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  CleanupRegistry* cleanup_ = nullptr;
  CleanupEntry entry_;
};

}  // namespace vramflow
