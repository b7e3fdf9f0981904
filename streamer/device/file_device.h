// SPDX-License-Identifier: MIT
// FileDevice: files as a device, so `pack` and `unpack` ride the same dump
// and restore graphs as GPUs do. Each "BO" is a byte range of a file; a DMA
// copy is a pread or pwrite run on a ring thread.
//
// Open files are bounded, not one per BO: a range imported with ImportFile
// is opened (through its FileOpener) by the ring thread that runs a copy
// into or out of it, and kept in a cache of at most `cached_files` open
// files, least recently used closed first. So a device with thousands of
// files holds at most `cached_files` + `rings` of them open at once (one
// per copy running), and WriteBehind::kMaxRanges more (below), whatever the
// number of files. A range imported with
// ImportFileRange or ImportBo instead keeps a duplicate of the caller's fd
// until ReleaseBo (for callers with a few files that cannot be reopened by
// name).
//
// What the copies write is handed to a WriteBehind (write_behind.h) once
// written, so that files larger than the page cache's share of memory
// (unpack's outputs) keep only about a window of it cached; its queue holds
// at most WriteBehind::kMaxRanges more files open.
//
// Thread safety: every method may be called from any thread concurrently.
// Lifetime: openers run on ring threads until the device is destroyed.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "common/unique_fd.h"
#include "streamer/device/copy_rings.h"
#include "streamer/device/device.h"
#include "streamer/device/fd_cache.h"
#include "streamer/device/host_staging.h"
#include "streamer/device/write_behind.h"

namespace vramflow {

class FileDevice final : public Device {
 public:
  // A range whose end is not known yet (an output file still growing).
  static constexpr uint64_t kUnbounded = ~uint64_t{0};
  // Files kept open between copies, by default: enough for the objects a
  // stream interleaves (one per device of a dump), far below `ulimit -n`.
  static constexpr size_t kDefaultCachedFiles = 16;

  explicit FileDevice(std::string name = "files", uint32_t rings = 2, size_t cached_files = kDefaultCachedFiles);

  std::string Describe() const override { return "file device '" + name_ + "'"; }
  uint32_t RingCount() const override { return rings_.count(); }
  // The whole file from offset 0; `fd` is duplicated, the caller keeps its own.
  Result<uint32_t> ImportBo(int fd, uint64_t size) override;
  // Bytes [base, base + size) of the file (size may be kUnbounded); `fd` is
  // duplicated and the duplicate held until ReleaseBo.
  Result<uint32_t> ImportFileRange(int fd, uint64_t base, uint64_t size, std::string description);
  // Bytes [base, base + size) of the file that `open` opens, which is called
  // whenever a copy needs the file and the cache does not hold it; its error
  // (which should name the file) fails that copy. `description` names the
  // file in the device's own errors.
  Result<uint32_t> ImportFile(FileOpener open, uint64_t base, uint64_t size, std::string description);
  Status ReleaseBo(uint32_t bo) override;
  Result<uint32_t> RegisterStaging(uint8_t* data, size_t size) override;
  Status UnregisterStaging(uint32_t staging) override;
  Result<DmaFence> SubmitCopy(uint32_t ring, DmaDirection direction, uint32_t bo, uint64_t bo_offset, uint32_t staging,
                              size_t staging_offset, size_t size) override;
  Status WaitFence(const DmaFence& fence, std::chrono::milliseconds timeout) override {
    return rings_.Wait(fence, timeout);
  }
  // Files the cache holds open now (tests).
  size_t CachedFiles() const { return cache_.size(); }

 private:
  // Shared with the copies in flight, so ReleaseBo cannot pull it from under them.
  struct Range {
    FileOpener open;                         // ImportFile
    std::shared_ptr<const UniqueFd> pinned;  // ImportFileRange, ImportBo
    uint64_t base;
    uint64_t size;
    std::string description;
  };
  // The open file of `range` (handle `bo`), held for one copy.
  Result<std::shared_ptr<const UniqueFd>> Acquire(uint32_t bo, const Range& range);
  Result<uint32_t> Add(Range range);

  std::string name_;
  FdCache cache_;             // before rings_: the ring threads use it until they stop
  WriteBehind write_behind_;  // before rings_, as cache_
  CopyRings rings_;
  std::mutex mu_;
  std::map<uint32_t, std::shared_ptr<const Range>> ranges_;  // guarded by mu_
  HostStagingTable staging_;
  uint32_t next_handle_ = 1;  // guarded by mu_; never reused, so a stale cache entry is never mistaken
};

}  // namespace vramflow
