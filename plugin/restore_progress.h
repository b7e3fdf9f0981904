// SPDX-License-Identifier: MIT
// RestoreProgress: how far the restored tasks are with their KFD files, as
// the main CRIU process sees it.
//
// CRIU ignores what RESUME_DEVICES_LATE returns and resumes the tasks, but
// it honours a failing POST_FORKING (it kills the tree and `criu restore`
// fails). So with parallel restore the main process waits in POST_FORKING
// until every KFD file of the dump (the dump's KFD file list,
// plugin/kfd_file_list.h) is done in its task: its BOs filled there, or
// handed to the main process's worker, which must then have filled them.
// The tasks report through one shared anonymous page the main process maps
// at plugin init, before CRIU forks them, so every task shares it; this
// works whichever way a task restores, also when it cannot reach the main
// process's socket (another network namespace) and fills its BOs itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/status.h"

namespace vramflow {

class RestoreProgress {
 public:
  // In the main CRIU process, before the tasks fork.
  static Result<std::unique_ptr<RestoreProgress>> Create();
  ~RestoreProgress();
  RestoreProgress(const RestoreProgress&) = delete;
  RestoreProgress& operator=(const RestoreProgress&) = delete;

  // In a task: one KFD file is done (BOs filled, or handed over and
  // acknowledged), or restoring a file of ours failed.
  void FileDone();
  void FileFailed();

  uint32_t done() const;
  uint32_t failed() const;

 private:
  struct Shared {
    std::atomic<uint32_t> done;
    std::atomic<uint32_t> failed;
  };
  static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared between processes, atomics must be lock-free");
  explicit RestoreProgress(Shared* shared) : shared_(shared) {}
  Shared* shared_;  // MAP_SHARED | MAP_ANONYMOUS, one page
};

}  // namespace vramflow
