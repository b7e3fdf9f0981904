// SPDX-License-Identifier: MIT
#include "datagen/model_data.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "common/endian.h"

namespace vramflow {
namespace {

uint64_t Mix64(uint64_t z) {  // splitmix64 finaliser
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Quantiles of N(0, 1) at 4096 equal-probability steps; a standard normal
// sample is a linear interpolation between two neighbours picked by 12
// random bits, the position between them by 40 more.
class NormalTable {
 public:
  static constexpr int kSteps = 4096;
  NormalTable() {
    for (int i = 0; i <= kSteps; ++i) {
      double p = (i + 0.5) / (kSteps + 1.0);
      q_[i] = Quantile(p);
    }
  }
  double Sample(uint64_t r) const {
    uint64_t index = r >> 52;  // 12 bits
    double frac = static_cast<double>((r >> 12) & ((1ULL << 40) - 1)) * (1.0 / (1ULL << 40));
    return q_[index] + (q_[index + 1] - q_[index]) * frac;
  }

 private:
  static double Quantile(double p) {  // bisection on the CDF; runs once
    double lo = -10, hi = 10;
    for (int it = 0; it < 100; ++it) {
      double mid = (lo + hi) / 2;
      double cdf = 0.5 * std::erfc(-mid / std::sqrt(2.0));
      (cdf < p ? lo : hi) = mid;
    }
    return (lo + hi) / 2;
  }
  std::array<double, kSteps + 1> q_{};
};

const NormalTable& Normal() {
  static const NormalTable table;  // immutable after construction
  return table;
}

uint64_t KindSalt(DataKind kind) { return 0x5bd1e995ULL * (static_cast<uint64_t>(kind) + 1); }

// The value of element `index` of a float-valued kind.
float ElementValue(DataKind kind, uint64_t seed, uint64_t index) {
  // bf16, fp16 and fp8 are copies of the fp32 weights: same sequence of values.
  DataKind source = (kind == DataKind::kBf16Weights || kind == DataKind::kFp16Weights || kind == DataKind::kFp8Weights)
                        ? DataKind::kFp32Weights
                        : kind;
  uint64_t r = Mix64(seed ^ KindSalt(source) ^ Mix64(index));
  double z = Normal().Sample(r);
  switch (source) {
    case DataKind::kAdamM:
      return static_cast<float>(z * 1e-3);
    case DataKind::kAdamV: {
      double g = z * 1e-3;
      return static_cast<float>(g * g);
    }
    default:
      return static_cast<float>(z * 0.02);
  }
}

uint32_t FloatBits(DataKind kind, float f) {
  if (kind == DataKind::kBf16Weights) return FloatToBf16(f);
  if (kind == DataKind::kFp16Weights) return FloatToFp16(f);
  if (kind == DataKind::kFp8Weights) return FloatToFp8E4M3(f * kFp8WeightScale);
  return std::bit_cast<uint32_t>(f);
}

// AdamW in binary32, as a training job runs it: the hyperparameters of a
// fine-tuning run (docs/DATA.md, "Training steps").
constexpr float kLearningRate = 4e-5f;
constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kEpsilon = 1e-8f, kWeightDecay = 0.01f;
constexpr uint64_t kGradientSalt = 0x2545f4914f6cdd1dULL;

// The element of a float kind after `step` optimizer steps.
float ElementValueAtStep(DataKind kind, uint64_t seed, uint32_t step, uint64_t index) {
  if (step == 0) return ElementValue(kind, seed, index);
  float w = ElementValue(DataKind::kFp32Weights, seed, index);
  float m = ElementValue(DataKind::kAdamM, seed, index);
  float v = ElementValue(DataKind::kAdamV, seed, index);
  for (uint32_t t = 1; t <= step; ++t) {
    const float g = static_cast<float>(Normal().Sample(Mix64(seed ^ kGradientSalt ^ Mix64(index) ^ Mix64(t))) * 1e-3);
    m = kBeta1 * m + (1 - kBeta1) * g;
    v = kBeta2 * v + (1 - kBeta2) * g * g;
    // The generator's moments start independent of each other, so m/sqrt(v)
    // has heavy tails a real run's moments do not: bound it as Adam's own
    // updates are in practice.
    const float update = std::clamp(m / (std::sqrt(v) + kEpsilon), -1.0f, 1.0f);
    w -= kLearningRate * (update + kWeightDecay * w);
  }
  switch (kind) {
    case DataKind::kAdamM:
      return m;
    case DataKind::kAdamV:
      return v;
    default:
      return w;
  }
}

unsigned ElementSize(DataKind kind) {
  switch (kind) {
    case DataKind::kBf16Weights:
    case DataKind::kFp16Weights:
      return 2;
    case DataKind::kFp8Weights:
      return 1;
    case DataKind::kZeros:
    case DataKind::kRandom:
      return 8;
    default:
      return 4;
  }
}

}  // namespace

uint16_t FloatToBf16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);                                          // round to nearest even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

uint16_t FloatToFp16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  uint32_t sign = (bits >> 16) & 0x8000;
  uint32_t abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);   // NaN
  if (abs >= 0x47800000) return static_cast<uint16_t>(sign | 0x7c00);  // >= 65536: infinity
  if (abs >= 0x38800000) {  // a normal half: rebias the exponent, round to nearest even
    uint32_t m = abs - ((127u - 15u) << 23);
    m += 0xfff + ((m >> 13) & 1);
    return static_cast<uint16_t>(sign | (m >> 13));  // a carry may reach infinity, as it should
  }
  if (abs < 0x33000000) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
  // A subnormal half counts units of 2^-24.
  uint32_t exponent = abs >> 23;
  uint32_t mant = (abs & 0x7fffff) | 0x800000;
  uint32_t shift = 126 - exponent;
  uint32_t half = mant >> shift;
  uint32_t rest = mant & ((1u << shift) - 1);
  uint32_t midpoint = 1u << (shift - 1);
  if (rest > midpoint || (rest == midpoint && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

uint8_t FloatToFp8E4M3(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint8_t>(bits >> 24 & 0x80);
  const uint32_t abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7f;   // NaN
  if (abs >= 0x43e00000) return sign | 0x7e;  // >= 448 (and infinity): saturated
  if (abs >= 0x3c800000) {                    // >= 2^-6, a normal e4m3: rebias the exponent, round to nearest even
    uint32_t m = abs - ((127u - 7u) << 23);
    m += 0x7ffff + ((m >> 20) & 1);
    return static_cast<uint8_t>(sign | (m >> 20));  // below 448, so at most 448 after rounding
  }
  // A subnormal counts units of 2^-9; 8 units is the smallest normal, whose
  // encoding follows the subnormals' directly.
  return static_cast<uint8_t>(sign | static_cast<uint8_t>(std::nearbyint(std::bit_cast<float>(abs) * 512.0f)));
}

std::vector<DataKind> AllDataKinds() {
  return {DataKind::kFp32Weights, DataKind::kBf16Weights, DataKind::kFp16Weights, DataKind::kFp8Weights,
          DataKind::kAdamM,       DataKind::kAdamV,       DataKind::kZeros,       DataKind::kRandom};
}

std::string DataKindName(DataKind kind) {
  switch (kind) {
    case DataKind::kFp32Weights:
      return "fp32";
    case DataKind::kBf16Weights:
      return "bf16";
    case DataKind::kFp16Weights:
      return "fp16";
    case DataKind::kFp8Weights:
      return "fp8";
    case DataKind::kAdamM:
      return "adam-m";
    case DataKind::kAdamV:
      return "adam-v";
    case DataKind::kZeros:
      return "zeros";
    case DataKind::kRandom:
      return "random";
  }
  return "?";
}

std::optional<DataKind> ParseDataKind(std::string_view name) {
  for (DataKind k : AllDataKinds())
    if (DataKindName(k) == name) return k;
  return std::nullopt;
}

void GenerateModelData(DataKind kind, uint64_t seed, uint64_t offset, std::span<uint8_t> out) {
  GenerateTrainingState(kind, seed, 0, offset, out);
}

void GenerateTrainingState(DataKind kind, uint64_t seed, uint32_t step, uint64_t offset, std::span<uint8_t> out) {
  if (kind == DataKind::kZeros) {
    std::memset(out.data(), 0, out.size());
    return;
  }
  const unsigned size = ElementSize(kind);
  size_t pos = 0;
  uint64_t index = offset / size;
  unsigned skip = static_cast<unsigned>(offset % size);
  while (pos < out.size()) {
    uint8_t element[8];
    if (kind == DataKind::kRandom) StoreLE64(element, Mix64(seed ^ KindSalt(kind) ^ Mix64(index)));
    else if (size == 1) element[0] = static_cast<uint8_t>(FloatBits(kind, ElementValueAtStep(kind, seed, step, index)));
    else if (size == 2)
      StoreLE16(element, static_cast<uint16_t>(FloatBits(kind, ElementValueAtStep(kind, seed, step, index))));
    else StoreLE32(element, FloatBits(kind, ElementValueAtStep(kind, seed, step, index)));
    size_t take = std::min<size_t>(size - skip, out.size() - pos);
    std::memcpy(out.data() + pos, element + skip, take);
    pos += take;
    skip = 0;
    ++index;
  }
}

}  // namespace vramflow
