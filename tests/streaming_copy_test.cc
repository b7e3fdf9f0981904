// SPDX-License-Identifier: MIT
#include "common/streaming_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace vramflow {
namespace {

// Every alignment of source and destination, sizes around the streaming
// threshold and the 64-byte loop: the bytes land, and nothing beside them.
TEST(CopyAroundCacheTest, CopiesExactlyTheRangeAtEveryAlignment) {
  std::vector<uint8_t> source(20000);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t size : {0, 1, 15, 63, 64, 4095, 4096, 4097, 4160, 4111, 9999, 16384}) {
    for (size_t dst_shift = 0; dst_shift < 17; ++dst_shift) {
      for (size_t src_shift : {0, 1, 8, 15}) {
        std::vector<uint8_t> target(size + 64, 0xEE);
        CopyAroundCache(target.data() + dst_shift, source.data() + src_shift, size);
        ASSERT_EQ(0, std::memcmp(target.data() + dst_shift, source.data() + src_shift, size))
            << "size " << size << " dst+" << dst_shift << " src+" << src_shift;
        for (size_t i = 0; i < dst_shift; ++i) ASSERT_EQ(0xEE, target[i]) << "byte before, size " << size;
        for (size_t i = dst_shift + size; i < target.size(); ++i)
          ASSERT_EQ(0xEE, target[i]) << "byte after, size " << size << " dst+" << dst_shift;
      }
    }
  }
}

}  // namespace
}  // namespace vramflow
