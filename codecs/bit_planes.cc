// SPDX-License-Identifier: MIT
#include "codecs/bit_planes.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "codecs/byte_group.h"
#include "common/endian.h"

namespace vramflow {
namespace {

// Every loop below has an SSE2 body (every x86-64 CPU has it) that rotates
// 16-bit lanes with two shifts and an OR, and a scalar loop for the tail
// and for other architectures.

void Split2(const uint8_t* src, size_t words, unsigned r, uint8_t* p0, uint8_t* p1) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i left = _mm_cvtsi32_si128(static_cast<int>(r));
  const __m128i right = _mm_cvtsi32_si128(static_cast<int>(16 - r));
  const __m128i low_byte = _mm_set1_epi16(0xff);
  for (; i + 16 <= words; i += 16) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i + 16));
    a = _mm_or_si128(_mm_sll_epi16(a, left), _mm_srl_epi16(a, right));
    b = _mm_or_si128(_mm_sll_epi16(b, left), _mm_srl_epi16(b, right));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p0 + i),
                     _mm_packus_epi16(_mm_and_si128(a, low_byte), _mm_and_si128(b, low_byte)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p1 + i), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
  }
#endif
  for (; i < words; ++i) {
    uint16_t w = RotateLeft16(LoadLE16(src + 2 * i), r);
    p0[i] = static_cast<uint8_t>(w);
    p1[i] = static_cast<uint8_t>(w >> 8);
  }
}

void Join2(const uint8_t* p0, const uint8_t* p1, size_t words, unsigned r, uint8_t* dst) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i left = _mm_cvtsi32_si128(static_cast<int>(16 - r));
  const __m128i right = _mm_cvtsi32_si128(static_cast<int>(r));
  for (; i + 16 <= words; i += 16) {
    const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + i));
    const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + i));
    __m128i lo = _mm_unpacklo_epi8(b0, b1), hi = _mm_unpackhi_epi8(b0, b1);
    lo = _mm_or_si128(_mm_srl_epi16(lo, right), _mm_sll_epi16(lo, left));
    hi = _mm_or_si128(_mm_srl_epi16(hi, right), _mm_sll_epi16(hi, left));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i + 16), hi);
  }
#endif
  for (; i < words; ++i) {
    uint16_t w = static_cast<uint16_t>(p0[i] | p1[i] << 8);
    StoreLE16(dst + 2 * i, RotateLeft16(w, 16 - r));
  }
}

void Split4(const uint8_t* src, size_t words, unsigned r, uint8_t* const* p) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i left = _mm_cvtsi32_si128(static_cast<int>(r));
  const __m128i right = _mm_cvtsi32_si128(static_cast<int>(16 - r));
  const __m128i upper = _mm_set1_epi32(static_cast<int>(0xffff0000u));
  for (; i + 16 <= words; i += 16) {
    __m128i v[4];
    for (int k = 0; k < 4; ++k) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 4 * i + 16 * k));
      const __m128i rotated = _mm_or_si128(_mm_sll_epi16(x, left), _mm_srl_epi16(x, right));
      v[k] = _mm_or_si128(_mm_and_si128(rotated, upper), _mm_andnot_si128(upper, x));
    }
    // Transposed by interleaving bytes three times: v0 with v1 and v2 with
    // v3 (words 0|4, 1|5, ... side by side), then those halves, then again,
    // which leaves byte k of words 0-7 and of words 8-15 in 8-byte halves
    // that one 64-bit interleave joins into plane k.
    __m128i x[4], y[4];
    x[0] = _mm_unpacklo_epi8(v[0], v[1]);
    x[1] = _mm_unpackhi_epi8(v[0], v[1]);
    x[2] = _mm_unpacklo_epi8(v[2], v[3]);
    x[3] = _mm_unpackhi_epi8(v[2], v[3]);
    y[0] = _mm_unpacklo_epi8(x[0], x[1]);
    y[1] = _mm_unpackhi_epi8(x[0], x[1]);
    y[2] = _mm_unpacklo_epi8(x[2], x[3]);
    y[3] = _mm_unpackhi_epi8(x[2], x[3]);
    x[0] = _mm_unpacklo_epi8(y[0], y[1]);  // byte 0 of words 0-7, then byte 1
    x[1] = _mm_unpackhi_epi8(y[0], y[1]);  // bytes 2 and 3 of words 0-7
    x[2] = _mm_unpacklo_epi8(y[2], y[3]);  // bytes 0 and 1 of words 8-15
    x[3] = _mm_unpackhi_epi8(y[2], y[3]);  // bytes 2 and 3 of words 8-15
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p[0] + i), _mm_unpacklo_epi64(x[0], x[2]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p[1] + i), _mm_unpackhi_epi64(x[0], x[2]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p[2] + i), _mm_unpacklo_epi64(x[1], x[3]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p[3] + i), _mm_unpackhi_epi64(x[1], x[3]));
  }
