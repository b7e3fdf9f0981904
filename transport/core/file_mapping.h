// SPDX-License-Identifier: MIT
// FileMapping: a read-only shared mapping of a whole regular file, so that
// a restore decodes payloads where the page cache holds them instead of
// copying each into a buffer first (on a stream in /dev/shm, the copy and
// its page-cache bookkeeping took about a sixth of the restore's CPU).
//
// Only files that no one but their owner may write, and whose owner is this
// user or root, are mapped: anyone else allowed to write could change a
// payload's bytes while a decoder reads them, between a check and a use,
// which a copy rules out. The owner and root could do worse to this process
// already. A file cut short by its owner while mapped ends the process with
// SIGBUS where read() would have reported a truncated stream; a stream
// vramflow writes is complete before it gets its name (a temporary file is
// renamed on commit), so only a file changed in place meets that.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace vramflow {

class FileMapping {
 public:
  // Maps the file `fd` is open on, at its current size; std::nullopt when it
  // is not a file to map (above), is empty, or mmap fails: read it instead.
  static std::optional<FileMapping> Map(int fd);
  ~FileMapping();
  FileMapping(FileMapping&& other) noexcept;
  FileMapping& operator=(FileMapping&& other) noexcept;
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Unmaps this process's view of the pages wholly before `offset` (the page
  // cache keeps them), in steps of at least kDropStep bytes: the mapped
  // part of a long stream then stays near what is in use, not its size.
  // The step bounds what the mapping adds to the process's RSS (mapped
  // page-cache pages count there); the unmapping costs the same per page
  // whatever the step. The bytes before `offset` must not be read again.
  void DropBefore(uint64_t offset);
  static constexpr uint64_t kDropStep = uint64_t{4} << 20;

 private:
  FileMapping(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint64_t dropped_ = 0;  // bytes from the start no longer mapped
};

// Whether a file with this owner and mode may be mapped (see above): owned
// by `euid` or root, and writable by no group or other.
bool OnlyOwnerMayWrite(uint32_t owner, uint32_t mode, uint32_t euid);

}  // namespace vramflow
