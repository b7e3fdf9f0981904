// SPDX-License-Identifier: MIT
#include "transport/core/memory_stream.h"

#include <algorithm>
#include <cstring>

namespace vramflow {

Result<size_t> MemorySource::Read(std::span<uint8_t> out) {
  size_t n = std::min({out.size(), data_.size() - pos_, max_read_});
  if (n) std::memcpy(out.data(), data_.data() + pos_, n);
  pos_ += n;
  return n;
}

Result<size_t> MemoryRandomAccess::ReadAt(uint64_t offset, std::span<uint8_t> data) {
  if (offset >= bytes_.size()) return size_t{0};
  size_t n = std::min<uint64_t>(data.size(), bytes_.size() - offset);
  std::memcpy(data.data(), bytes_.data() + offset, n);
  return n;
}

}  // namespace vramflow
