// SPDX-License-Identifier: MIT
// Model-like test data: determinism, random access, value statistics and the
// fp32 -> bf16 / fp16 rounding conversions.
#include "datagen/model_data.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/endian.h"

namespace vramflow {
namespace {

std::vector<uint8_t> Generate(DataKind kind, uint64_t seed, uint64_t offset, size_t size) {
  std::vector<uint8_t> out(size, 0xCD);
  GenerateModelData(kind, seed, offset, out);
  return out;
}

std::vector<float> Floats(DataKind kind, uint64_t seed, size_t count) {
  std::vector<uint8_t> bytes = Generate(kind, seed, 0, count * 4);
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = std::bit_cast<float>(LoadLE32(bytes.data() + 4 * i));
  return out;
}

std::vector<uint16_t> Halves(DataKind kind, uint64_t seed, size_t count) {
  std::vector<uint8_t> bytes = Generate(kind, seed, 0, count * 2);
  std::vector<uint16_t> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = LoadLE16(bytes.data() + 2 * i);
  return out;
}

struct Moments {
  double mean = 0, stddev = 0;
};
Moments Measure(const std::vector<float>& v) {
  double sum = 0, sq = 0;
  for (float f : v) sum += f;
  Moments m;
  m.mean = sum / static_cast<double>(v.size());
  for (float f : v) sq += (f - m.mean) * (f - m.mean);
  m.stddev = std::sqrt(sq / static_cast<double>(v.size()));
  return m;
}

TEST(ModelDataTest, KindNamesRoundTrip) {
  EXPECT_EQ(AllDataKinds().size(), 8u);
  for (DataKind kind : AllDataKinds()) {
    std::optional<DataKind> parsed = ParseDataKind(DataKindName(kind));
    ASSERT_TRUE(parsed.has_value()) << DataKindName(kind);
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(DataKindName(DataKind::kBf16Weights), "bf16");
  EXPECT_EQ(DataKindName(DataKind::kAdamV), "adam-v");
  EXPECT_FALSE(ParseDataKind("fp64").has_value());
  EXPECT_FALSE(ParseDataKind("").has_value());
}

TEST(ModelDataTest, SameSeedGivesSameBytes) {
  for (DataKind kind : AllDataKinds()) {
    EXPECT_EQ(Generate(kind, 42, 0, 65536), Generate(kind, 42, 0, 65536)) << DataKindName(kind);
    EXPECT_EQ(Generate(kind, 42, 1001, 333), Generate(kind, 42, 1001, 333)) << DataKindName(kind);
  }
}

TEST(ModelDataTest, DifferentSeedGivesDifferentBytes) {
  for (DataKind kind : AllDataKinds()) {
    if (kind == DataKind::kZeros) continue;
    std::vector<uint8_t> a = Generate(kind, 42, 0, 65536), b = Generate(kind, 43, 0, 65536);
    size_t same = 0;
    for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
    // Sign/exponent bytes repeat between seeds; mantissas must not.
    EXPECT_LT(same, a.size() / 2) << DataKindName(kind);
  }
}

TEST(ModelDataTest, KindsDifferFromEachOther) {
  std::vector<std::vector<uint8_t>> all;
  for (DataKind kind : AllDataKinds()) all.push_back(Generate(kind, 7, 0, 4096));
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j) EXPECT_NE(all[i], all[j]) << i << " vs " << j;
}

TEST(ModelDataTest, ZerosAreZeros) {
  std::vector<uint8_t> z = Generate(DataKind::kZeros, 5, 12345, 10000);
  for (uint8_t b : z) ASSERT_EQ(b, 0);
}

TEST(ModelDataTest, RandomAccessMatchesOneLongGeneration) {
  const size_t total = 100000;
  for (DataKind kind : AllDataKinds()) {
    std::vector<uint8_t> whole = Generate(kind, 99, 0, total);
    for (uint64_t k : {0, 1, 2, 3, 5, 6, 7, 8, 9, 4095, 4096, 4097, 33333, 65535, 99990}) {
      for (size_t len : {1, 2, 3, 7, 4096, 10}) {
        if (k + len > total) continue;
        std::vector<uint8_t> part = Generate(kind, 99, k, len);
        ASSERT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + static_cast<ptrdiff_t>(k)))
            << DataKindName(kind) << " offset " << k << " length " << len;
      }
    }
    // A large offset far beyond what was generated is also consistent.
    const uint64_t far = (uint64_t{1} << 40) + 3;
    std::vector<uint8_t> a = Generate(kind, 99, far, 64);
    std::vector<uint8_t> b = Generate(kind, 99, far + 5, 59);
    EXPECT_TRUE(std::equal(b.begin(), b.end(), a.begin() + 5)) << DataKindName(kind);
  }
}

