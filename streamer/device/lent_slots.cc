// SPDX-License-Identifier: MIT
#include "streamer/device/lent_slots.h"

namespace vramflow {

LentSlots::~LentSlots() { sink_->DropBorrowed(); }

void LentSlots::Return(uint32_t slot, uint64_t ticket, const std::function<void(uint32_t)>& give_back) {
  if (ticket == 0) give_back(slot);
  else out_.emplace_back(slot, ticket);
  while (!out_.empty()) {
    const auto [oldest, oldest_ticket] = out_.front();
    if (out_.size() > limit_) sink_->WaitReleased(oldest_ticket);
    else if (!sink_->Released(oldest_ticket)) break;
    out_.pop_front();
    give_back(oldest);
  }
}

void LentSlots::WaitAll() {
  if (!out_.empty()) sink_->WaitReleased(out_.back().second);
  out_.clear();
}

}  // namespace vramflow
