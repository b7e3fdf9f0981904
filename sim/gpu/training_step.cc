// SPDX-License-Identifier: MIT
#include "sim/gpu/training_step.h"

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace vramflow {
namespace {

constexpr uint64_t kPiece = 4 << 20;
constexpr uint32_t kLowBitsMask = (1u << 10) - 1;

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// About half of the 4-byte words of `bytes` (which starts word-aligned)
// get their low 10 bits flipped at random.
void PerturbLowBits(std::span<uint8_t> bytes, uint64_t seed) {
  uint64_t state = seed;
  const size_t words = bytes.size() / 4;
  for (size_t w = 0; w < words; w += 4) {
    const uint64_t r = SplitMix64(&state);
    for (size_t k = 0; k < 4 && w + k < words; ++k) {
      const uint32_t draw = static_cast<uint32_t>(r >> (16 * k)) & 0xffff;
      if ((draw & 0x8000) == 0) continue;
      uint32_t word;
      std::memcpy(&word, bytes.data() + 4 * (w + k), 4);
      word ^= (draw & kLowBitsMask) | 1;  // at least one bit: the word changes
      std::memcpy(bytes.data() + 4 * (w + k), &word, 4);
    }
  }
}

enum class Change { kNone, kPerturb, kRewrite, kFillEighth };

Change ChangeFor(DataKind kind) {
  switch (kind) {
    case DataKind::kFp32Weights:
    case DataKind::kAdamM:
    case DataKind::kAdamV:
      return Change::kPerturb;
    case DataKind::kFp16Weights:
    case DataKind::kFp8Weights:
    case DataKind::kRandom:
      return Change::kRewrite;
    case DataKind::kZeros:
      return Change::kFillEighth;
    case DataKind::kBf16Weights:
      return Change::kNone;
  }
  return Change::kNone;
}

}  // namespace

TrainingStepReport ApplyTrainingStep(SimProcess& process, uint64_t seed) {
  TrainingStepReport report;
  struct Piece {
    size_t bo;
    uint64_t offset;
    uint64_t size;
    Change change;
  };
  std::vector<Piece> pieces;
  const std::vector<SimBoSpec>& specs = process.specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const Change change = ChangeFor(specs[i].kind);
    if (change == Change::kNone) continue;
    const uint64_t end = change == Change::kFillEighth ? specs[i].size / 8 / 4096 * 4096 : specs[i].size;
    (change == Change::kPerturb ? report.perturbed_bytes : report.rewritten_bytes) += end;
    for (uint64_t off = 0; off < end; off += kPiece)
      pieces.push_back(Piece{i, off, std::min(kPiece, end - off), change});
  }
  oneapi::tbb::parallel_for(size_t{0}, pieces.size(), [&](size_t p) {
    const Piece& piece = pieces[p];
    const SimBoSpec& spec = specs[piece.bo];
    std::span<uint8_t> bytes = process.bytes(piece.bo).subspan(piece.offset, piece.size);
    const uint64_t piece_seed = seed * 0x100000001b3ull ^ (uint64_t{piece.bo} << 40) ^ piece.offset;
    switch (piece.change) {
      case Change::kPerturb:
        PerturbLowBits(bytes, piece_seed);
        break;
      case Change::kRewrite:
        GenerateModelData(spec.kind, spec.seed + seed * 7919, piece.offset, bytes);
        break;
      case Change::kFillEighth:
        GenerateModelData(DataKind::kFp16Weights, seed * 7919 + piece.bo, piece.offset, bytes);
        break;
      case Change::kNone:
        break;
    }
  });
  return report;
}

}  // namespace vramflow
