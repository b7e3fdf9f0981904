// SPDX-License-Identifier: MIT
#include "common/hash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

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

// Chunks are hashed through libxxhash's run-time dispatch where the build
// has it (AVX2 or AVX-512 on x86-64): the values are XXH3's, as the plain
// entry points (SSE2) compute them and the format records them.
TEST(HashTest, HashesAreXxh3AtEverySize) {
  std::vector<uint8_t> data((1 << 20) + 7);
  uint64_t x = 0x2545f4914f6cdd1d;
  for (uint8_t& b : data) b = static_cast<uint8_t>((x = x * 6364136223846793005 + 1442695040888963407) >> 56);
  std::vector<size_t> sizes = {0,   1,    3,    16,   17,        128,     129,          240,
                               241, 1024, 1025, 4096, 65536 + 5, 1 << 20, (1 << 20) + 7};
  for (size_t n : sizes) {
    for (size_t offset : {0, 1}) {  // unaligned too
      if (offset + n > data.size()) continue;
      const uint8_t* p = data.data() + offset;
      EXPECT_EQ(Hash64(p, n), XXH3_64bits(p, n)) << n << " at " << offset;
      const XXH128_hash_t h = XXH3_128bits(p, n);
      EXPECT_EQ(HashContent128(p, n), (Hash128{h.low64, h.high64})) << n << " at " << offset;
    }
  }
  EXPECT_EQ(Hash64(nullptr, 0), 0x2d06800538d394c2u);  // XXH3-64 of nothing, from xxHash's own tests
}

}  // namespace
}  // namespace vramflow
