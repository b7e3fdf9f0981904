// SPDX-License-Identifier: MIT
// Bit-plane transforms for floats (codecs/bit_planes.h): the planes match
// their definition for every rotation and length, edge values (signed zeros,
// denormals, infinities, NaN payloads) round-trip bit-exactly through every
// codec, the encoder picks them for model data and they pay, and readers
// refuse transform ids they do not know with an error that names the id.
#include "codecs/bit_planes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "codecs/chunk_analysis.h"
#include "codecs/chunk_codec.h"
#include "codecs/huffman.h"
#include "common/endian.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

std::vector<TransformId> PlanarTransforms() {
  std::vector<TransformId> all = {TransformId::kByteGroup2, TransformId::kByteGroup4};
  for (unsigned word : {2u, 4u})
    for (unsigned r = 1; r <= 7; ++r) all.push_back(BitPlanesTransform(word, r));
  return all;
}

// The definition (docs/FORMAT.md 8.3): byte p of the word whose upper 16 bits
// (all 16 for 2-byte words) are rotated left by r.
uint8_t ExpectedPlaneByte(TransformId t, const uint8_t* word_bytes, unsigned p) {
  const unsigned r = RotationBits(t);
  if (WordSize(t) == 2) return static_cast<uint8_t>(RotateLeft16(LoadLE16(word_bytes), r) >> (8 * p));
  if (p < 2) return word_bytes[p];
  return static_cast<uint8_t>(RotateLeft16(LoadLE16(word_bytes + 2), r) >> (8 * (p - 2)));
}

// The builds of the bit-plane loops this CPU runs.
std::vector<IsaKernel> Kernels() {
  std::vector<IsaKernel> kernels = {IsaKernel::kBaseline};
  if (CpuHasAvx2()) kernels.push_back(IsaKernel::kAvx2);
  return kernels;
}

// Every planar transform's split with one build of the loops matches the
// definition, writes nothing past the planes, and its join gives the words back.
void ExpectSplitAndJoinMatchTheDefinition(IsaKernel kernel, std::mt19937_64& rng) {
  for (TransformId t : PlanarTransforms()) {
    const unsigned word = WordSize(t);
    // Lengths around the 16- and 32-word SIMD steps and odd ones, not
    // multiples of the word.
    for (size_t n :
         {0, 1, 2, 3, 5, 7, 31, 32, 33, 63, 64, 65, 66, 127, 128, 129, 130, 191, 255, 256, 257, 1001, 4099}) {
      const std::string what =
          TransformName(t) + (kernel == IsaKernel::kAvx2 ? " avx2" : " baseline") + " n " + std::to_string(n);
      std::vector<uint8_t> src(n);
      for (auto& b : src) b = static_cast<uint8_t>(rng());
      const size_t words = n / word;
      std::vector<std::vector<uint8_t>> planes(word, std::vector<uint8_t>(words + 1, 0xEE));
      uint8_t* ptrs[4] = {};
      for (unsigned p = 0; p < word; ++p) ptrs[p] = planes[p].data();
      SplitPlanes(t, src.data(), n, ptrs, kernel);
      for (unsigned p = 0; p < word; ++p) {
        for (size_t i = 0; i < words; ++i)
          ASSERT_EQ(planes[p][i], ExpectedPlaneByte(t, src.data() + i * word, p))
              << what << " plane " << p << " i " << i;
        EXPECT_EQ(planes[p][words], 0xEE) << what << ": wrote past plane " << p;
      }
      std::vector<uint8_t> dst(n + 1, 0x5A);
      const uint8_t* cptrs[4] = {};
      for (unsigned p = 0; p < word; ++p) cptrs[p] = planes[p].data();
      JoinPlanes(t, cptrs, n, dst.data(), kernel);
      EXPECT_TRUE(std::equal(dst.begin(), dst.begin() + static_cast<ptrdiff_t>(words * word), src.begin())) << what;
      for (size_t i = words * word; i <= n; ++i) EXPECT_EQ(dst[i], 0x5A) << what << ": wrote the tail at " << i;
    }
  }
}

