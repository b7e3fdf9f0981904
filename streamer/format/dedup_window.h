// SPDX-License-Identifier: MIT
// DedupWindow: the most recent DATA frames of a dedup stream, the only ones a
// DEDUP_REF may name (FORMAT.md 4.6, the stream header's dedup_window).
//
// The writer keys it by content, to find a chunk it wrote already; a reader
// keys it by (object, offset), to check the DATA frame a reference names.
// Both number the DATA frames in stream order and drop the oldest once more
// than `capacity` are held, so neither holds more than `capacity` entries
// however long the stream, and both sides agree on what is in the window.
// Capacity 0 holds every frame: streams of earlier writers declare no window.
// Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>

#include "common/hash.h"

namespace vramflow {

// The hash-map hash of a content key (XXH3-128, already uniform).
struct ContentKeyHash {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.low); }
};

// What one entry costs, at most, on either side: the hash-map node and bucket
// and the FIFO slot. Charged to the memory budget for the whole window.
inline constexpr uint64_t kDedupWindowEntryBytes = 96;

template <typename Key, typename Value, typename KeyHash>
class DedupWindow {
 public:
  explicit DedupWindow(uint32_t capacity = 0) : capacity_(capacity) {}

  // Records the next DATA frame. A key already present now names this frame.
  void Add(const Key& key, const Value& value) {
    const uint64_t number = added_++;
    entries_[key] = Entry{value, number};
    if (capacity_ == 0) return;
    order_.push_back(key);
    if (order_.size() <= capacity_) return;
    const uint64_t oldest = number - capacity_;  // the frame that just left the window
    auto it = entries_.find(order_.front());
    if (it != entries_.end() && it->second.number == oldest) entries_.erase(it);
    order_.pop_front();
  }

  // The frame recorded under `key`, if it is still in the window.
  const Value* Find(const Key& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second.value;
  }

  uint32_t capacity() const { return capacity_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Value value;
    uint64_t number;  // the DATA frame's position among the stream's DATA frames
  };
  uint32_t capacity_;
  uint64_t added_ = 0;
  std::unordered_map<Key, Entry, KeyHash> entries_;
  std::deque<Key> order_;  // keys of the frames in the window, oldest first
};

}  // namespace vramflow
