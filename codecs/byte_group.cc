// SPDX-License-Identifier: MIT
#include "codecs/byte_group.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/endian.h"

namespace vramflow {
namespace {

// Scalar loops written so GCC and Clang vectorise them (8 words per step).
void Group2(const uint8_t* src, size_t words, uint8_t* p0, uint8_t* p1) {
  for (size_t i = 0; i < words; ++i) {
    p0[i] = src[2 * i];
    p1[i] = src[2 * i + 1];
  }
}

// Four planes: SSE2 (every x86-64 CPU has it) takes 16 words a step, about
// 1.5x the vectorised scalar loop below, which handles the tail and other
// architectures.
void Group4(const uint8_t* src, size_t words, uint8_t* p0, uint8_t* p1, uint8_t* p2, uint8_t* p3) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i low_byte = _mm_set1_epi32(0xff);
  for (; i + 16 <= words; i += 16) {
    const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 4 * i));
    const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 4 * i + 16));
    const __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 4 * i + 32));
    const __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 4 * i + 48));
    // Byte `shift / 8` of each 32-bit word, narrowed 32 -> 16 -> 8 bits
    // (the values are 0..255, so the saturating packs keep them as they are).
    auto plane = [&](int shift) {
      auto pick = [&](__m128i r) { return _mm_and_si128(_mm_srli_epi32(r, shift), low_byte); };
      return _mm_packus_epi16(_mm_packs_epi32(pick(r0), pick(r1)), _mm_packs_epi32(pick(r2), pick(r3)));
    };
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p0 + i), plane(0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p1 + i), plane(8));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p2 + i), plane(16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p3 + i), plane(24));
  }
#endif
  for (; i < words; ++i) {
    uint32_t w = LoadLE32(src + 4 * i);
    p0[i] = static_cast<uint8_t>(w);
    p1[i] = static_cast<uint8_t>(w >> 8);
    p2[i] = static_cast<uint8_t>(w >> 16);
    p3[i] = static_cast<uint8_t>(w >> 24);
  }
}

void Ungroup2(const uint8_t* p0, const uint8_t* p1, size_t words, uint8_t* dst) {
  for (size_t i = 0; i < words; ++i) {
    dst[2 * i] = p0[i];
    dst[2 * i + 1] = p1[i];
  }
}

void Ungroup4(const uint8_t* p0, const uint8_t* p1, const uint8_t* p2, const uint8_t* p3, size_t words, uint8_t* dst) {
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= words; i += 16) {
    const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + i));
    const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + i));
    const __m128i b2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p2 + i));
    const __m128i b3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p3 + i));
    // Interleave bytes 0 and 1, and 2 and 3, into 16-bit halves, then the
    // halves into little-endian 32-bit words.
    const __m128i low01 = _mm_unpacklo_epi8(b0, b1), high01 = _mm_unpackhi_epi8(b0, b1);
    const __m128i low23 = _mm_unpacklo_epi8(b2, b3), high23 = _mm_unpackhi_epi8(b2, b3);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4 * i), _mm_unpacklo_epi16(low01, low23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4 * i + 16), _mm_unpackhi_epi16(low01, low23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4 * i + 32), _mm_unpacklo_epi16(high01, high23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4 * i + 48), _mm_unpackhi_epi16(high01, high23));
  }
#endif
  for (; i < words; ++i) {
    uint32_t w = static_cast<uint32_t>(p0[i]) | static_cast<uint32_t>(p1[i]) << 8 | static_cast<uint32_t>(p2[i]) << 16 |
                 static_cast<uint32_t>(p3[i]) << 24;
    StoreLE32(dst + 4 * i, w);
  }
}

}  // namespace

void GroupBytes(const uint8_t* src, size_t n, unsigned word, uint8_t* const* planes) {
  size_t words = n / word;
  if (word == 2) Group2(src, words, planes[0], planes[1]);
  else Group4(src, words, planes[0], planes[1], planes[2], planes[3]);
}

void UngroupBytes(const uint8_t* const* planes, size_t n, unsigned word, uint8_t* dst) {
  size_t words = n / word;
  if (word == 2) Ungroup2(planes[0], planes[1], words, dst);
  else Ungroup4(planes[0], planes[1], planes[2], planes[3], words, dst);
}

}  // namespace vramflow
