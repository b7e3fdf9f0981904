// SPDX-License-Identifier: MIT
#include "transport/core/writeback_window.h"

#include <fcntl.h>

namespace vramflow {

void WritebackWindow::Wrote(int fd, uint64_t bytes) {
  written_ += bytes;
  while (written_ - started_ >= window_) {
    (void)::sync_file_range(fd, static_cast<off64_t>(started_), static_cast<off64_t>(window_), SYNC_FILE_RANGE_WRITE);
    started_ += window_;
    if (started_ - dropped_ > window_) {
      // The window before the one just started: wait for it, then drop it.
      (void)::sync_file_range(fd, static_cast<off64_t>(dropped_), static_cast<off64_t>(window_),
                              SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      (void)::posix_fadvise(fd, static_cast<off_t>(dropped_), static_cast<off_t>(window_), POSIX_FADV_DONTNEED);
      dropped_ += window_;
    }
  }
}

}  // namespace vramflow
