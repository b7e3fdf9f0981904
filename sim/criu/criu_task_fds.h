// SPDX-License-Identifier: MIT
// TaskFdRestore: how CRIU 4.2 restores one task's fd table (criu/files.c:
// close_old_fds, open_fdinfos, open_fd, setup_and_serve_out,
// find_unused_fd; criu/servicefd.c; criu/util.c: reopen_fd_as), for the
// tasks vramflow-criu-host restores, so the plugin's RESTORE_EXT_FILE meets
// the fd table it meets in a real CRIU:
//
//   service fds   CRIU's own fds in the task (its log, the images directory,
//                 the image streamer's connection, ...) move to the top of
//                 the fd table, past every fd the task will have; every
//                 other fd the task inherited is closed.
//   restore       the task's fds, in ascending order: each file is opened
//                 (an external one through RESTORE_EXT_FILE, which may ask
//                 to be tried again), then moved to its dumped number with
//                 fcntl(F_DUPFD, N) and the opened fd closed. A number that
//                 is taken by then fails the restore: "fd N already in use".
//                 Files that asked to be retried are tried again while any
//                 file makes progress.
//   find_unused_fd_pid  what CRIU exports to plugins: searching down from
//                 the service fds, the lowest number above the task's fds
//                 still to be restored, where a plugin keeps its own fds.
//
// Thread safety: none; one per restored task, used by its one thread.
#pragma once

#include <functional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace vramflow {

// One fd of a checkpointed task (CRIU's fdinfo entry and its file).
struct TaskFd {
  enum class Kind {
    kExt,      // a file of the plugin's: CRIU file id `ext_id`, restored by RESTORE_EXT_FILE
    kFile,     // a regular file at `path` (opened read-write, created if missing)
    kInherit,  // the restore process's fd `inherited` (as CRIU's --inherit-fd; the task's stdio)
  };
  int fd = -1;
  Kind kind = Kind::kFile;
  int ext_id = 0;
  std::string path;
  int inherited = -1;
};

// RESTORE_EXT_FILE's answer: the fd to install, or a request to be retried.
struct ExtFileOpen {
  int fd = -1;
  bool retry = false;
};
using ExtFileOpener = std::function<Result<ExtFileOpen>(int ext_id)>;

class TaskFdRestore {
 public:
  explicit TaskFdRestore(std::vector<TaskFd> fds);

  // CRIU's service fds and close_old_fds: each fd in `service` (of the
  // restore process, which the task goes on using) and each inherited file
  // moves to a number above every fd of the table, the ints are updated;
  // every other fd of this process is closed.
  Status MoveServiceFdsAndCloseTheRest(std::span<int* const> service);

  // CRIU's open_fdinfos: restores every fd of the table at its number.
  Status Restore(const ExtFileOpener& open_ext);

  // CRIU's find_unused_fd(task, -1): walking down from just below the
  // service fds over the fds still to be restored, the number above the
  // first one with a free number above it; -1 when none is left to restore
  // (CRIU would BUG()).
  int FindUnusedFd() const;

 private:
  Result<int> Open(const TaskFd& entry, const ExtFileOpener& open_ext, bool* retry);
  Status Install(const TaskFd& entry, int opened);

  std::vector<TaskFd> fds_;  // ascending fd numbers
  std::set<int> pending_;    // fds not yet restored
  int service_min_ = 0;      // the lowest service fd; 0 until they are moved
};

}  // namespace vramflow
