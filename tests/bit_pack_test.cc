// SPDX-License-Identifier: MIT
#include "codecs/bit_pack.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <vector>

#include "codecs/block_codec.h"
#include "codecs/chunk_codec.h"

namespace vramflow {
namespace {

std::vector<uint8_t> Pack(const std::vector<uint8_t>& src, IsaKernel kernel = IsaKernel::kAuto) {
  std::vector<uint8_t> out(BitPackBound(src.size()));
  Result<size_t> n = BitPackCompress(src, out, std::nullopt, kernel);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  out.resize(n.ok() ? *n : 0);
  return out;
}

// The kernels this CPU runs: baseline everywhere, BMI2 where it has it.
std::vector<IsaKernel> Kernels() {
  std::vector<IsaKernel> kernels = {IsaKernel::kBaseline};
  if (CpuHasBmi2()) kernels.push_back(IsaKernel::kBmi2);
  return kernels;
}

const char* KernelName(IsaKernel k) { return k == IsaKernel::kBmi2 ? "bmi2" : "baseline"; }

// Bytes whose bits outside `varying` are those of `constant`.
std::vector<uint8_t> Masked(size_t n, uint8_t varying, uint8_t constant, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>((rng() & varying) | (constant & ~varying));
  return v;
}

TEST(BitPackTest, RoundTripsEveryWidthAndManySizes) {
  const uint8_t masks[] = {0x00, 0x01, 0x80, 0x03, 0xf8, 0x5a, 0x7f, 0xfe, 0xff, 0x3c};
  for (IsaKernel kernel : Kernels())
    for (uint8_t varying : masks)
      for (size_t n : {0u, 1u, 2u, 7u, 8u, 9u, 15u, 16u, 17u, 63u, 64u, 65u, 1000u, 4099u}) {
        std::vector<uint8_t> src = Masked(n, varying, 0xa5, n * 31 + varying);
        std::vector<uint8_t> payload = Pack(src, kernel);
        const unsigned width = n ? 8 - std::popcount(ConstantBits(src)) : 0;
        EXPECT_EQ(payload.size(), kBitPackHeaderBytes + (n * width + 7) / 8)
            << KernelName(kernel) << " n " << n << " varying " << +varying;
        std::vector<uint8_t> back(n, 0x11);
        Status s = BitPackDecompress(payload, back, kernel);
        ASSERT_TRUE(s.ok()) << s.ToString() << " " << KernelName(kernel) << " n " << n << " varying " << +varying;
        EXPECT_EQ(back, src) << KernelName(kernel) << " n " << n << " varying " << +varying;
      }
}

TEST(BitPackTest, EveryMaskPacksAsTheFormatSaysBitByBit) {
  // The word-wide packing handles each mask's runs of varying bits with
  // shifts and masks, or with PEXT/PDEP; for all 256 masks each must give
  // exactly the bits FORMAT.md describes (each byte's varying bits, lowest
  // first, as one little-endian bit stream) and unpack them back.
  for (IsaKernel kernel : Kernels()) {
    for (unsigned varying = 0; varying < 256; ++varying) {
      const size_t n = 203;  // 25 groups of eight and a tail of three
      std::vector<uint8_t> src = Masked(n, static_cast<uint8_t>(varying), 0x5a, varying);
      // Make every varying bit vary, so that ConstantBits finds exactly `varying`.
      src[0] = static_cast<uint8_t>(0x5a & ~varying);
      src[1] = static_cast<uint8_t>((0x5a & ~varying) | varying);
      std::vector<uint8_t> expected = {static_cast<uint8_t>(~varying), static_cast<uint8_t>(0x5a & ~varying)};
      size_t bit = 0;
      for (uint8_t byte : src)
        for (unsigned b = 0; b < 8; ++b) {
          if (!(varying >> b & 1)) continue;
          if (bit % 8 == 0) expected.push_back(0);
          expected.back() |= static_cast<uint8_t>((byte >> b & 1) << (bit % 8));
          ++bit;
        }
      std::vector<uint8_t> payload = Pack(src, kernel);
      ASSERT_EQ(payload, expected) << KernelName(kernel) << " varying " << varying;
      std::vector<uint8_t> back(n, 0x11);
      ASSERT_TRUE(BitPackDecompress(payload, back, kernel).ok()) << KernelName(kernel) << " varying " << varying;
      ASSERT_EQ(back, src) << KernelName(kernel) << " varying " << varying;
    }
  }
}

TEST(BitPackTest, DropsExactlyTheConstantBits) {
  std::vector<uint8_t> src = Masked(4096, 0xfc, 0x02, 3);  // bits 0-1 fixed at 10b
  EXPECT_EQ(ConstantBits(src), 0x03);
  std::vector<uint8_t> payload = Pack(src);
  EXPECT_EQ(payload[0], 0x03);
  EXPECT_EQ(payload[1], 0x02);
  EXPECT_EQ(payload.size(), 2u + 4096u * 6 / 8);
  src[4095] ^= 0x01;  // one byte differs: that bit varies now
  EXPECT_EQ(ConstantBits(src), 0x02);
  EXPECT_EQ(Pack(src).size(), 2u + 4096u * 7 / 8);
}

TEST(BitPackTest, MatchesTheFormatDocumentsExample) {
  std::vector<uint8_t> src = {0x42, 0x46, 0x4a};  // docs/FORMAT.md, section 8.4
  EXPECT_EQ(Pack(src), (std::vector<uint8_t>{0xf3, 0x42, 0x24}));
}

TEST(BitPackTest, TheKernelsAgreeOnLargeRandomBuffers) {
  if (!CpuHasBmi2()) GTEST_SKIP() << "this CPU has no BMI2: only the baseline kernel runs";
  std::mt19937_64 rng(17);
  for (int round = 0; round < 64; ++round) {
    const auto varying = static_cast<uint8_t>(rng());
    const size_t n = 8 * (rng() % 5000) + rng() % 8;
    std::vector<uint8_t> src = Masked(n, varying, static_cast<uint8_t>(rng()), rng());
    std::vector<uint8_t> baseline = Pack(src, IsaKernel::kBaseline), bmi2 = Pack(src, IsaKernel::kBmi2);
    ASSERT_EQ(baseline, bmi2) << "varying " << +varying << " n " << n;
    std::vector<uint8_t> back_baseline(n), back_bmi2(n);
    ASSERT_TRUE(BitPackDecompress(baseline, back_baseline, IsaKernel::kBaseline).ok());
    ASSERT_TRUE(BitPackDecompress(baseline, back_bmi2, IsaKernel::kBmi2).ok());
    ASSERT_EQ(back_baseline, src);
    ASSERT_EQ(back_bmi2, src);
  }
}

TEST(BitPackTest, MalformedPayloadsAreCorruption) {
  std::vector<uint8_t> src = Masked(101, 0x1f, 0x40, 5);  // width 5: 505 bits, 3 padding bits
  std::vector<uint8_t> payload = Pack(src);
  std::vector<uint8_t> out(src.size());
  auto expect_corrupt = [&](std::vector<uint8_t> bad, const char* what, const char* word) {
    for (IsaKernel kernel : Kernels()) {
      Status s = BitPackDecompress(bad, out, kernel);
      EXPECT_EQ(s.code(), Status::Code::kCorruption) << KernelName(kernel) << " " << what << ": " << s.ToString();
      EXPECT_NE(s.message().find(word), std::string::npos) << what << ": " << s.ToString();
    }
  };
  expect_corrupt({}, "empty", "header");
  expect_corrupt({0xff}, "one byte", "header");
  for (size_t keep = 2; keep < payload.size(); ++keep)
    expect_corrupt(std::vector<uint8_t>(payload.begin(), payload.begin() + static_cast<ptrdiff_t>(keep)), "truncated",
                   "expected");
  std::vector<uint8_t> longer = payload;
  longer.push_back(0);
  expect_corrupt(longer, "trailing byte", "expected");
  std::vector<uint8_t> outside = payload;
  outside[1] |= 0x01;  // a constant bit where the mask says the bit varies
  expect_corrupt(outside, "constant bit outside mask", "outside");
  std::vector<uint8_t> padding = payload;
  padding.back() |= 0x80;
  expect_corrupt(padding, "padding bit", "padding");
  // A different width changes the expected size.
  std::vector<uint8_t> width = payload;
  width[0] = 0xff;
  width[1] = 0x40;
  expect_corrupt(width, "width 0 with data", "expected");
}

TEST(BitPackTest, AutoPacksTheConstantBitsOfRotatedFloatPlanes) {
  // bf16 values in [2^-8, 1), both signs: after a rotation by 3 the low
  // plane holds sign, 5 mantissa bits and the exponent's two top bits (01),
  // constant across the chunk; the high plane carries the skewed rest.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<uint8_t> raw(1 << 20);
  for (size_t i = 0; i < raw.size(); i += 2) {
    float f = normal(rng);
    while (std::abs(f) >= 1.0f || std::abs(f) < 1.0f / 256) f = normal(rng);
    uint16_t bf16 = static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
    raw[i] = static_cast<uint8_t>(bf16);
    raw[i + 1] = static_cast<uint8_t>(bf16 >> 8);
  }
  ChunkEncoder encoder{EncoderOptions{}};
  EncodedChunk chunk;
  ASSERT_TRUE(encoder.Encode(raw, &chunk).ok());
  ASSERT_EQ(chunk.codec, CodecId::kPlanar);
  std::vector<PlaneInfo> planes;
  ASSERT_TRUE(ReadPlaneTable(chunk.transform, chunk.payload, raw.size(), &planes).ok());
  EXPECT_GE(RotationBits(chunk.transform), 2u) << TransformName(chunk.transform);
  EXPECT_EQ(planes[0].codec, CodecId::kBitPack) << TransformName(chunk.transform);
  EXPECT_EQ(planes[1].codec, CodecId::kHuffman);
  std::vector<uint8_t> back(raw.size());
  ChunkDecoder decoder;
  ASSERT_TRUE(decoder.Decode(chunk.codec, chunk.transform, chunk.payload, back).ok());
  EXPECT_EQ(back, raw);
}

TEST(BitPackTest, BlockCodecsCarryIt) {
  std::vector<uint8_t> src = Masked(10000, 0x3f, 0xc0, 9);
  BlockCompressor compressor;
  std::vector<uint8_t> out(BlockCompressor::Bound(src.size()));
  Result<size_t> n = compressor.Compress(CodecId::kBitPack, 1, src, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2u + 10000u * 6 / 8);
  std::vector<uint8_t> back(src.size());
  BlockDecompressor decompressor;
  ASSERT_TRUE(decompressor.Decompress(CodecId::kBitPack, std::span<const uint8_t>(out.data(), *n), back).ok());
  EXPECT_EQ(back, src);
  EXPECT_EQ(CodecName(CodecId::kBitPack), "bitpack");
}

}  // namespace
}  // namespace vramflow
