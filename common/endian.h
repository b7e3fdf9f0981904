// SPDX-License-Identifier: MIT
// Little-endian loads and stores for on-wire integers.
//
// The chunk-stream format is little-endian whatever the host; these helpers
// are the only place that knows it. memcpy keeps them alignment-safe.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace vramflow {

template <typename T>
inline T ByteSwap(T v) {
  if constexpr (sizeof(T) == 2) return static_cast<T>(__builtin_bswap16(v));
  else if constexpr (sizeof(T) == 4) return static_cast<T>(__builtin_bswap32(v));
  else return static_cast<T>(__builtin_bswap64(v));
}

template <typename T>
inline T LoadLE(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::big) v = ByteSwap(v);
  return v;
}

template <typename T>
inline void StoreLE(void* p, T v) {
  if constexpr (std::endian::native == std::endian::big) v = ByteSwap(v);
  std::memcpy(p, &v, sizeof(v));
}

inline uint16_t LoadLE16(const void* p) { return LoadLE<uint16_t>(p); }
inline uint32_t LoadLE32(const void* p) { return LoadLE<uint32_t>(p); }
inline uint64_t LoadLE64(const void* p) { return LoadLE<uint64_t>(p); }
inline void StoreLE16(void* p, uint16_t v) { StoreLE(p, v); }
inline void StoreLE32(void* p, uint32_t v) { StoreLE(p, v); }
inline void StoreLE64(void* p, uint64_t v) { StoreLE(p, v); }

}  // namespace vramflow
