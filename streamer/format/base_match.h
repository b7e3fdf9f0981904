// SPDX-License-Identifier: MIT
// Which object of a base a new object continues (FORMAT.md 4.12, "Matching
// objects"): GPU buffers (attributes gpu-id and gpu-va) by the GPU's place
// among the stream's GPUs in order of first appearance, the virtual address
// and the size, since indices, handles and GPU ids change between runs and
// machines; every other object by name (the first of that name).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "streamer/format/frame_format.h"
#include "streamer/format/seek_index.h"

namespace vramflow {

// Numbers the GPUs of one stream in the order their objects first appear:
// the first gpu-id seen is 0, the next new one 1, ... Objects without both
// gpu-id and gpu-va are not GPU buffers (nullopt).
class GpuOrdinals {
 public:
  std::optional<uint32_t> Of(const ObjectMetadata& metadata);

 private:
  std::map<std::string, uint32_t> ordinals_;
};

class BaseObjectMatcher {
 public:
  // `index` must outlive the matcher.
  explicit BaseObjectMatcher(const SeekIndex& index);
  const SeekIndexObject* Match(const ObjectMetadata& metadata, uint64_t size,
                               std::optional<uint32_t> gpu_ordinal) const;

 private:
  const SeekIndex& index_;
  std::map<std::tuple<uint32_t, std::string, uint64_t>, size_t> by_gpu_;  // (ordinal, gpu-va, size) -> object
  std::unordered_map<std::string, size_t> by_name_;                       // objects that are not GPU buffers
};

}  // namespace vramflow
