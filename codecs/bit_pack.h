// SPDX-License-Identifier: MIT
// Bit packing of a byte buffer (codec id "bitpack").
//
// After a bit-plane rotation (bit_planes.h) the sign/mantissa plane of a
// float tensor holds a few bits that are the same in every byte of a chunk
// (the exponent's top bits) and bits that are close to uniform (sign, low
// mantissa). An entropy coder gets that plane down to the varying bits, but
// at Huffman speed; this codec gets the same size at a fraction of the cost:
// it drops the bits that are constant across the buffer and stores the
// others at a fixed width.
//
// Payload layout (docs/FORMAT.md, "bitpack"):
//   [u8 constant_mask][u8 constant_bits][packed]
// where packed holds, for every input byte in order, its bits at the
// positions not in constant_mask (lowest first), w = 8 - popcount(mask)
// bits per byte, as a little-endian bit stream (first byte's bits lowest),
// ceil(n * w / 8) bytes, unused high bits of the last byte zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "common/cpu_features.h"
#include "common/status.h"

namespace vramflow {

inline constexpr size_t kBitPackHeaderBytes = 2;

// Bits that are the same in every byte of `data` (a mask; 0xff for empty data).
uint8_t ConstantBits(std::span<const uint8_t> data);

// Largest payload BitPackCompress can produce for `size` input bytes, with
// the 8 bytes of slack its word stores need.
size_t BitPackBound(size_t size);

// Packs `src` into `dst` (capacity >= BitPackBound(src.size())), dropping the
// bits constant across `src`; returns the payload size. `constant_mask`, when
// given, is ConstantBits(src), which saves a pass over `src`. `kernel` packs
// whole groups of eight bytes: kAuto takes BMI2's PEXT (one instruction a
// group) where the CPU has a fast one, shifts and masks (kBaseline) elsewhere.
Result<size_t> BitPackCompress(std::span<const uint8_t> src, std::span<uint8_t> dst,
                               std::optional<uint8_t> constant_mask = std::nullopt,
                               IsaKernel kernel = IsaKernel::kAuto);

// The payload BitPackCompress makes of the bytes src[i] >> 7 (the sign
// plane of fp8 data, bit_planes.h), made from `src` itself in one pass,
// without those bytes: [0xfe][0][one bit per byte], or [0xff][sign] when
// every top bit is the same. `dst` must hold BitPackTopBitsBound(src.size());
// returns the payload size.
size_t BitPackTopBitsBound(size_t size);
size_t BitPackTopBits(std::span<const uint8_t> src, std::span<uint8_t> dst);

// Unpacks `src` into exactly dst.size() bytes; a payload of the wrong size,
// constant bits outside the mask or non-zero padding bits are corruption.
// `kernel` as for BitPackCompress, with PDEP.
Status BitPackDecompress(std::span<const uint8_t> src, std::span<uint8_t> dst, IsaKernel kernel = IsaKernel::kAuto);

}  // namespace vramflow
