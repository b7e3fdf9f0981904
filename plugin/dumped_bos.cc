// SPDX-License-Identifier: MIT
#include "plugin/dumped_bos.h"

namespace vramflow {

Status DumpedBos::Record(uint32_t gpu_id, uint32_t gem_handle, std::string what) {
  auto [it, added] = seen_.emplace(std::pair(gpu_id, gem_handle), what);
  if (added) return Status::Ok();
  return Status::NotSupported(what + " is the same buffer as " + it->second +
                              " (shared through a dma-buf). vramflow cannot restore a BO shared between "
                              "processes: each would get its own copy, so the dump is refused");
}

}  // namespace vramflow
