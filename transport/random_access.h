// RandomAccessSource: a stored stream read at any offset, for readers that
// seek (a seek index, parallel restore of one object). Unlike ByteSource,
// ReadAt() is safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace vramflow {

class RandomAccessSource {
 public:
  virtual ~RandomAccessSource() = default;
  // Total bytes.
  virtual uint64_t Size() const = 0;
  // Reads data.size() bytes at `offset`; fewer only where the stream ends
  // first (returns how many). Thread-safe.
  virtual Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> data) = 0;
  virtual std::string Describe() const = 0;
};

}  // namespace vramflow
