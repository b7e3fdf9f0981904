// SPDX-License-Identifier: MIT
#include "transport/core/file_mapping.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace vramflow {

bool OnlyOwnerMayWrite(uint32_t owner, uint32_t mode, uint32_t euid) {
  return (owner == euid || owner == 0) && (mode & (S_IWGRP | S_IWOTH)) == 0;
}

std::optional<FileMapping> FileMapping::Map(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return std::nullopt;
  if (!OnlyOwnerMayWrite(st.st_uid, st.st_mode, ::geteuid())) return std::nullopt;
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return std::nullopt;
  // Read once, front to back: more readahead, and pages read through the
  // mapping are not promoted as if in use.
  (void)::madvise(p, size, MADV_SEQUENTIAL);
  return FileMapping(static_cast<const uint8_t*>(p), size);
}

FileMapping::~FileMapping() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

FileMapping::FileMapping(FileMapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      dropped_(std::exchange(other.dropped_, 0)) {}

FileMapping& FileMapping::operator=(FileMapping&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    dropped_ = std::exchange(other.dropped_, 0);
  }
  return *this;
}

void FileMapping::DropBefore(uint64_t offset) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t end = std::min<uint64_t>(offset, size_) / page * page;
  if (end < dropped_ + kDropStep) return;
  // MADV_DONTNEED on a shared file mapping only unmaps: the data stays in
  // the file and the page cache.
  (void)::madvise(const_cast<uint8_t*>(data_) + dropped_, end - dropped_, MADV_DONTNEED);
  dropped_ = end;
}

}  // namespace vramflow
