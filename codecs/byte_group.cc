#include "codecs/byte_group.h"

#include <cstring>

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

void Group4(const uint8_t* src, size_t words, uint8_t* p0, uint8_t* p1, uint8_t* p2, uint8_t* p3) {
  for (size_t i = 0; i < words; ++i) {
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

void Ungroup4(const uint8_t* p0, const uint8_t* p1, const uint8_t* p2, const uint8_t* p3, size_t words,
              uint8_t* dst) {
  for (size_t i = 0; i < words; ++i) {
    uint32_t w = static_cast<uint32_t>(p0[i]) | static_cast<uint32_t>(p1[i]) << 8 |
                 static_cast<uint32_t>(p2[i]) << 16 | static_cast<uint32_t>(p3[i]) << 24;
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
