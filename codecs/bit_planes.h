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
// SplitPlanes / JoinPlanes also do plain byte grouping (r = 0), so callers
// handle every planar transform the same way.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/codec_ids.h"

namespace vramflow {

// Splits the first (n / w) * w bytes of src into w planes, w = WordSize(t),
// t a planar transform (byte grouping or bit planes). planes[p] must have
// room for n / w bytes.
void SplitPlanes(TransformId t, const uint8_t* src, size_t n, uint8_t* const* planes);

// Inverse of SplitPlanes: writes n / w words into dst.
void JoinPlanes(TransformId t, const uint8_t* const* planes, size_t n, uint8_t* dst);

// The rotation on one 16-bit half, for the analysis and for tests.
inline uint16_t RotateLeft16(uint16_t v, unsigned r) {
  return r == 0 ? v : static_cast<uint16_t>(v << r | v >> (16 - r));
}

}  // namespace vramflow