#endif
  for (; i < words; ++i) {
    const uint8_t* w = src + 4 * i;
    uint16_t high = RotateLeft16(LoadLE16(w + 2), r);
    p[0][i] = w[0];
    p[1][i] = w[1];
    p[2][i] = static_cast<uint8_t>(high);
    p[3][i] = static_cast<uint8_t>(high >> 8);
  }
}

void Join4(const uint8_t* const* p, size_t words, unsigned r, uint8_t* dst) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i left = _mm_cvtsi32_si128(static_cast<int>(16 - r));
  const __m128i right = _mm_cvtsi32_si128(static_cast<int>(r));
  const __m128i upper = _mm_set1_epi32(static_cast<int>(0xffff0000u));
  for (; i + 16 <= words; i += 16) {
    const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[0] + i));
    const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[1] + i));
    const __m128i b2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[2] + i));
    const __m128i b3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[3] + i));
    const __m128i low01 = _mm_unpacklo_epi8(b0, b1), high01 = _mm_unpackhi_epi8(b0, b1);
    const __m128i low23 = _mm_unpacklo_epi8(b2, b3), high23 = _mm_unpackhi_epi8(b2, b3);
    const __m128i words4[4] = {_mm_unpacklo_epi16(low01, low23), _mm_unpackhi_epi16(low01, low23),
                               _mm_unpacklo_epi16(high01, high23), _mm_unpackhi_epi16(high01, high23)};
    for (int k = 0; k < 4; ++k) {
      const __m128i x = words4[k];
      const __m128i rotated = _mm_or_si128(_mm_srl_epi16(x, right), _mm_sll_epi16(x, left));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4 * i + 16 * k),
                       _mm_or_si128(_mm_and_si128(rotated, upper), _mm_andnot_si128(upper, x)));
    }
  }
#endif
  for (; i < words; ++i) {
    uint16_t high = RotateLeft16(static_cast<uint16_t>(p[2][i] | p[3][i] << 8), 16 - r);
    dst[4 * i] = p[0][i];
    dst[4 * i + 1] = p[1][i];
    StoreLE16(dst + 4 * i + 2, high);
  }
}

#if defined(__x86_64__)
// The same four loops built for AVX2, 32 words a step, where the CPU has it
// (the binary is built for baseline x86-64). AVX2's packs and interleaves
// work within each 128-bit half, so each loop adds one cross-half permute
// per 32 bytes of a plane; the steps are those of the SSE2 loops above,
// which finish each loop's tail.

__attribute__((target("avx2"))) void Split2Avx2(const uint8_t* src, size_t words, unsigned r, uint8_t* p0,
                                                uint8_t* p1) {
  size_t i = 0;
  const __m128i left = _mm_cvtsi32_si128(static_cast<int>(r));
  const __m128i right = _mm_cvtsi32_si128(static_cast<int>(16 - r));
  const __m256i low_byte = _mm256_set1_epi16(0xff);
  for (; i + 32 <= words; i += 32) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i + 32));
    a = _mm256_or_si256(_mm256_sll_epi16(a, left), _mm256_srl_epi16(a, right));
    b = _mm256_or_si256(_mm256_sll_epi16(b, left), _mm256_srl_epi16(b, right));
    // The packs leave words 0-7, 16-23, 8-15, 24-31 in 8-byte quarters.
    const __m256i low = _mm256_packus_epi16(_mm256_and_si256(a, low_byte), _mm256_and_si256(b, low_byte));
    const __m256i high = _mm256_packus_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p0 + i), _mm256_permute4x64_epi64(low, 0xD8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p1 + i), _mm256_permute4x64_epi64(high, 0xD8));
  }
  Split2(src + 2 * i, words - i, r, p0 + i, p1 + i);
}