TEST(ModelDataTest, Fp32WeightsLookLikeNormal0_02) {
  std::vector<float> v = Floats(DataKind::kFp32Weights, 1, 1 << 18);
  Moments m = Measure(v);
  EXPECT_LT(std::abs(m.mean), 0.02 * 0.05);
  EXPECT_NEAR(m.stddev, 0.02, 0.02 * 0.05);
  size_t negative = 0;
  for (float f : v) {
    ASSERT_TRUE(std::isfinite(f));
    negative += f < 0;
  }
  EXPECT_NEAR(static_cast<double>(negative) / static_cast<double>(v.size()), 0.5, 0.01);
}

TEST(ModelDataTest, AdamMomentsHaveTheirScales) {
  std::vector<float> m1 = Floats(DataKind::kAdamM, 1, 1 << 18);
  Moments m = Measure(m1);
  EXPECT_NEAR(m.stddev, 1e-3, 1e-3 * 0.05);
  EXPECT_LT(std::abs(m.mean), 1e-3 * 0.05);

  std::vector<float> v = Floats(DataKind::kAdamV, 1, 1 << 18);
  double sum = 0;
  for (float f : v) {
    ASSERT_TRUE(std::isfinite(f));
    ASSERT_GT(f, 0.0f);
    sum += f;
  }
  // E[(N(0, 1e-3))^2] = 1e-6.
  EXPECT_NEAR(sum / static_cast<double>(v.size()), 1e-6, 1e-6 * 0.05);
}

TEST(ModelDataTest, HalfPrecisionKindsAreRoundedFp32Weights) {
  const size_t n = 1 << 16;
  for (uint64_t seed : {1, 2}) {
    std::vector<float> f = Floats(DataKind::kFp32Weights, seed, n);
    std::vector<uint16_t> bf = Halves(DataKind::kBf16Weights, seed, n);
    std::vector<uint16_t> hf = Halves(DataKind::kFp16Weights, seed, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(bf[i], FloatToBf16(f[i])) << "bf16 element " << i;
      ASSERT_EQ(hf[i], FloatToFp16(f[i])) << "fp16 element " << i;
    }
  }
}

TEST(ModelDataTest, Fp8KindIsScaledRoundedFp32Weights) {
  const size_t n = 1 << 16;
  std::vector<float> f = Floats(DataKind::kFp32Weights, 3, n);
  std::vector<uint8_t> e4m3 = Generate(DataKind::kFp8Weights, 3, 0, n);
  size_t negative = 0, saturated = 0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(e4m3[i], FloatToFp8E4M3(f[i] * kFp8WeightScale)) << "element " << i;
    negative += e4m3[i] >> 7;
    saturated += (e4m3[i] & 0x7f) == 0x7e;
  }
  // Symmetric about zero, and 5 standard deviations to the largest value:
  // about 6 in 10 million saturate.
  EXPECT_NEAR(static_cast<double>(negative) / n, 0.5, 0.01);
  EXPECT_LE(saturated, 2u);
}

