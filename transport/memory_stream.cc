#include "transport/memory_stream.h"

#include <algorithm>
#include <cstring>

namespace vramflow {

Result<size_t> MemorySource::Read(std::span<uint8_t> out) {
  size_t n = std::min({out.size(), data_.size() - pos_, max_read_});
  if (n) std::memcpy(out.data(), data_.data() + pos_, n);
  pos_ += n;
  return n;
}

}  // namespace vramflow
