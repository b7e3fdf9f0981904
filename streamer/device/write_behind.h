// SPDX-License-Identifier: MIT
// WriteBehind: keeps the files a FileDevice writes (unpack's outputs, the
// pages files of criu export-upstream) from filling the page cache and a
// container's memory cgroup, as WritebackWindow (transport/core/writeback_window.h)
// does for a file sink, but for writes that land at any offset, in any
// order, from several ring threads at once (a restore writes chunks out of
// order).
//
// Each range is handed over once it is completely written: its writeback is
// started (sync_file_range WRITE, which does not wait) and it joins a
// queue. Past `window` queued bytes (or kMaxRanges ranges), the oldest
// ranges are waited for and dropped from the cache (posix_fadvise
// DONTNEED). So about `window` bytes of what was written stay cached,
// whatever the files' sizes, and the disk is kept busy with the ranges
// written since. Ranges are never waited for before their writeback had a
// window's worth of writes to run behind. Best effort: a file system that
// supports neither (or tmpfs) is written as before. A queued range holds
// its file open, so at most kMaxRanges files more are open. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "common/unique_fd.h"
#include "transport/core/writeback_window.h"

namespace vramflow {

class WriteBehind {
 public:
  static constexpr uint64_t kDefaultWindow = 2 * kDefaultWritebackWindow;
  static constexpr size_t kMaxRanges = 16;

  explicit WriteBehind(uint64_t window = kDefaultWindow) : window_(window) {}
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  // Bytes [offset, offset + size) of `file` were written (and are final).
  void Wrote(std::shared_ptr<const UniqueFd> file, uint64_t offset, uint64_t size);

 private:
  struct Written {
    std::shared_ptr<const UniqueFd> file;
    uint64_t offset;
    uint64_t size;
  };
  // Waits for `range` to reach the disk, then drops it from the cache.
  static void Drop(const Written& range);

  const uint64_t window_;
  std::mutex mu_;
  std::deque<Written> queue_;  // guarded by mu_; writeback started, oldest first
  uint64_t queued_ = 0;        // guarded by mu_; bytes in queue_
};

}  // namespace vramflow
