// SPDX-License-Identifier: MIT
// In-memory sink and source, for tests and for small metadata.
#pragma once

#include <vector>

#include "transport/core/byte_stream.h"
#include "transport/core/random_access.h"

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
  explicit MemorySource(std::span<const uint8_t> data, size_t max_read = SIZE_MAX) : data_(data), max_read_(max_read) {}
  Result<size_t> Read(std::span<uint8_t> out) override;
  std::string Describe() const override { return "memory"; }

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  size_t max_read_;
};

// A stream held in memory, read at any offset (a seek index, a sub-stream).
// Owns its bytes; ReadAt() only reads them, so it is thread-safe. Wrap it in
// a CountingRandomAccess to see what a reader fetched.
class MemoryRandomAccess final : public RandomAccessSource {
 public:
  explicit MemoryRandomAccess(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  uint64_t Size() const override { return bytes_.size(); }
  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> data) override;
  std::string Describe() const override { return "memory"; }

 private:
  const std::vector<uint8_t> bytes_;
};

}  // namespace vramflow
