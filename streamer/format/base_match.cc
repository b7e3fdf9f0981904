// SPDX-License-Identifier: MIT
#include "streamer/format/base_match.h"

namespace vramflow {
namespace {

bool IsGpuBuffer(const ObjectMetadata& metadata) {
  return metadata.Find("gpu-id") != nullptr && metadata.Find("gpu-va") != nullptr;
}

}  // namespace

std::optional<uint32_t> GpuOrdinals::Of(const ObjectMetadata& metadata) {
  if (!IsGpuBuffer(metadata)) return std::nullopt;
  const std::string& gpu = *metadata.Find("gpu-id");
  auto [it, inserted] = ordinals_.emplace(gpu, static_cast<uint32_t>(ordinals_.size()));
  return it->second;
}

BaseObjectMatcher::BaseObjectMatcher(const SeekIndex& index) : index_(index) {
  GpuOrdinals ordinals;
  for (size_t i = 0; i < index.objects.size(); ++i) {
    const SeekIndexObject& o = index.objects[i];
    if (std::optional<uint32_t> ordinal = ordinals.Of(o.metadata)) {
      by_gpu_.emplace(std::make_tuple(*ordinal, *o.metadata.Find("gpu-va"), o.size), i);
    } else {
      by_name_.emplace(o.metadata.name, i);  // keeps the first of a name
    }
  }
}

const SeekIndexObject* BaseObjectMatcher::Match(const ObjectMetadata& metadata, uint64_t size,
                                                std::optional<uint32_t> gpu_ordinal) const {
  if (IsGpuBuffer(metadata)) {
    if (!gpu_ordinal) return nullptr;
    auto it = by_gpu_.find(std::make_tuple(*gpu_ordinal, *metadata.Find("gpu-va"), size));
    return it == by_gpu_.end() ? nullptr : &index_.objects[it->second];
  }
  auto it = by_name_.find(metadata.name);
  return it == by_name_.end() ? nullptr : &index_.objects[it->second];
}

}  // namespace vramflow
