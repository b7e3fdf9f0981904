// SPDX-License-Identifier: MIT
// Order-0 canonical Huffman coding of a byte buffer (codec id "huffman").
//
// Byte planes of float tensors (the sign/exponent bytes) are close to i.i.d.
// with a skewed distribution: an order-0 entropy coder gets within a few
// percent of their entropy, while an LZ coder spends most of its time
// searching for matches that do not help. This coder is built for that
// case: one pass to count, one to encode; decoding uses a 2^12-entry table
// of up to three symbols per lookup, and four interleaved bit streams for
// instruction-level parallelism.
//
// Payload layout (docs/FORMAT.md, "huffman"):
//   mode 0 (one distinct byte value): [0][symbol]
//   mode 1: [1][128 bytes of 4-bit code lengths][3 x u32 stream sizes]
//           [stream 0][stream 1][stream 2][stream 3][8 zero bytes]
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/cpu_features.h"
#include "common/status.h"

namespace vramflow {

inline constexpr unsigned kHuffmanMaxCodeLength = 11;
inline constexpr size_t kHuffmanLengthTableBytes = 128;  // 256 code lengths, 4 bits each

// Average code length, in bits per symbol, of the code HuffmanCompress would
// build for bytes with these counts (0 for fewer than two distinct values):
// what the encoder's analysis uses to compare plane layouts. The counts'
// total must be below 2^56.
double HuffmanBitsPerSymbol(std::span<const uint64_t, 256> counts);

// Largest payload HuffmanCompress can produce for `size` input bytes.
size_t HuffmanBound(size_t size);

// Encodes payloads. It keeps a table indexed by symbol pairs, for two jobs:
// - counting: a large payload whose first bytes hold few distinct values
//   (bf16's Huffman plane) is counted by pairs, one increment per two bytes;
// - coding: the table holds the codes of symbol pairs, so that the encoding
//   loop looks up two symbols at a time (bf16 chunks encode about a tenth
//   faster); refilled per payload, in the rows of the symbols present, and
//   used where that costs little against the payload's length.
// The payload is the same either way.
// Not thread-safe: one per thread (BlockCompressor holds one).
class HuffmanEncoder {
 public:
  // `kernel`: which build of the encoding loops runs (cpu_features.h); the
  // payloads are the same.
  explicit HuffmanEncoder(IsaKernel kernel = IsaKernel::kAuto);
  // Encodes `src` into `dst` (capacity >= HuffmanBound(src.size()));
  // returns the payload size.
  Result<size_t> Compress(std::span<const uint8_t> src, std::span<uint8_t> dst);

  // Memory an encoder holds once it has used the pair table.
  static constexpr size_t kMemoryBytes = size_t{1} << 18;
  // Payloads of at least this many bytes may be counted by pairs; the first
  // kPairCountingSampleBytes decide.
  static constexpr size_t kPairCountingMinBytes = size_t{256} << 10;
  static constexpr size_t kPairCountingSampleBytes = size_t{16} << 10;
  // Payloads of at least this many bytes not counted by pairs are counted
  // stream by stream, and each stream coded in its final place (the streams
  // are then at least 2 KiB: a stream's last stores reach 8 bytes past it).
  static constexpr size_t kCodeInPlaceMinBytes = size_t{64} << 10;

 private:
  // The table, allocated (zeroed) on first use: an encoder that never codes
  // Huffman holds none.
  void AllocatePairTable() {
    if (pairs_.empty()) pairs_.resize(kMemoryBytes / sizeof(uint32_t));
  }
  // Zeroes the code entries that payloads coded by pairs have left since
  // the last count by pairs, which counting needs (clearing them after each
  // payload would cost as much again as filling them).
  void ClearPairCodes();

  // Indexed by symbol | next symbol << 8. Zero but for code entries in the
  // rows of symbols marked in coded_, from coded_low_ to coded_high_.
  std::vector<uint32_t> pairs_;
  std::array<bool, 256> coded_{};
  int coded_low_ = 255;
  int coded_high_ = 0;
  bool bmi2_;       // the encoding loops built for BMI2
  bool avx2_;       // the pair table filled with AVX2
  bool runs_here_;  // the CPU runs them (a forced kBmi2 may not)
};

// One payload with an encoder of its own (tests, one-off uses).
Result<size_t> HuffmanCompress(std::span<const uint8_t> src, std::span<uint8_t> dst);

// Decodes payloads. It keeps the decode table of the last code it built and
// reuses it for a payload with the same code lengths (building one costs
// about as much as decoding 15k symbols). On float planes the lengths of
// rare symbols differ from chunk to chunk, so there a table is built per
// plane; data with few distinct values reuses it.
// Not thread-safe: one per thread (BlockDecompressor holds one).
class HuffmanDecoder {
 public:
  // `kernel`: which build of the decoding loop runs (cpu_features.h).
  explicit HuffmanDecoder(IsaKernel kernel = IsaKernel::kAuto);
  // Decodes `src` into exactly dst.size() bytes; malformed input (incomplete
  // code, bad sizes, streams that end early or late) is a corruption error.
  Status Decompress(std::span<const uint8_t> src, std::span<uint8_t> dst);

  // Lookup width of the decode table, whose entries give up to three symbols
  // whose codes fit in that many bits.
  static constexpr unsigned kTableBits = 12;
  // Memory a decoder holds.
  static constexpr size_t kMemoryBytes = (size_t{1} << kTableBits) * sizeof(uint32_t) + 512;

 private:
  Status BuildTable(std::span<const uint8_t, kHuffmanLengthTableBytes> packed_lengths);

  std::vector<uint32_t> table_;
  std::array<uint8_t, 256> lengths_{};                              // of the code table_ decodes
  std::array<uint8_t, kHuffmanLengthTableBytes> packed_lengths_{};  // as the payload gave them
  bool built_ = false;
  bool bmi2_;       // the decoding loop built for BMI2
  bool runs_here_;  // the CPU runs it (a forced kBmi2 may not)
};

// HuffmanDecoder::Decompress with a decoder of its own.
Status HuffmanDecompress(std::span<const uint8_t> src, std::span<uint8_t> dst);

}  // namespace vramflow
