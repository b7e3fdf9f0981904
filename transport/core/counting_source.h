// SPDX-License-Identifier: MIT
// CountingSource: a ByteSource that counts the bytes read through it, so a
// report can give a stream's size, even when the stream was cut short.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "transport/core/byte_stream.h"

namespace vramflow {

class CountingSource final : public ByteSource {
 public:
  explicit CountingSource(ByteSource* inner) : inner_(inner) {}
  Result<size_t> Read(std::span<uint8_t> data) override {
    VF_ASSIGN_OR_RETURN(size_t n, inner_->Read(data));
    bytes_ += n;
    return n;
  }
  // In place where the inner source reads in place (a mapped file), counted
  // the same.
  std::optional<std::span<const uint8_t>> ReadInPlace(size_t size) override {
    std::optional<std::span<const uint8_t>> taken = inner_->ReadInPlace(size);
    if (taken) bytes_ += taken->size();
    return taken;
  }
  void DoneBefore(const uint8_t* in_place) override { inner_->DoneBefore(in_place); }
  std::string Describe() const override { return inner_->Describe(); }
  uint64_t bytes() const { return bytes_; }

 private:
  ByteSource* inner_;
  uint64_t bytes_ = 0;
};

}  // namespace vramflow