TEST(BitPlanesTest, SplitMatchesTheDefinitionAndJoinInvertsItForEveryLength) {
  std::mt19937_64 rng(7);
  if (!CpuHasAvx2()) std::fprintf(stderr, "this CPU has no AVX2: only the baseline loops are checked\n");
  for (IsaKernel kernel : Kernels()) ExpectSplitAndJoinMatchTheDefinition(kernel, rng);
}

TEST(BitPlanesTest, RotationByOneGivesTheExponentAByteOfItsOwn) {
  // bf16 -1.5 = 0xBFC0: sign 1, exponent 127, mantissa 0x40.
  const uint8_t bf16[2] = {0xC0, 0xBF};
  uint8_t low = 0, high = 0;
  uint8_t* planes2[2] = {&low, &high};
  SplitPlanes(BitPlanesTransform(2, 1), bf16, 2, planes2);
  EXPECT_EQ(high, 127);             // the exponent alone
  EXPECT_EQ(low, (0x40 << 1) | 1);  // mantissa, then the sign in bit 0
  // fp32 -1.5f = 0xBFC00000.
  const uint8_t fp32[4] = {0x00, 0x00, 0xC0, 0xBF};
  uint8_t p[4] = {};
  uint8_t* planes4[4] = {&p[0], &p[1], &p[2], &p[3]};
  SplitPlanes(BitPlanesTransform(4, 1), fp32, 4, planes4);
  EXPECT_EQ(p[3], 127);
  EXPECT_EQ(p[2], (0x40 << 1) | 1);  // top 7 mantissa bits, then the sign
  EXPECT_EQ(p[1], 0);
  EXPECT_EQ(p[0], 0);
}

// Words that float data can hold at its edges, for one word size.
std::vector<uint32_t> EdgeWords(unsigned word) {
  if (word == 4)
    return {0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x7f800000,
            0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 0x7fbfffff, 0xffffffff, 0x3f800000, 0xbf800000};
  // bf16 and fp16 edges together (the transform does not know which it has).
  return {0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x7f7f, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81,   // bf16
          0x03ff, 0x8001, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01, 0xffff, 0x3c00};  // fp16
}

std::vector<uint8_t> EdgeChunk(unsigned word, size_t n, uint64_t seed, bool all_equal) {
  std::vector<uint32_t> edges = EdgeWords(word);
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  const uint32_t same = edges[seed % edges.size()];
  for (size_t i = 0; i < n; i += word) {
    uint32_t w = all_equal ? same : edges[rng() % edges.size()];
    for (unsigned b = 0; b < word && i + b < n; ++b) out[i + b] = static_cast<uint8_t>(w >> (8 * b));
  }
  return out;
}

TEST(BitPlanesTest, EdgeValuesRoundTripBitExactlyThroughEveryCodec) {
  ChunkDecoder decoder;
  for (TransformId t : PlanarTransforms()) {
    const unsigned word = WordSize(t);
    for (const char* codec : {"auto", "huffman", "zstd", "lz4", "raw"}) {
      EncoderOptions o;
      ASSERT_TRUE(ParseCodecSpec(codec, &o).ok());
      ASSERT_TRUE(ParseTransformSpec(TransformName(t), &o).ok()) << TransformName(t);
      o.detect_zero_runs = false;
      ChunkEncoder encoder(o);
      for (size_t n : {1, 2, 3, 5, 9, 33, 255, 4096, 4097, 65535}) {
        for (bool all_equal : {false, true}) {
          std::vector<uint8_t> raw = EdgeChunk(word, n, n, all_equal);
          const std::string what =
              TransformName(t) + " " + codec + " n " + std::to_string(n) + (all_equal ? " all equal" : " mixed");
          EncodedChunk chunk;
          ASSERT_TRUE(encoder.Encode(raw, &chunk).ok()) << what;
          if (chunk.transform != TransformId::kNone) {
            EXPECT_EQ(chunk.transform, t) << what;
          }
          std::vector<uint8_t> out(n, 0xA5);
          Status s = decoder.Decode(chunk.codec, chunk.transform, chunk.payload, out);
          ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
          ASSERT_EQ(out, raw) << what;
        }
      }
    }
  }
}

