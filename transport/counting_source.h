// SPDX-License-Identifier: MIT
// CountingSource: a ByteSource that counts the bytes read through it, so a
// report can give a stream's size, even when the stream was cut short.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "transport/byte_stream.h"

namespace vramflow {

class CountingSource final : public ByteSource {
 public:
  explicit CountingSource(ByteSource* inner) : inner_(inner) {}
  Result<size_t> Read(std::span<uint8_t> data) override {
    VF_ASSIGN_OR_RETURN(size_t n, inner_->Read(data));
    bytes_ += n;
    return n;
  }
  std::string Describe() const override { return inner_->Describe(); }
  uint64_t bytes() const { return bytes_; }

 private:
  ByteSource* inner_;
  uint64_t bytes_ = 0;
};

}  // namespace vramflow
