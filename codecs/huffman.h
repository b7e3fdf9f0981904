// SPDX-License-Identifier: MIT
// Order-0 canonical Huffman coding of a byte buffer (codec id "huffman").
//
// Byte planes of float tensors (the sign/exponent bytes) are close to i.i.d.
// with a skewed distribution: an order-0 entropy coder gets within a few
// percent of their entropy, while an LZ coder spends most of its time
// searching for matches that do not help. This coder is built for that
// case: one pass to count, one to encode; decoding uses a 2^11-entry table
// and four interleaved bit streams for instruction-level parallelism.
//
// Payload layout (docs/FORMAT.md, "huffman"):
//   mode 0 (one distinct byte value): [0][symbol]
//   mode 1: [1][128 bytes of 4-bit code lengths][3 x u32 stream sizes]
//           [stream 0][stream 1][stream 2][stream 3][8 zero bytes]
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"

namespace vramflow {

inline constexpr unsigned kHuffmanMaxCodeLength = 11;

// Average code length, in bits per symbol, of the code HuffmanCompress would
// build for bytes with these counts (0 for fewer than two distinct values):
// what the encoder's analysis uses to compare plane layouts.
double HuffmanBitsPerSymbol(std::span<const uint64_t, 256> counts);

// Largest payload HuffmanCompress can produce for `size` input bytes.
size_t HuffmanBound(size_t size);

// Encodes `src` into `dst` (capacity >= HuffmanBound(src.size())); returns
// the payload size.
Result<size_t> HuffmanCompress(std::span<const uint8_t> src, std::span<uint8_t> dst);

// Decodes `src` into exactly dst.size() bytes; malformed input (incomplete
// code, bad sizes, streams that end early or late) is a corruption error.
Status HuffmanDecompress(std::span<const uint8_t> src, std::span<uint8_t> dst);

}  // namespace vramflow
