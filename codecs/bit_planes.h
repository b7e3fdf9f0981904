// SPDX-License-Identifier: MIT
// Bit planes for floats: the sign bit moved out of the exponent's byte.
//
// Byte grouping (byte_group.h) splits words at byte boundaries, which for
// floats cut through the fields: bf16's high byte holds the sign and seven
// exponent bits, its low byte the exponent's last bit and the mantissa. The
// bit-plane transforms rotate the 16 bits that hold sign and exponent (the
// whole word for 2-byte words, the upper half for 4-byte words) left by r
// bits before grouping. With r = 1 the exponent gets a byte of its own and
// the sign joins the low mantissa bits; larger r move more of the exponent's
// constant high bits out, next to the sign, and bring the top mantissa bits,
// whose distribution depends on the exponent, into the exponent's byte.
// The encoder picks r per chunk from a sample (chunk_analysis.h).
//
// For 1-byte floats (fp8) the sign planes transform takes the top bit of
// each byte out: plane 0 holds the seven bits of exponent and mantissa, whose
// code then has half the symbols (and so fits Huffman's length limit with
// less loss), plane 1 the sign as a byte 0 or 1, which bitpack stores at one
// bit (BitPackTopBits makes that payload straight from the bytes).
//
// SplitPlanes / JoinPlanes also do plain byte grouping (r = 0), so callers
// handle every planar transform the same way.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/codec_ids.h"
#include "common/cpu_features.h"

namespace vramflow {

// Splits the first (n / w) * w bytes of src into PlaneCount(t) planes,
// w = WordSize(t), t a planar transform (byte grouping, bit planes or sign
// planes). planes[p] must have room for n / w bytes. For sign planes,
// planes[1] may be null: only the seven-bit plane is made. `kernel`: which
// build of the bit-plane loops runs (cpu_features.h; AVX2 takes twice the
// bytes a step); the planes are the same.
void SplitPlanes(TransformId t, const uint8_t* src, size_t n, uint8_t* const* planes,
                 IsaKernel kernel = IsaKernel::kAuto);

// Inverse of SplitPlanes: writes n / w words into dst. For sign planes,
// planes[0] may be dst itself, and only bit 0 of a sign byte and the low
// seven bits of the other plane's bytes are used.
void JoinPlanes(TransformId t, const uint8_t* const* planes, size_t n, uint8_t* dst,
                IsaKernel kernel = IsaKernel::kAuto);

// The rotation on one 16-bit half, for the analysis and for tests.
inline uint16_t RotateLeft16(uint16_t v, unsigned r) {
  return r == 0 ? v : static_cast<uint16_t>(v << r | v >> (16 - r));
}

}  // namespace vramflow
