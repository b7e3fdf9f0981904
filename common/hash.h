// SPDX-License-Identifier: MIT
// Hashes used by the chunk-stream format: XXH3 (64-bit) for frame payloads
// and headers, XXH3-128 for content identity (dedup keys).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vramflow {

uint64_t Hash64(const void* data, size_t size);

struct Hash128 {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const Hash128&) const = default;
};
Hash128 HashContent128(const void* data, size_t size);

// Hash64 and HashContent128 of the same bytes. Above 240 bytes XXH3-64 is the
// low half of XXH3-128 (both run the same accumulator loop and the same first
// merge; XXH3's output is frozen since xxHash 0.8.0, and hash_test checks it),
// so one pass over a chunk gives both; shorter inputs are hashed twice.
struct ChunkHashes {
  uint64_t hash64 = 0;
  Hash128 content;
};
ChunkHashes HashChunk(const void* data, size_t size);

// Checksum of a fixed-size header: the low 32 bits of XXH3-64 over `size` bytes.
uint32_t HeaderChecksum(const void* data, size_t size);

// "0x0123456789abcdef"
std::string HexHash(uint64_t h);

}  // namespace vramflow
