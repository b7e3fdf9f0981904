// In-memory sink and source, for tests and for small metadata.
#pragma once

#include <vector>

#include "transport/byte_stream.h"

namespace vramflow {

class MemorySink final : public ByteSink {
 public:
  Status Write(std::span<const uint8_t> data) override {
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    return Status::Ok();
  }
  Status Commit() override {
    committed_ = true;
    return Status::Ok();
  }
  std::string Describe() const override { return "memory"; }

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t>& mutable_bytes() { return bytes_; }
  bool committed() const { return committed_; }

 private:
  std::vector<uint8_t> bytes_;
  bool committed_ = false;
};

// Reads from a caller-owned span that must outlive the source. `max_read`
// caps each Read() so tests can exercise short reads.
class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::span<const uint8_t> data, size_t max_read = SIZE_MAX)
      : data_(data), max_read_(max_read) {}
  Result<size_t> Read(std::span<uint8_t> out) override;
  std::string Describe() const override { return "memory"; }

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  size_t max_read_;
};

}  // namespace vramflow
