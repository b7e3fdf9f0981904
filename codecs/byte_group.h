// SPDX-License-Identifier: MIT
// Byte grouping ("shuffle") for 2- and 4-byte words.
//
// Floating-point tensors keep sign and exponent in the top byte of each word;
// those bytes are highly repetitive while mantissa bytes are close to random.
// Grouping byte i of every word into plane i puts the repetitive bytes next to
// each other so an entropy coder can shrink them and the random planes can be
// stored as they are.
//
// Plane p holds byte p (little-endian position) of each of the n / word
// complete words. The n % word tail bytes are not part of any plane.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vramflow {

// Splits the first (n / word) * word bytes of src into `word` planes.
// planes[p] must have room for n / word bytes. word is 2 or 4.
void GroupBytes(const uint8_t* src, size_t n, unsigned word, uint8_t* const* planes);

// Inverse of GroupBytes: interleaves planes back into dst (n / word words).
void UngroupBytes(const uint8_t* const* planes, size_t n, unsigned word, uint8_t* dst);

}  // namespace vramflow
