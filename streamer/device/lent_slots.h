// SPDX-License-Identifier: MIT
// LentSlots: the slots whose chunk payloads a sink is still writing without
// a copy (ByteSink::WriteBorrowed).
//
// The dump graph's serial write stage lends each DATA frame's payload to the
// sink where it was coded, in its slot, instead of copying it into the
// sink's buffer, and hands the slot back to the pool only once the sink has
// released it. At most `limit` slots are out at a time: past that the write
// stage waits for the oldest, so the graph always keeps slots to work in.
// Used by the write stage alone (not thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>

#include "transport/core/byte_stream.h"

namespace vramflow {

class LentSlots {
 public:
  LentSlots(ByteSink* sink, size_t limit) : sink_(sink), limit_(limit) {}
  // Stops the sink reading lent bytes (ByteSink::DropBorrowed), so that the
  // slots can be freed: after WaitAll(), that drops nothing.
  ~LentSlots();
  LentSlots(const LentSlots&) = delete;
  LentSlots& operator=(const LentSlots&) = delete;

  // Takes `slot` back from the write stage: lent under `ticket`, or free at
  // once when the ticket is 0. Then gives back, oldest first, every lent slot
  // the sink has released, waiting while more than the limit are out.
  void Return(uint32_t slot, uint64_t ticket, const std::function<void(uint32_t)>& give_back);
  // Waits until the sink has released every lent slot (the graph is over:
  // they are not given back).
  void WaitAll();
  size_t out() const { return out_.size(); }

 private:
  ByteSink* const sink_;
  const size_t limit_;
  std::deque<std::pair<uint32_t, uint64_t>> out_;  // (slot, ticket), oldest first
};

}  // namespace vramflow