__attribute__((target("avx2"))) void Join2Avx2(const uint8_t* p0, const uint8_t* p1, size_t words, unsigned r,
                                               uint8_t* dst) {
  size_t i = 0;
  const __m128i left = _mm_cvtsi32_si128(static_cast<int>(16 - r));
  const __m128i right = _mm_cvtsi32_si128(static_cast<int>(r));
  for (; i + 32 <= words; i += 32) {
    // Bytes 0-7, 16-23, 8-15, 24-31 in quarters, so that the interleaves
    // below give words 0-15 and 16-31.
    const __m256i b0 = _mm256_permute4x64_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + i)), 0xD8);
    const __m256i b1 = _mm256_permute4x64_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1 + i)), 0xD8);
    __m256i lo = _mm256_unpacklo_epi8(b0, b1), hi = _mm256_unpackhi_epi8(b0, b1);
    lo = _mm256_or_si256(_mm256_srl_epi16(lo, right), _mm256_sll_epi16(lo, left));
    hi = _mm256_or_si256(_mm256_srl_epi16(hi, right), _mm256_sll_epi16(hi, left));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i + 32), hi);
  }
  Join2(p0 + i, p1 + i, words - i, r, dst + 2 * i);
}

__attribute__((target("avx2"))) void Split4Avx2(const uint8_t* src, size_t words, unsigned r, uint8_t* const* p) {
  size_t i = 0;
  const __m128i left = _mm_cvtsi32_si128(static_cast<int>(r));
  const __m128i right = _mm_cvtsi32_si128(static_cast<int>(16 - r));
  const __m256i upper = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (; i + 32 <= words; i += 32) {
    __m256i v[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 4 * i + 32 * k));
      const __m256i rotated = _mm256_or_si256(_mm256_sll_epi16(x, left), _mm256_srl_epi16(x, right));
      v[k] = _mm256_or_si256(_mm256_and_si256(rotated, upper), _mm256_andnot_si256(upper, x));
    }
    // Words 0-3, 4-7, 8-11, 12-15 in the low halves and 16-31 likewise in
    // the high ones: each half then transposes as Split4 does.
    const __m256i u[4] = {_mm256_permute2x128_si256(v[0], v[2], 0x20), _mm256_permute2x128_si256(v[0], v[2], 0x31),
                          _mm256_permute2x128_si256(v[1], v[3], 0x20), _mm256_permute2x128_si256(v[1], v[3], 0x31)};
    __m256i x[4], y[4];
    x[0] = _mm256_unpacklo_epi8(u[0], u[1]);
    x[1] = _mm256_unpackhi_epi8(u[0], u[1]);
    x[2] = _mm256_unpacklo_epi8(u[2], u[3]);
    x[3] = _mm256_unpackhi_epi8(u[2], u[3]);
    y[0] = _mm256_unpacklo_epi8(x[0], x[1]);
    y[1] = _mm256_unpackhi_epi8(x[0], x[1]);
    y[2] = _mm256_unpacklo_epi8(x[2], x[3]);
    y[3] = _mm256_unpackhi_epi8(x[2], x[3]);
    x[0] = _mm256_unpacklo_epi8(y[0], y[1]);
    x[1] = _mm256_unpackhi_epi8(y[0], y[1]);
    x[2] = _mm256_unpacklo_epi8(y[2], y[3]);
    x[3] = _mm256_unpackhi_epi8(y[2], y[3]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p[0] + i), _mm256_unpacklo_epi64(x[0], x[2]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p[1] + i), _mm256_unpackhi_epi64(x[0], x[2]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p[2] + i), _mm256_unpacklo_epi64(x[1], x[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p[3] + i), _mm256_unpackhi_epi64(x[1], x[3]));
  }
  uint8_t* const rest[4] = {p[0] + i, p[1] + i, p[2] + i, p[3] + i};
  Split4(src + 4 * i, words - i, r, rest);
}

