// SPDX-License-Identifier: MIT
#include "common/hash.h"

#include <xxhash.h>

#include <cstdio>

namespace vramflow {

uint64_t Hash64(const void* data, size_t size) { return XXH3_64bits(data, size); }

Hash128 HashContent128(const void* data, size_t size) {
  XXH128_hash_t h = XXH3_128bits(data, size);
  return Hash128{h.low64, h.high64};
}

ChunkHashes HashChunk(const void* data, size_t size) {
  constexpr size_t kSharedAbove = 240;  // XXH3's "long input" path
  ChunkHashes h;
  h.content = HashContent128(data, size);
  h.hash64 = size > kSharedAbove ? h.content.low : Hash64(data, size);
  return h;
}

uint32_t HeaderChecksum(const void* data, size_t size) {
  return static_cast<uint32_t>(XXH3_64bits(data, size));
}

std::string HexHash(uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace vramflow