float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(FloatConversionTest, Fp8E4M3KnownValues) {
  EXPECT_EQ(FloatToFp8E4M3(1.0f), 0x38);  // exponent 7 (bias 7), mantissa 0
  EXPECT_EQ(FloatToFp8E4M3(-1.0f), 0xb8);
  EXPECT_EQ(FloatToFp8E4M3(0.0f), 0x00);
  EXPECT_EQ(FloatToFp8E4M3(-0.0f), 0x80);
  EXPECT_EQ(FloatToFp8E4M3(1.125f), 0x39);   // one mantissa step
  EXPECT_EQ(FloatToFp8E4M3(448.0f), 0x7e);   // largest finite
  EXPECT_EQ(FloatToFp8E4M3(1000.0f), 0x7e);  // saturated
  EXPECT_EQ(FloatToFp8E4M3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(FloatToFp8E4M3(std::numeric_limits<float>::quiet_NaN()) & 0x7f, 0x7f);
  EXPECT_EQ(FloatToFp8E4M3(0.015625f), 0x08);      // 2^-6, smallest normal
  EXPECT_EQ(FloatToFp8E4M3(0.001953125f), 0x01);   // 2^-9, smallest subnormal
  EXPECT_EQ(FloatToFp8E4M3(0.0009765625f), 0x00);  // half of it: a tie, to even (zero)
  EXPECT_EQ(FloatToFp8E4M3(0.0029296875f), 0x02);  // 1.5 units: a tie, to even (2)
  // Ties between normals go to the even mantissa.
  EXPECT_EQ(FloatToFp8E4M3(1.0625f), 0x38);        // between 1 and 1.125
  EXPECT_EQ(FloatToFp8E4M3(1.1875f), 0x3a);        // between 1.125 and 1.25
  EXPECT_EQ(FloatToFp8E4M3(0.0146484375f), 0x08);  // 7.5 subnormal units rounds up to the smallest normal
  EXPECT_EQ(FloatToFp8E4M3(432.0f), 0x7e);         // tie between 416 and 448, to even (448)
  EXPECT_EQ(FloatToFp8E4M3(431.0f), 0x7d);
}

TEST(FloatConversionTest, Bf16KnownValues) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(-1.0f), 0xbf80);
  EXPECT_EQ(FloatToBf16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBf16(2.0f), 0x4000);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  // Round to nearest, ties to even.
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808000)), 0x3f80);               // tie, down to even
  EXPECT_EQ(FloatToBf16(FromBits(0x3f818000)), 0x3f82);               // tie, up to even
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808001)), 0x3f81);               // above the tie
  EXPECT_EQ(FloatToBf16(FromBits(0x3f807fff)), 0x3f80);               // below the tie
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
  EXPECT_EQ(FloatToBf16(FromBits(0x00000001)), 0x0000);               // smallest subnormal rounds to zero
  EXPECT_EQ(FloatToBf16(FromBits(0x00018000)), 0x0002);               // subnormal tie to even
}

bool Bf16IsNan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0; }
bool Fp16IsNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }

TEST(FloatConversionTest, NanStaysNan) {
  for (uint32_t bits : {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xffc00000u, 0xff800001u, 0x7f80ffffu, 0x7fbf0000u}) {
    float nan = FromBits(bits);
    EXPECT_TRUE(Bf16IsNan(FloatToBf16(nan))) << std::hex << bits << " -> " << FloatToBf16(nan);
    EXPECT_TRUE(Fp16IsNan(FloatToFp16(nan))) << std::hex << bits << " -> " << FloatToFp16(nan);
    EXPECT_EQ(FloatToBf16(nan) >> 15, bits >> 31) << "bf16 NaN keeps its sign";
    EXPECT_EQ(FloatToFp16(nan) >> 15, bits >> 31) << "fp16 NaN keeps its sign";
  }
}

TEST(FloatConversionTest, Fp16KnownValues) {
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToFp16(0.5f), 0x3800);
  EXPECT_EQ(FloatToFp16(0.0f), 0x0000);
  EXPECT_EQ(FloatToFp16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToFp16(0.1f), 0x2e66);
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);  // largest half
  EXPECT_EQ(FloatToFp16(65519.0f), 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7c00);  // the midpoint rounds to even: infinity
  EXPECT_EQ(FloatToFp16(-1e6f), 0xfc00);
  EXPECT_EQ(FloatToFp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToFp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  // Ties to even among normals: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
}

TEST(FloatConversionTest, Fp16SubnormalsRoundToNearestEven) {
  const float unit = std::ldexp(1.0f, -24);  // smallest fp16 subnormal
  EXPECT_EQ(FloatToFp16(1e-8f), 0x0000);     // 0.17 units: rounds to zero
  EXPECT_EQ(FloatToFp16(-1e-8f), 0x8000);
  EXPECT_EQ(FloatToFp16(1e-7f), 0x0002);  // 1.68 units
  EXPECT_EQ(FloatToFp16(unit), 0x0001);
  EXPECT_EQ(FloatToFp16(0.5f * unit), 0x0000);  // tie: to even (0)
  EXPECT_EQ(FloatToFp16(0.75f * unit), 0x0001);
  EXPECT_EQ(FloatToFp16(1.5f * unit), 0x0002);     // tie: to even (2)
  EXPECT_EQ(FloatToFp16(2.5f * unit), 0x0002);     // tie: to even (2)
  EXPECT_EQ(FloatToFp16(1023 * unit), 0x03ff);     // largest subnormal
  EXPECT_EQ(FloatToFp16(1023.5f * unit), 0x0400);  // tie rounds up into the normals
  EXPECT_EQ(FloatToFp16(-3 * unit), 0x8003);
  EXPECT_EQ(FloatToFp16(FromBits(0x00000001)), 0x0000);  // fp32 subnormal
}

