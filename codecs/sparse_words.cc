// SPDX-License-Identifier: MIT
#include "codecs/sparse_words.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

namespace vramflow {
namespace {

bool IsZeroWord(const uint8_t* p, unsigned word) {
  if (word == 4) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v == 0;
  }
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v == 0;
}

}  // namespace

size_t BuildSparseMask(const uint8_t* src, size_t words, unsigned word, uint8_t* mask) {
  size_t kept = 0;
  for (size_t g = 0; g * 8 < words; ++g) {
    const size_t n = std::min<size_t>(8, words - g * 8);
    unsigned bits = 0;
    const uint8_t* p = src + g * 8 * word;
    for (size_t k = 0; k < n; ++k) bits |= static_cast<unsigned>(!IsZeroWord(p + k * word, word)) << k;
    mask[g] = static_cast<uint8_t>(bits);
    kept += static_cast<size_t>(std::popcount(bits));
  }
  return kept;
}

size_t CompactWords(const uint8_t* src, size_t first, size_t count, unsigned word, const uint8_t* mask, uint8_t* out) {
  size_t pos = 0;
  for (size_t i = first; i < first + count;) {
    const unsigned bits = mask[i / 8];
    const size_t n = std::min<size_t>(8, first + count - i);
    if (bits == 0xff && n == 8) {  // a group of non-zero words
      std::memcpy(out + pos, src + i * word, 8 * word);
      pos += 8 * word;
    } else if (bits != 0) {
      for (size_t k = 0; k < n; ++k)
        if (bits >> k & 1) {
          std::memcpy(out + pos, src + (i + k) * word, word);
          pos += word;
        }
    }
    i += n;
  }
  return pos;
}

Result<size_t> CountSparseMask(const uint8_t* mask, size_t words) {
  const size_t bytes = SparseMaskBytes(words);
  size_t kept = 0;
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t v;
    std::memcpy(&v, mask + i, 8);
    kept += static_cast<size_t>(std::popcount(v));
  }
  for (size_t i = bytes / 8 * 8; i < bytes; ++i) kept += static_cast<size_t>(std::popcount(mask[i]));
  if (words % 8 && mask[bytes - 1] >> (words % 8))
    return Status::Corruption("sparse-words bitmap marks words past the chunk's " + std::to_string(words));
  return kept;
}

void ExpandWords(const uint8_t* mask, size_t words, size_t kept, unsigned word, uint8_t* dst) {
  // Word j of the kept ones sits at word (words - kept + j), never before its
  // place: moving forward reads each one before anything overwrites it, and
  // a move is by whole words (no partial overlap).
  size_t from = (words - kept) * word;
  for (size_t i = 0; i < words;) {
    const unsigned bits = mask[i / 8];
    const size_t n = std::min<size_t>(8, words - i);
    uint8_t* at = dst + i * word;
    if (bits == 0) {
      std::memset(at, 0, n * word);
    } else if (bits == 0xff && n == 8) {
      if (dst + from != at) std::memmove(at, dst + from, 8 * word);
      from += 8 * word;
    } else {
      for (size_t k = 0; k < n; ++k, at += word) {
        if (bits >> k & 1) {
          uint8_t w[4];
          std::memcpy(w, dst + from, word);
          std::memcpy(at, w, word);
          from += word;
        } else {
          std::memset(at, 0, word);
        }
      }
    }
    i += n;
  }
}

}  // namespace vramflow