__attribute__((target("avx2"))) void Join4Avx2(const uint8_t* const* p, size_t words, unsigned r, uint8_t* dst) {
  size_t i = 0;
  const __m128i left = _mm_cvtsi32_si128(static_cast<int>(16 - r));
  const __m128i right = _mm_cvtsi32_si128(static_cast<int>(r));
  const __m256i upper = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (; i + 32 <= words; i += 32) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[0] + i));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[1] + i));
    const __m256i b2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[2] + i));
    const __m256i b3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[3] + i));
    const __m256i low01 = _mm256_unpacklo_epi8(b0, b1), high01 = _mm256_unpackhi_epi8(b0, b1);
    const __m256i low23 = _mm256_unpacklo_epi8(b2, b3), high23 = _mm256_unpackhi_epi8(b2, b3);
    // Words 0-3 | 16-19, 4-7 | 20-23, 8-11 | 24-27, 12-15 | 28-31.
    __m256i w[4] = {_mm256_unpacklo_epi16(low01, low23), _mm256_unpackhi_epi16(low01, low23),
                    _mm256_unpacklo_epi16(high01, high23), _mm256_unpackhi_epi16(high01, high23)};
    for (int k = 0; k < 4; ++k) {
      const __m256i rotated = _mm256_or_si256(_mm256_srl_epi16(w[k], right), _mm256_sll_epi16(w[k], left));
      w[k] = _mm256_or_si256(_mm256_and_si256(rotated, upper), _mm256_andnot_si256(upper, w[k]));
    }
    uint8_t* out = dst + 4 * i;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(w[0], w[1], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32), _mm256_permute2x128_si256(w[2], w[3], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64), _mm256_permute2x128_si256(w[0], w[1], 0x31));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 96), _mm256_permute2x128_si256(w[2], w[3], 0x31));
  }
  const uint8_t* const rest[4] = {p[0] + i, p[1] + i, p[2] + i, p[3] + i};
  Join4(rest, words - i, r, dst + 4 * i);
}
#endif

// Sign planes (fp8): plane 0 the low seven bits, plane 1 the top bit as 0 or 1.
void SplitSigns(const uint8_t* src, size_t n, uint8_t* p0, uint8_t* p1) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i seven = _mm_set1_epi8(0x7f);
  const __m128i zero = _mm_setzero_si128();
  for (; i + 16 <= n; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p0 + i), _mm_and_si128(v, seven));
    if (p1) _mm_storeu_si128(reinterpret_cast<__m128i*>(p1 + i), _mm_sub_epi8(zero, _mm_cmplt_epi8(v, zero)));
  }
#endif
  for (; i < n; ++i) {
    p0[i] = src[i] & 0x7f;
    if (p1) p1[i] = src[i] >> 7;
  }
}

// The inverse; p0 may be dst. Only bit 0 of a sign byte and the low seven
// bits of the other count, so every pair of planes decodes to something.
void JoinSigns(const uint8_t* p0, const uint8_t* p1, size_t n, uint8_t* dst) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i seven = _mm_set1_epi8(0x7f);
  const __m128i one = _mm_set1_epi8(1);
  for (; i + 16 <= n; i += 16) {
    const __m128i low = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + i)), seven);
    const __m128i sign = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + i)), one);
    // Sign bytes are 0 or 1 here, so a 16-bit shift by 7 moves each to
    // bit 7 of its own byte.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_or_si128(low, _mm_slli_epi16(sign, 7)));
  }
#endif
  for (; i < n; ++i) dst[i] = static_cast<uint8_t>((p0[i] & 0x7f) | (p1[i] & 1) << 7);
}

}  // namespace

void SplitPlanes(TransformId t, const uint8_t* src, size_t n, uint8_t* const* planes, IsaKernel kernel) {
  if (t == TransformId::kSignPlanes1) return SplitSigns(src, n, planes[0], planes[1]);
  const unsigned word = WordSize(t), r = RotationBits(t);
  if (r == 0) return GroupBytes(src, n, word, planes);
#if defined(__x86_64__)
  if (UsesAvx2(kernel)) {
    if (word == 2) Split2Avx2(src, n / 2, r, planes[0], planes[1]);
    else Split4Avx2(src, n / 4, r, planes);
    return;
  }
#endif
  if (word == 2) Split2(src, n / 2, r, planes[0], planes[1]);
  else Split4(src, n / 4, r, planes);
}

void JoinPlanes(TransformId t, const uint8_t* const* planes, size_t n, uint8_t* dst, IsaKernel kernel) {
  if (t == TransformId::kSignPlanes1) return JoinSigns(planes[0], planes[1], n, dst);
  const unsigned word = WordSize(t), r = RotationBits(t);
  if (r == 0) return UngroupBytes(planes, n, word, dst);
#if defined(__x86_64__)
  if (UsesAvx2(kernel)) {
    if (word == 2) Join2Avx2(planes[0], planes[1], n / 2, r, dst);
    else Join4Avx2(planes, n / 4, r, dst);
    return;
  }
#endif
  if (word == 2) Join2(planes[0], planes[1], n / 2, r, dst);
  else Join4(planes, n / 4, r, dst);
}

}  // namespace vramflow
