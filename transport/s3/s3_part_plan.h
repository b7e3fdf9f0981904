// SPDX-License-Identifier: MIT
// How an upload of unknown length is cut into multipart parts.
//
// S3 allows at most limits.max_parts parts (10,000) of limits.min_part_size
// (5 MiB) to limits.max_part_size (5 GiB) each, and we do not know how long
// the stream is. So the part size grows with the part number: parts come in
// 16 equal groups of max_parts / 16 parts (625 for S3), and each group's
// parts are twice the previous group's, capped at max_part_size:
//
//   size(n) = min(max_part_size, first << ((n - 1) / group))   n = 1, 2, ...
//
// From the smallest first part (5 MiB), 10,000 parts hold about 21.4 TiB
// (11 doublings reach 5 GiB, the cap), beyond the 5 TiB that S3-compatible
// stores allow for an object. A short stream still uses small parts.
#pragma once

#include <cstdint>

#include "transport/s3/s3_options.h"

namespace vramflow::s3 {

class PartPlan {
 public:
  // `first` is clamped to the limits.
  PartPlan(uint64_t first, const S3Limits& limits);

  // Size of part `number` (1-based; valid up to limits.max_parts).
  uint64_t PartSize(uint32_t number) const;
  // Bytes that parts 1..`parts` hold in total.
  uint64_t Capacity(uint32_t parts) const;
  uint32_t max_parts() const { return limits_.max_parts; }
  uint64_t first() const { return first_; }

 private:
  uint64_t first_;
  uint32_t group_;
  S3Limits limits_;
};

// The first part size for `options` (its part_size, else the memory budget
// shared among concurrency + 1 parts, rounded down to whole MiB when that
// is at least 1 MiB), within the limits.
uint64_t FirstPartSize(const S3Options& options);
unsigned Concurrency(const S3Options& options);

}  // namespace vramflow::s3
