// SPDX-License-Identifier: MIT
// Cheap statistics that let the encoder choose a codec without trying them all.
//
// IsAllZero scans every byte (it decides zero runs, so it must be exact).
// AnalyzeChunk looks at a sample of at most kAnalysisSampleBytes and
// estimates, for each candidate word size, how many bits per byte an entropy
// coder would need on each byte plane.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "codecs/codec_ids.h"

namespace vramflow {

bool IsAllZero(std::span<const uint8_t> data);

inline constexpr size_t kAnalysisSampleBytes = 64 * 1024;

struct ChunkAnalysis {
  // Order-0 entropy (bits per byte) of the sampled bytes at position i mod 4,
  // at position i mod 2, and over all bytes.
  std::array<double, 4> entropy_mod4{};
  std::array<double, 2> entropy_mod2{};
  double entropy_all = 8.0;
  // Estimated compressed bits per input byte for word sizes 1, 2 and 4.
  double bits_word1 = 8.0;
  double bits_word2 = 8.0;
  double bits_word4 = 8.0;
  unsigned best_word = 1;  // 1 (no grouping), 2 or 4
  // For best_word 1: kSignPlanes1 where the bytes look like fp8 values of
  // both signs (each byte value about as frequent as its negation), else kNone.
  // For best_word 2 or 4: the planar transform with the smallest estimate,
  // byte grouping or bit planes with the best rotation (bit_planes.h), the
  // order-0 entropy of each of its planes (bits per byte) and the estimated
  // compressed bits per input byte.
  // Sparse words (kSparse2, kSparse4 with a rotation, sparse_words.h) where
  // enough of the sampled words are zero that leaving them out pays; the
  // plane entropies are then those of the non-zero words' planes.
  TransformId best_transform = TransformId::kNone;
  std::array<double, 4> plane_entropy{};
  double bits_best = 8.0;
  bool fp8_like = false;  // the sampled bytes look like fp8 values of both signs
};

// Planes (or whole chunks) whose entropy is at least this are stored raw.
inline constexpr double kIncompressibleBitsPerByte = 7.6;

// Which plane layouts the analysis may choose.
enum class PlanePolicy {
  // Only layouts that entropy-code no more planes than byte grouping would:
  // encoding and decoding cost what byte grouping costs.
  kKeepSpeed,
  // Any layout: bf16 and fp32 weights shrink by another 0.3-0.8% (what puts
  // vramflow ahead of ZipNN), for a second Huffman-coded plane (slower to
  // encode and decode).
  kSmallest,
};

ChunkAnalysis AnalyzeChunk(std::span<const uint8_t> data, PlanePolicy policy = PlanePolicy::kSmallest);

// Rotations (bit_planes.h) the analysis considers, 1..kMaxAnalysedRotation:
// enough for bf16, fp16 and fp32 tensors of every magnitude seen in training
// state; larger ones put constant exponent bits with the mantissa's top bits.
inline constexpr unsigned kMaxAnalysedRotation = 4;

// Order-0 entropy in bits per byte of a 256-bin histogram with `total` samples.
double HistogramEntropy(const uint32_t* histogram, uint64_t total);

}  // namespace vramflow
