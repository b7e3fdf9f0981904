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

// Checksum of a fixed-size header: the low 32 bits of XXH3-64 over `size` bytes.
uint32_t HeaderChecksum(const void* data, size_t size);

// "0x0123456789abcdef"
std::string HexHash(uint64_t h);

}  // namespace vramflow