TEST(BitPlanesTest, AutoPicksBitPlanesForModelFloatsAndTheyBeatByteGrouping) {
  struct Case {
    DataKind kind;
    const char* grouping;
    double min_gain;  // at least this much smaller than byte grouping
  };
  // Measured gains: bf16 1.9%, fp32 0.7%, Adam moments 0.2-0.8%, fp16 0.01% (kept for equality).
  for (const Case& c : {Case{DataKind::kBf16Weights, "bytegroup2", 0.01},
                        Case{DataKind::kFp32Weights, "bytegroup4", 0.004}, Case{DataKind::kAdamM, "bytegroup4", 0.001},
                        Case{DataKind::kAdamV, "bytegroup4", 0.001}, Case{DataKind::kFp16Weights, "bytegroup2", 0.0}}) {
    std::vector<uint8_t> data = testing::ModelBytes(c.kind, 1 << 20, 3);
    auto encoded_size = [&](const char* transform, TransformId* chosen) {
      EncoderOptions o;
      EXPECT_TRUE(ParseTransformSpec(transform, &o).ok());
      ChunkEncoder encoder(o);
      EncodedChunk chunk;
      EXPECT_TRUE(encoder.Encode(data, &chunk).ok());
      *chosen = chunk.transform;
      return static_cast<double>(chunk.payload.size());
    };
    TransformId chosen, grouped;
    double auto_size = encoded_size("auto", &chosen);
    double grouping_size = encoded_size(c.grouping, &grouped);
    EXPECT_GE(RotationBits(chosen), 1u) << DataKindName(c.kind) << " chose " << TransformName(chosen);
    EXPECT_LE(auto_size, grouping_size * (1.0 - c.min_gain))
        << DataKindName(c.kind) << ": " << TransformName(chosen) << " " << auto_size << " vs " << grouping_size;
  }
}

// How many planes of a planar payload are entropy coded.
unsigned CodedPlanes(const EncodedChunk& chunk, size_t raw_size) {
  std::vector<PlaneInfo> planes;
  EXPECT_TRUE(ReadPlaneTable(chunk.transform, chunk.payload, raw_size, &planes).ok());
  unsigned coded = 0;
  for (const PlaneInfo& p : planes) coded += p.codec != CodecId::kRaw;
  return coded;
}

TEST(BitPlanesTest, AutoFastCodesNoMorePlanesThanByteGrouping) {
  for (DataKind kind : {DataKind::kBf16Weights, DataKind::kFp16Weights, DataKind::kFp32Weights, DataKind::kAdamV}) {
    std::vector<uint8_t> data = testing::ModelBytes(kind, 1 << 20, 4);
    auto encode = [&](const char* transform) {
      EncoderOptions o;
      EXPECT_TRUE(ParseTransformSpec(transform, &o).ok());
      ChunkEncoder encoder(o);
      EncodedChunk chunk;
      EXPECT_TRUE(encoder.Encode(data, &chunk).ok());
      EXPECT_EQ(chunk.codec, CodecId::kPlanar);
      return std::pair{CodedPlanes(chunk, data.size()), chunk.payload.size()};
    };
    const char* grouping = WordSize(AnalyzeChunk(data).best_transform) == 2 ? "bytegroup2" : "bytegroup4";
    auto [fast_coded, fast_size] = encode("auto-fast");
    auto [grouped_coded, grouped_size] = encode(grouping);
    auto [auto_coded, auto_size] = encode("auto");
    EXPECT_LE(fast_coded, grouped_coded) << DataKindName(kind);
    EXPECT_LE(fast_size, grouped_size) << DataKindName(kind);
    EXPECT_LE(auto_size, fast_size) << DataKindName(kind);
  }
}

