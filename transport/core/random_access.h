// SPDX-License-Identifier: MIT
// RandomAccessSource: a stored stream read at any offset, for readers that
// seek (a seek index, parallel restore of one object). Unlike ByteSource,
// ReadAt() is safe to call from several threads at once.
//
// Implementations: files (file_random_access.h), S3 objects (s3_source.h),
// memory (memory_stream.h); OpenRandomAccess() (open_uri.h) picks one by URI.
// CountingRandomAccess counts what a reader fetched ("reads only the index").
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
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
  // As ReadAt, but may give up early (kCancelled) once `cancel` is set: a
  // reader that no longer wants the bytes need not wait for a slow request
  // and its retries. Sources that finish quickly anyway ignore it.
  virtual Result<size_t> ReadAtUnlessCancelled(uint64_t offset, std::span<uint8_t> data,
                                               const std::atomic<bool>& cancel) {
    return ReadAt(offset, data);
  }
  virtual std::string Describe() const = 0;
  // How many ReadAt calls a reader should keep in flight to use the source
  // well: 1 for a file or memory, where a read is a copy; more where each
  // read waits on a request (S3: its concurrency setting).
  virtual unsigned ConcurrentReads() const { return 1; }
};

// Reads exactly out.size() bytes at `offset`; Truncated, naming the source,
// where the stream ends first.
inline Status ReadExactly(RandomAccessSource& source, uint64_t offset, std::span<uint8_t> out) {
  VF_ASSIGN_OR_RETURN(size_t n, source.ReadAt(offset, out));
  if (n != out.size())
    return Status::Truncated(source.Describe() + ": " + std::to_string(out.size()) + " bytes at offset " +
                             std::to_string(offset) + " ran past the end");
  return Status::Ok();
}

// Forwards to another source and counts the bytes it returned. Thread-safe.
class CountingRandomAccess final : public RandomAccessSource {
 public:
  explicit CountingRandomAccess(std::shared_ptr<RandomAccessSource> inner) : inner_(std::move(inner)) {}
  uint64_t Size() const override { return inner_->Size(); }
  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> data) override {
    return Count(inner_->ReadAt(offset, data));
  }
  Result<size_t> ReadAtUnlessCancelled(uint64_t offset, std::span<uint8_t> data,
                                       const std::atomic<bool>& cancel) override {
    return Count(inner_->ReadAtUnlessCancelled(offset, data, cancel));
  }
  std::string Describe() const override { return inner_->Describe(); }
  unsigned ConcurrentReads() const override { return inner_->ConcurrentReads(); }

  uint64_t bytes() const { return bytes_.load(); }
  uint64_t reads() const { return reads_.load(); }

 private:
  Result<size_t> Count(Result<size_t> n) {
    if (n.ok()) {
      bytes_ += *n;
      ++reads_;
    }
    return n;
  }
  std::shared_ptr<RandomAccessSource> inner_;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> reads_{0};
};

}  // namespace vramflow
