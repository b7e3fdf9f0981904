// SPDX-License-Identifier: MIT
#include "transport/s3/s3_part_plan.h"

#include <algorithm>

namespace vramflow::s3 {

PartPlan::PartPlan(uint64_t first, const S3Limits& limits)
    : first_(std::clamp(first, limits.min_part_size, limits.max_part_size)),
      group_(std::max<uint32_t>(1, limits.max_parts / 16)),
      limits_(limits) {}

namespace {

uint64_t GrownSize(uint64_t first, uint32_t group, uint64_t max, uint32_t number) {
  uint32_t doublings = (number - 1) / group;
  uint64_t size = first;
  for (uint32_t i = 0; i < doublings && size < max; ++i) size *= 2;
  return std::min(size, max);
}

}  // namespace

uint64_t PartPlan::PartSize(uint32_t number) const {
  return GrownSize(first_, group_, limits_.max_part_size, number == 0 ? 1 : number);
}

uint64_t PartPlan::Capacity(uint32_t parts) const {
  uint64_t total = 0;
  for (uint32_t n = 1; n <= parts; ++n) total += PartSize(n);
  return total;
}

unsigned Concurrency(const S3Options& options) { return options.concurrency ? options.concurrency : 8; }

uint64_t FirstPartSize(const S3Options& options) {
  uint64_t size = options.part_size;
  if (size == 0) {
    size = options.memory_budget / (Concurrency(options) + 1);
    if (size >= (1u << 20)) size &= ~((uint64_t{1} << 20) - 1);
  }
  return std::clamp(size, options.limits.min_part_size, options.limits.max_part_size);
}

}  // namespace vramflow::s3
