// SPDX-License-Identifier: MIT
// SlotPool: the fixed set of buffers a graph works in.
//
// A slot is one chunk's worth of page-aligned staging memory (the DMA
// source or target, registered with every device) plus room for its encoded
// payload. Graphs pass slot indices around as tokens: a job holds a slot from
// the moment it enters the graph until its last stage returns it, so the
// number of slots bounds the work in flight and all memory comes from the
// budget. The pool itself does no locking; the graph's token queue does.
#pragma once

#include <cstdint>
#include <vector>

#include "streamer/device/device.h"
#include "streamer/machine/memory_budget.h"

namespace vramflow {

struct Slot {
  BudgetedBuffer staging;
  BudgetedBuffer payload;
  BudgetedBuffer scratch;                 // a graph's own working room per chunk (empty unless asked for)
  std::vector<uint32_t> staging_handles;  // per device, in the pool's device order
};

class SlotPool {
 public:
  // Allocates as many slots as fit in what remains of `budget` (at most
  // `max_slots`), each `staging_size` + `payload_size` + `scratch_size`
  // bytes, and registers every staging buffer with each device. Fails if
  // fewer than `min_slots` fit.
  static Result<std::unique_ptr<SlotPool>> Create(MemoryBudget* budget, const std::vector<Device*>& devices,
                                                  size_t staging_size, size_t payload_size, size_t min_slots,
                                                  size_t max_slots, size_t scratch_size = 0);
  ~SlotPool();

  size_t size() const { return slots_.size(); }
  Slot& slot(uint32_t index) { return slots_[index]; }
  size_t device_count() const { return devices_.size(); }
  // Index of `device` in the pool's device order (device_count() if absent).
  size_t DeviceIndex(const Device* device) const;

 private:
  SlotPool() = default;
  std::vector<Device*> devices_;
  std::vector<Slot> slots_;
};

}  // namespace vramflow
