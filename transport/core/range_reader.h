// SPDX-License-Identifier: MIT
// RangeReader: a ByteSource over chosen byte ranges of a RandomAccessSource.
//
// It returns the bytes of `ranges`, one after another in the order given
// (which need not be ascending), while it keeps several ranged reads in
// flight ahead of the consumer: a range longer than `request_size` is read
// in pieces of that size, up to `concurrency` pieces at once, and never more
// fetched bytes held than `memory_budget` (the piece being consumed
// included). This is how an S3 object is read as a stream (s3_source.cc),
// and how a sub-stream fetches one object's frames (streamer/format/sub_stream.h).
//
// Errors are sticky and name the source and the byte range. Destroying the
// reader cancels what is in flight (ReadAtUnlessCancelled) and waits for it.
// Like every ByteSource, one consumer at a time; the source must be
// thread-safe (RandomAccessSource is).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/core/byte_stream.h"
#include "transport/core/random_access.h"

namespace vramflow {

struct ByteRange {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool operator==(const ByteRange&) const = default;
};

struct RangeReaderOptions {
  // Fetched bytes held at once: pieces in flight, pieces done but not yet
  // consumed, and the piece being consumed. One piece is always allowed, so
  // a request_size above the budget still works, only without overlap.
  uint64_t memory_budget = 32ull << 20;
  // Bytes per ranged read (at least 1).
  uint64_t request_size = 8ull << 20;
  // Ranged reads in flight at most (at least 1).
  unsigned concurrency = 4;
};

// Reads `ranges` of `source` in order. A range that runs past the end of the
// source fails with kTruncated when the reader gets there.
std::unique_ptr<ByteSource> NewRangeReader(std::shared_ptr<RandomAccessSource> source, std::vector<ByteRange> ranges,
                                           const RangeReaderOptions& options);

}  // namespace vramflow
