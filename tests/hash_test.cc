// SPDX-License-Identifier: MIT
#include "common/hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace vramflow {
namespace {

// The dump graph hashes each chunk once (HashChunk) and takes the frame's
// raw_hash from it; that is only valid while XXH3-64 equals the low half of
// XXH3-128 for long inputs.
TEST(HashTest, HashChunkGivesBothHashesAtEverySize) {
  std::vector<uint8_t> data(70000);
  uint64_t x = 0x9e3779b97f4a7c15;
  for (uint8_t& b : data) b = static_cast<uint8_t>((x = x * 6364136223846793005 + 1442695040888963407) >> 56);
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 1100; ++n) sizes.push_back(n);
  for (size_t n : {4095, 4096, 4097, 65535, 65536, 65537, 70000}) sizes.push_back(n);
  for (size_t n : sizes) {
    ChunkHashes h = HashChunk(data.data(), n);
    EXPECT_EQ(h.hash64, Hash64(data.data(), n)) << n;
    EXPECT_EQ(h.content, HashContent128(data.data(), n)) << n;
  }
}

}  // namespace
}  // namespace vramflow
