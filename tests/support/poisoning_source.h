// SPDX-License-Identifier: MIT
// PoisoningSource: a ByteSource that reads in place, as a mapped file does,
// from its own copy of a stream, and overwrites every byte DoneBefore passes
// with 0xA5: a reader that lets a payload go while it still decodes it then
// fails that chunk's hash. Free of gtest, for the fuzz targets too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "transport/core/byte_stream.h"

namespace vramflow::testing {

class PoisoningSource final : public ByteSource {
 public:
  explicit PoisoningSource(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  Result<size_t> Read(std::span<uint8_t> data) override {
    std::span<const uint8_t> taken = Take(data.size());
    std::copy(taken.begin(), taken.end(), data.begin());
    return taken.size();
  }
  std::optional<std::span<const uint8_t>> ReadInPlace(size_t size) override {
    ++in_place_reads_;
    return Take(size);
  }
  void DoneBefore(const uint8_t* in_place) override {
    const size_t end = static_cast<size_t>(in_place - bytes_.data());
    if (end > position_) passed_unread_ = true;
    for (size_t i = poisoned_; i < end; ++i) bytes_[i] = 0xA5;
    poisoned_ = std::max(poisoned_, end);
  }
  std::string Describe() const override { return "poisoning source"; }
  size_t in_place_reads() const { return in_place_reads_; }
  size_t poisoned() const { return poisoned_; }  // bytes from the start overwritten
  // Whether DoneBefore was ever given a byte not read yet (a reader's bug).
  bool passed_unread() const { return passed_unread_; }

 private:
  std::span<const uint8_t> Take(size_t size) {
    const size_t n = std::min(size, bytes_.size() - position_);
    std::span<const uint8_t> taken(bytes_.data() + position_, n);
    position_ += n;
    return taken;
  }
  std::vector<uint8_t> bytes_;
  size_t position_ = 0;
  size_t poisoned_ = 0;
  size_t in_place_reads_ = 0;
  bool passed_unread_ = false;
};

}  // namespace vramflow::testing
