// SPDX-License-Identifier: MIT
#include "streamer/device/write_behind.h"

#include <fcntl.h>

#include <vector>

namespace vramflow {

void WriteBehind::Wrote(std::shared_ptr<const UniqueFd> file, uint64_t offset, uint64_t size) {
  if (size == 0) return;
  (void)::sync_file_range(file->get(), static_cast<off64_t>(offset), static_cast<off64_t>(size), SYNC_FILE_RANGE_WRITE);
  std::vector<Written> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Written{std::move(file), offset, size});
    queued_ += size;
    while (queue_.size() > 1 && (queued_ > window_ || queue_.size() > kMaxRanges)) {
      queued_ -= queue_.front().size;
      due.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  for (const Written& range : due) Drop(range);  // outside the lock: other rings go on writing
}

void WriteBehind::Drop(const Written& range) {
  const int fd = range.file->get();
  (void)::sync_file_range(fd, static_cast<off64_t>(range.offset), static_cast<off64_t>(range.size),
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
  (void)::posix_fadvise(fd, static_cast<off_t>(range.offset), static_cast<off_t>(range.size), POSIX_FADV_DONTNEED);
}

}  // namespace vramflow
