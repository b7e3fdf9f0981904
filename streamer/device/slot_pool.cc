// SPDX-License-Identifier: MIT
#include "streamer/device/slot_pool.h"

#include <algorithm>

#include "common/units.h"

namespace vramflow {

Result<std::unique_ptr<SlotPool>> SlotPool::Create(MemoryBudget* budget, const std::vector<Device*>& devices,
                                                   size_t staging_size, size_t payload_size, size_t min_slots,
                                                   size_t max_slots, size_t scratch_size) {
  std::unique_ptr<SlotPool> pool(new SlotPool());
  pool->devices_ = devices;
  // Page rounding of each buffer.
  const uint64_t per_slot = staging_size + payload_size + scratch_size + (scratch_size ? 12288 : 8192);
  uint64_t available = budget->limit() - budget->in_use();
  size_t count = static_cast<size_t>(std::min<uint64_t>(max_slots, available / per_slot));
  if (count < min_slots)
    return Status::InvalidArgument("memory budget of " + FormatSize(budget->limit()) + " leaves room for " +
                                   std::to_string(count) + " buffers of " + FormatSize(per_slot) + ", need at least " +
                                   std::to_string(min_slots));
  pool->slots_.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    Slot slot;
    VF_ASSIGN_OR_RETURN(slot.staging, BudgetedBuffer::Allocate(budget, staging_size, "staging buffer"));
    if (payload_size) {
      VF_ASSIGN_OR_RETURN(slot.payload, BudgetedBuffer::Allocate(budget, payload_size, "payload buffer"));
    }
    if (scratch_size) {
      VF_ASSIGN_OR_RETURN(slot.scratch, BudgetedBuffer::Allocate(budget, scratch_size, "scratch buffer"));
    }
    for (Device* d : devices) {
      Result<uint32_t> handle = d->RegisterStaging(slot.staging.data(), slot.staging.size());
      if (!handle.ok()) {
        for (size_t k = 0; k < slot.staging_handles.size(); ++k)
          (void)devices[k]->UnregisterStaging(slot.staging_handles[k]);
        return handle.status().WithContext("registering a staging buffer with " + d->Describe());
      }
      slot.staging_handles.push_back(*handle);
    }
    pool->slots_.push_back(std::move(slot));
  }
  return pool;
}

SlotPool::~SlotPool() {
  for (Slot& slot : slots_)
    for (size_t k = 0; k < slot.staging_handles.size(); ++k)
      (void)devices_[k]->UnregisterStaging(slot.staging_handles[k]);
}

size_t SlotPool::DeviceIndex(const Device* device) const {
  return static_cast<size_t>(std::find(devices_.begin(), devices_.end(), device) - devices_.begin());
}

}  // namespace vramflow