// Reference: round an fp32 value to fp16 through double arithmetic.
uint16_t ReferenceFp16(float f) {
  double a = std::fabs(static_cast<double>(f));
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (a >= 65520.0) return sign | 0x7c00;
  int exp;
  std::frexp(a, &exp);             // a = m * 2^exp, m in [0.5, 1)
  int e = std::max(exp - 1, -14);  // unbiased exponent of the result (subnormals use -14)
  double ulp = std::ldexp(1.0, e - 10);
  double q = std::nearbyint(a / ulp);  // default rounding mode: nearest, ties to even
  double r = q * ulp;
  if (r == 0) return sign;
  int rexp;
  std::frexp(r, &rexp);
  if (rexp - 1 < -14) return sign | static_cast<uint16_t>(q);  // subnormal
  uint16_t biased = static_cast<uint16_t>(rexp - 1 + 15);
  uint16_t mant = static_cast<uint16_t>(std::ldexp(r, -(rexp - 1) + 10) - 1024);
  return sign | static_cast<uint16_t>(biased << 10) | mant;
}

TEST(FloatConversionTest, Fp16MatchesAReferenceOverManyValues) {
  // Every 4099th bit pattern of all finite floats below 2^16, both signs.
  for (uint64_t bits = 0; bits < 0x47800000u; bits += 4099) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      float f = FromBits(static_cast<uint32_t>(bits) | sign);
      ASSERT_EQ(FloatToFp16(f), ReferenceFp16(f)) << std::hex << (bits | sign);
    }
  }
}

// Training steps: step 0 is the generated data; each step moves every weight
// by at most the learning rate (plus decay), copies follow the weights, and
// ranges are random access as for step 0.
std::vector<uint8_t> State(DataKind kind, uint32_t step, uint64_t offset, size_t size) {
  std::vector<uint8_t> out(size);
  GenerateTrainingState(kind, 7, step, offset, out);
  return out;
}

float FloatAt(const std::vector<uint8_t>& bytes, size_t i) {
  float f;
  std::memcpy(&f, bytes.data() + 4 * i, 4);
  return f;
}

TEST(TrainingStepsTest, StepZeroIsTheGeneratedData) {
  for (DataKind kind : AllDataKinds()) {
    std::vector<uint8_t> plain(4096);
    GenerateModelData(kind, 7, 12345, plain);
    EXPECT_EQ(State(kind, 0, 12345, 4096), plain) << DataKindName(kind);
  }
}

TEST(TrainingStepsTest, AStepMovesEveryWeightALittleAndTheMomentsFollowTheirRules) {
  const size_t n = 16384;
  const std::vector<uint8_t> w0 = State(DataKind::kFp32Weights, 0, 0, 4 * n),
                             w1 = State(DataKind::kFp32Weights, 1, 0, 4 * n);
  const std::vector<uint8_t> w10 = State(DataKind::kFp32Weights, 10, 0, 4 * n);
  const std::vector<uint8_t> v0 = State(DataKind::kAdamV, 0, 0, 4 * n), v1 = State(DataKind::kAdamV, 1, 0, 4 * n);
  size_t moved = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = FloatAt(w0, i), b = FloatAt(w1, i);
    EXPECT_LE(std::fabs(b - a), 4e-5f * 1.01f + 1e-6f) << i;  // learning rate 4e-5, |update| <= 1
    moved += a != b;
    EXPECT_GT(FloatAt(v1, i), 0.99f * FloatAt(v0, i)) << i;  // v = 0.999 v + 0.001 g^2
  }
  EXPECT_GT(moved, n * 99 / 100);
  EXPECT_NE(w10, w1);
  // The copies are the stepped weights, rounded.
  const std::vector<uint8_t> bf16 = State(DataKind::kBf16Weights, 1, 0, 2 * n);
  for (size_t i = 0; i < n; i += 97) {
    uint16_t h;
    std::memcpy(&h, bf16.data() + 2 * i, 2);
    EXPECT_EQ(h, FloatToBf16(FloatAt(w1, i))) << i;
  }
  // zeros and random do not change.
  for (DataKind kind : {DataKind::kZeros, DataKind::kRandom})
    EXPECT_EQ(State(kind, 3, 8, 4096), State(kind, 0, 8, 4096)) << DataKindName(kind);
}

TEST(TrainingStepsTest, AnyRangeOfAStepEqualsTheSameBytesOfALongerRange) {
  const std::vector<uint8_t> whole = State(DataKind::kAdamM, 4, 0, 8192);
  const std::vector<uint8_t> part = State(DataKind::kAdamM, 4, 1001, 3000);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + 1001));
}

}  // namespace
}  // namespace vramflow
