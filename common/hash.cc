// SPDX-License-Identifier: MIT
#include "common/hash.h"

#include <xxhash.h>
#if VRAMFLOW_XXH3_DISPATCH
#include <xxh_x86dispatch.h>
#endif

#include <cstdio>

namespace vramflow {
namespace {

// Chunks and payloads are hashed through libxxhash's run-time dispatch where
// the build found it (CMakeLists.txt): the widest vector unit the CPU has,
// where the plain entry points stay with SSE2. The values are the same.
#if VRAMFLOW_XXH3_DISPATCH
// The dispatched AVX2 and AVX-512 loops return with the vector registers'
// upper halves in use. This binary's own code is SSE (baseline x86-64), and
// until a VZEROUPPER every SSE instruction after them pays for merging into
// the wide registers: in a pack, log2 in the chunk analysis ran five times
// slower and the pack as a whole a quarter slower. So clear them after each
// hash, on CPUs that have the instruction (those the wide loops run on).
__attribute__((target("avx"))) void ClearUpperHalves() { __builtin_ia32_vzeroupper(); }

bool CpuHasAvx() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx");
}

void AfterWideHash() {
  static const bool avx = CpuHasAvx();  // a fact about the CPU, asked once
  if (avx) ClearUpperHalves();
}

XXH64_hash_t Xxh3(const void* data, size_t size) {
  const XXH64_hash_t h = XXH3_64bits_dispatch(data, size);
  AfterWideHash();
  return h;
}
XXH128_hash_t Xxh3_128(const void* data, size_t size) {
  const XXH128_hash_t h = XXH3_128bits_dispatch(data, size);
  AfterWideHash();
  return h;
}
#else
XXH64_hash_t Xxh3(const void* data, size_t size) { return XXH3_64bits(data, size); }
XXH128_hash_t Xxh3_128(const void* data, size_t size) { return XXH3_128bits(data, size); }
#endif

}  // namespace

uint64_t Hash64(const void* data, size_t size) { return Xxh3(data, size); }

Hash128 HashContent128(const void* data, size_t size) {
  XXH128_hash_t h = Xxh3_128(data, size);
  return Hash128{h.low64, h.high64};
}

ChunkHashes HashChunk(const void* data, size_t size) {
  constexpr size_t kSharedAbove = 240;  // XXH3's "long input" path
  ChunkHashes h;
  h.content = HashContent128(data, size);
  h.hash64 = size > kSharedAbove ? h.content.low : Hash64(data, size);
  return h;
}

uint32_t HeaderChecksum(const void* data, size_t size) { return static_cast<uint32_t>(XXH3_64bits(data, size)); }

std::string HexHash(uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace vramflow
