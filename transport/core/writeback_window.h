// SPDX-License-Identifier: MIT
// WritebackWindow: keeps a large file that is being written from filling
// the page cache (and a container's memory cgroup, which is charged for it).
//
// Every `window` bytes appended, it starts writeback of that window
// (sync_file_range WRITE, which does not wait), waits for the window before
// it to reach the disk and drops those pages (posix_fadvise DONTNEED). So
// about two windows of the file stay in the cache however large it grows,
// and the disk is kept busy while the next window is written. Best effort:
// a file system that supports neither (or tmpfs, whose pages are the file)
// is written as before. Not thread-safe; one per file.
#pragma once

#include <cstdint>

namespace vramflow {

inline constexpr uint64_t kDefaultWritebackWindow = 8ull << 20;

class WritebackWindow {
 public:
  explicit WritebackWindow(uint64_t window = kDefaultWritebackWindow) : window_(window) {}

  // `bytes` more were appended to `fd` (written from offset 0 in order).
  void Wrote(int fd, uint64_t bytes);

 private:
  const uint64_t window_;
  uint64_t written_ = 0;  // bytes appended so far
  uint64_t started_ = 0;  // bytes whose writeback has been started
  uint64_t dropped_ = 0;  // bytes written back and dropped from the cache
};

}  // namespace vramflow
