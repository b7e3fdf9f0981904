// SPDX-License-Identifier: MIT
// Sparse words: the words of a chunk that are all zero left out.
//
// Gradients and Adam moments of a language model hold long runs of exact
// zeros (the embedding rows of tokens a step did not see, and their moments
// while they have never been seen). In byte planes each zero word still
// costs its mantissa bytes, which are stored raw: about 24 bits per fp32
// zero. The sparse-words transforms (docs/FORMAT.md, section 8.6) keep a
// bitmap of the non-zero words instead and byte-group only those.
//
// The bitmap: bit (i mod 8) of byte floor(i / 8) is 1 when word i is not
// all zero bytes; ceil(words / 8) bytes, unused high bits of the last byte 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace vramflow {

inline size_t SparseMaskBytes(size_t words) { return (words + 7) / 8; }

// Writes the bitmap of the `words` words of `word` (2 or 4) bytes at `src`
// into `mask` (SparseMaskBytes(words) bytes); returns how many are non-zero.
size_t BuildSparseMask(const uint8_t* src, size_t words, unsigned word, uint8_t* mask);

// Copies the non-zero words among words [first, first + count) to `out`,
// in order; `first` is a multiple of 8. Returns the bytes written.
size_t CompactWords(const uint8_t* src, size_t first, size_t count, unsigned word, const uint8_t* mask, uint8_t* out);

// Checks a bitmap read from a payload (its unused high bits must be zero)
// and counts the non-zero words it marks.
Result<size_t> CountSparseMask(const uint8_t* mask, size_t words);

// The inverse of CompactWords over the whole chunk, in place: the `kept`
// non-zero words lie, in order, at the end of dst's `words` words (from word
// words - kept on); every word is moved to its place and the others zeroed.
void ExpandWords(const uint8_t* mask, size_t words, size_t kept, unsigned word, uint8_t* dst);

}  // namespace vramflow