TEST(BitPlanesTest, UnknownTransformIdsAreRefusedByName) {
  const std::vector<uint8_t> payload(64, 0);
  std::vector<uint8_t> out(64);
  ChunkDecoder decoder;
  int known = 0;
  for (int id = 0; id < 256; ++id) {
    if (IsKnownTransform(static_cast<uint8_t>(id))) {
      ++known;
      continue;
    }
    for (CodecId codec : {CodecId::kPlanar, CodecId::kRaw}) {
      Status s = decoder.Decode(codec, static_cast<TransformId>(id), payload, out);
      EXPECT_EQ(s.code(), Status::Code::kCorruption) << id;
      EXPECT_NE(s.ToString().find("unknown transform id " + std::to_string(id)), std::string::npos) << s.ToString();
    }
    std::vector<PlaneInfo> planes;
    Status s = ReadPlaneTable(static_cast<TransformId>(id), payload, out.size(), &planes);
    EXPECT_NE(s.ToString().find("unknown transform id " + std::to_string(id)), std::string::npos) << s.ToString();
  }
  // none, bytegroup2, bytegroup4, signplanes1, bitplanes2r1..7, bitplanes4r1..7, sparse2r0..7, sparse4r0..7
  EXPECT_EQ(known, 4 + 14 + 16);
  for (int id : {0x20, 0x40, 0x31, 0x38, 0x58, 0x81, 0x88, 0x11, 0x18, 0x1f})
    EXPECT_FALSE(IsKnownTransform(static_cast<uint8_t>(id)));
}

TEST(BitPlanesTest, TransformNamesParseBack) {
  for (TransformId t : PlanarTransforms()) {
    if (RotationBits(t) == 0) continue;
    EncoderOptions o;
    ASSERT_TRUE(ParseTransformSpec(TransformName(t), &o).ok()) << TransformName(t);
    EXPECT_EQ(o.transform, TransformChoice::kBitPlanes);
    EXPECT_EQ(o.bit_planes, t);
  }
  EncoderOptions o;
  EXPECT_EQ(ParseTransformSpec("bitplanes2r0", &o).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ParseTransformSpec("bitplanes2r8", &o).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ParseTransformSpec("bitplanes3r1", &o).code(), Status::Code::kInvalidArgument);
}

TEST(HuffmanLengthsTest, LimitedCodeOfAnExponentLikeDistributionStaysNearTheEntropy) {
  // Counts halving per symbol, like the exponents of small weights: the
  // unlimited Huffman code would need 30-bit codes.
  std::array<uint64_t, 256> counts{};
  double total = 0;
  for (int s = 0; s < 30; ++s) total += static_cast<double>(counts[s] = uint64_t{1} << (30 - s));
  double entropy = 0;
  for (uint64_t c : counts)
    if (c) entropy -= c / total * std::log2(c / total);
  double bits = HuffmanBitsPerSymbol(counts);
  // The optimal 11-bit-limited code costs 2.0166 bits here; halving the
  // counts until the tree fits (the limiter before package-merge) cost 2.0312.
  EXPECT_LE(bits, entropy + 0.02);
  EXPECT_GE(bits, entropy);
  // And the code the compressor builds from such data decodes.
  std::vector<uint8_t> data;
  for (int s = 0; s < 30; ++s)
    data.insert(data.end(), std::max<size_t>(1, (size_t{1} << 16) >> s), static_cast<uint8_t>(s));
  std::vector<uint8_t> payload(HuffmanBound(data.size()));
  Result<size_t> n = HuffmanCompress(data, payload);
  ASSERT_TRUE(n.ok());
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(HuffmanDecompress(std::span<const uint8_t>(payload.data(), *n), out).ok());
  EXPECT_EQ(out, data);
}

}  // namespace
}  // namespace vramflow
