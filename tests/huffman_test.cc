// SPDX-License-Identifier: MIT
#include "codecs/huffman.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <optional>
#include <queue>
#include <random>
#include <vector>

#include "common/endian.h"

namespace vramflow {
namespace {

std::vector<uint8_t> Compress(const std::vector<uint8_t>& src) {
  std::vector<uint8_t> out(HuffmanBound(src.size()));
  Result<size_t> n = HuffmanCompress(src, out);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  out.resize(n.ok() ? *n : 0);
  return out;
}

// An encoder used payload after payload (as BlockCompressor uses it) gives
// each the payload a fresh encoder gives, whether it looks the symbols up in
// pairs (its pair table then holds entries of earlier codes) or one by one
// (few symbols, or many distinct ones), and each decodes to its input.
TEST(HuffmanTest, AnEncoderReusedPayloadAfterPayloadGivesWhatAFreshOneGives) {
  std::mt19937_64 rng(11);
  HuffmanEncoder encoder;
  HuffmanDecoder decoder;
  for (int round = 0; round < 24; ++round) {
    const size_t size = std::vector<size_t>{7, 100, 4096, 70000, 300000}[round % 5];
    const int distinct = std::vector<int>{2, 9, 40, 150, 256}[(round / 5) % 5];
    std::geometric_distribution<int> skewed(0.15);
    std::vector<uint8_t> src(size);
    for (uint8_t& b : src) b = static_cast<uint8_t>((skewed(rng) + round * 37) % distinct);
    std::vector<uint8_t> reused(HuffmanBound(size));
    Result<size_t> n = encoder.Compress(src, reused);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    reused.resize(*n);
    EXPECT_EQ(reused, Compress(src)) << "round " << round << ": " << size << " bytes, " << distinct << " values";
    std::vector<uint8_t> back(size);
    Status s = decoder.Decompress(reused, back);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(back, src) << "round " << round;
  }
}

// The encoding and decoding loops are built twice (baseline x86-64 and
// BMI2), and the pair table's filling twice (baseline and AVX2): every build
// gives the same payloads, for every size around the loops' edges (streams
// of unequal length, tails of 1-3 symbols), coded by single symbols and by
// pairs, of values side by side or spread out (a pair table row is filled
// from the least to the greatest value, gaps included), and both decoders
// decode them.
TEST(HuffmanTest, TheBaselineBmi2AndAvx2BuildsGiveTheSamePayloads) {
  if (!CpuHasBmi2()) GTEST_SKIP() << "this CPU has no BMI2: only the baseline loops run";
  std::mt19937_64 rng(29);
  HuffmanEncoder baseline(IsaKernel::kBaseline), bmi2(IsaKernel::kBmi2);
  std::optional<HuffmanEncoder> avx2;
  if (CpuHasAvx2()) avx2.emplace(IsaKernel::kAvx2);
  HuffmanDecoder baseline_decoder(IsaKernel::kBaseline), bmi2_decoder(IsaKernel::kBmi2);
  std::vector<size_t> sizes;
  for (size_t size = 2; size <= 80; ++size) sizes.push_back(size);
  for (size_t size : {4095, 4096, 4097, 65537, 300001, 1 << 19}) sizes.push_back(size);
  for (size_t size : sizes)
    for (int distinct : {2, 5, 40, 256})
      for (int spread : {1, 3, 7}) {
        if (distinct == 256 && spread > 1) continue;
        std::geometric_distribution<int> skewed(0.1);
        std::vector<uint8_t> src(size);
        for (uint8_t& b : src) b = static_cast<uint8_t>(skewed(rng) % distinct * spread + 11);
        std::vector<uint8_t> a(HuffmanBound(size)), b(HuffmanBound(size));
        Result<size_t> na = baseline.Compress(src, a), nb = bmi2.Compress(src, b);
        ASSERT_TRUE(na.ok() && nb.ok()) << size;
        a.resize(*na);
        b.resize(*nb);
        ASSERT_EQ(a, b) << size << " bytes, " << distinct << " values";
        if (avx2) {
          std::vector<uint8_t> c(HuffmanBound(size));
          Result<size_t> nc = avx2->Compress(src, c);
          ASSERT_TRUE(nc.ok()) << size;
          c.resize(*nc);
          ASSERT_EQ(a, c) << size << " bytes, " << distinct << " values " << spread << " apart";
        }
        for (HuffmanDecoder* decoder : {&baseline_decoder, &bmi2_decoder}) {
          std::vector<uint8_t> back(size);
          ASSERT_TRUE(decoder->Decompress(b, back).ok()) << size;
          ASSERT_EQ(back, src) << size << " bytes, " << distinct << " values";
        }
      }
}

// Counting by pairs needs a zeroed pair table, where coding by pairs left
// code entries in every row it filled, from its least value to its
// greatest, values in between included. A payload counted by pairs whose
// pairs fall in those gaps (a value absent from the coded payload, followed
// by one present) gets the code of its own counts: the payload a fresh
// encoder gives.
TEST(HuffmanTest, CountingByPairsAfterCodingByPairsSeesNoLeftEntries) {
  const size_t size = HuffmanEncoder::kPairCountingMinBytes + 4096;
  std::mt19937_64 rng(31);
  std::vector<uint8_t> coded(size), counted(size);
  for (uint8_t& b : coded) b = static_cast<uint8_t>(40 * (rng() % 6));  // 0, 40, ..., 200: rows 0..200 filled
  for (size_t i = 0; i < size; i += 2) {
    counted[i] = static_cast<uint8_t>(20 + 40 * (rng() % 5));  // 20, 60, ..., 180: the gaps
    counted[i + 1] = static_cast<uint8_t>(40 * (rng() % 6));   // a coded row
  }
  for (IsaKernel kernel : {IsaKernel::kAuto, IsaKernel::kBaseline}) {
    HuffmanEncoder encoder(kernel);
    std::vector<uint8_t> first(HuffmanBound(size)), second(HuffmanBound(size));
    ASSERT_TRUE(encoder.Compress(coded, first).ok());
    Result<size_t> n = encoder.Compress(counted, second);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    second.resize(*n);
    EXPECT_EQ(second, Compress(counted));
    HuffmanDecoder decoder;
    std::vector<uint8_t> back(size);
    ASSERT_TRUE(decoder.Decompress(second, back).ok());
    EXPECT_EQ(back, counted);
  }
}

// Large payloads whose first bytes hold few values are counted by pairs
// (HuffmanEncoder::kPairCountingMinBytes): the code is still the one the
// exact counts give, whatever only the rest holds: values that first appear
// after the sampled head, values only at odd or only at even offsets, an
// odd last byte of a value found nowhere else. The encoder is reused after
// payloads coded by pairs (whose code entries share the counting table).
TEST(HuffmanTest, ALargePayloadCountedByPairsGetsTheCodeOfItsExactCounts) {
  std::mt19937_64 rng(23);
  HuffmanEncoder encoder;
  HuffmanDecoder decoder;
  const size_t large = HuffmanEncoder::kPairCountingMinBytes;
  const size_t head = HuffmanEncoder::kPairCountingSampleBytes;
  for (size_t size : {large, large + 1, large + 4099, 4 * large + 3, size_t{5000}, 3 * large + 1}) {
    std::geometric_distribution<int> skewed(0.12);
    std::vector<uint8_t> src(size);
    for (uint8_t& b : src) b = static_cast<uint8_t>(100 + skewed(rng) % 40);
    if (size >= large) {
      for (int k = 0; k < 50; ++k) src[head + 2 * (rng() % ((size - head) / 2))] = 3;      // even offsets only
      for (int k = 0; k < 50; ++k) src[head + 2 * (rng() % ((size - head) / 2)) + 1] = 5;  // odd offsets only
      src[size - 3] = 250;                                                                 // once, late
      if (size % 2) src[size - 1] = 77;  // the unpaired last byte, nowhere else
    }
    std::array<uint64_t, 256> counts{};
    for (uint8_t b : src) ++counts[b];

    std::vector<uint8_t> payload(HuffmanBound(size));
    Result<size_t> n = encoder.Compress(src, payload);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    payload.resize(*n);
    ASSERT_EQ(payload[0], 1);
    uint64_t bits = 0;
    for (int s = 0; s < 256; ++s) {
      const unsigned length = (s & 1) ? payload[1 + s / 2] >> 4 : payload[1 + s / 2] & 15;
      EXPECT_EQ(length != 0, counts[s] != 0) << size << " bytes, value " << s;
      bits += counts[s] * length;
    }
    EXPECT_DOUBLE_EQ(static_cast<double>(bits) / static_cast<double>(size), HuffmanBitsPerSymbol(counts)) << size;
    EXPECT_EQ(payload, Compress(src)) << size;
    std::vector<uint8_t> back(size);
    Status s = decoder.Decompress(payload, back);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(back, src) << size;
  }
}

// A reference decoder for the payload format, written from FORMAT.md's
// description and nothing else: one bit at a time, every read checked.
// Returns nullopt where the payload is malformed.
std::optional<std::vector<uint8_t>> ReferenceDecode(const std::vector<uint8_t>& src, size_t size) {
  if (src.empty()) return std::nullopt;
  if (src[0] == 0) {
    if (src.size() != 2) return std::nullopt;
    return std::vector<uint8_t>(size, src[1]);
  }
  constexpr size_t kHeader = 1 + 128 + 12;
  if (src[0] != 1 || src.size() < kHeader + 8) return std::nullopt;
  std::array<unsigned, 256> length{};
  uint32_t kraft = 0;
  int used = 0;
  for (int s = 0; s < 256; ++s) {
    length[s] = (s & 1) ? src[1 + s / 2] >> 4 : src[1 + s / 2] & 15;
    if (length[s] > 11) return std::nullopt;
    if (length[s]) kraft += 2048u >> length[s], ++used;
  }
  if (used < 2 || kraft != 2048) return std::nullopt;
  // Canonical codes, MSB-first values of `length` bits.
  std::vector<std::array<int, 2048>> symbol_of(12);  // [length][code]
  for (auto& row : symbol_of) row.fill(-1);
  uint32_t next = 0;
  for (unsigned len = 1; len <= 11; ++len, next <<= 1)
    for (int s = 0; s < 256; ++s)
      if (length[s] == len) symbol_of[len][next++] = s;
  const size_t data_end = src.size() - 8;
  for (size_t i = data_end; i < src.size(); ++i)
    if (src[i]) return std::nullopt;
  std::vector<uint8_t> out(size);
  const size_t quarter = (size + 3) / 4;
  size_t pos = kHeader;
  for (size_t k = 0; k < 4; ++k) {
    const size_t bytes = k < 3 ? LoadLE32(src.data() + 129 + 4 * k) : (pos <= data_end ? data_end - pos : 0);
    if (pos > data_end || bytes > data_end - pos) return std::nullopt;
    uint64_t bit = 0;
    const uint64_t end_bit = uint64_t{bytes} * 8;
    for (size_t i = std::min(size, k * quarter); i < std::min(size, (k + 1) * quarter); ++i) {
      uint32_t value = 0;
      unsigned len = 0;
      int symbol = -1;
      while (symbol < 0) {
        if (len == 11 || bit >= end_bit) return std::nullopt;
        value = value << 1 | ((src[pos + bit / 8] >> (bit % 8)) & 1);
        ++bit, ++len;
        symbol = symbol_of[len][value];
      }
      out[i] = static_cast<uint8_t>(symbol);
    }
    if ((bit + 7) / 8 != bytes) return std::nullopt;
    for (; bit < end_bit; ++bit)
      if ((src[pos + bit / 8] >> (bit % 8)) & 1) return std::nullopt;
    pos += bytes;
  }
  return out;
}

struct Agreements {
  int decoded = 0;
  int rejected = 0;
};

// The decoder agrees with the reference on `payload`: both reject it, or
// both decode it to the same bytes.
void ExpectAgreesWithReference(HuffmanDecoder& decoder, const std::vector<uint8_t>& payload, size_t size,
                               Agreements& agreements) {
  std::optional<std::vector<uint8_t>> expected = ReferenceDecode(payload, size);
  std::vector<uint8_t> out(size, 0xAA);
  Status s = decoder.Decompress(payload, out);
  ASSERT_EQ(s.ok(), expected.has_value()) << s.ToString() << " (size " << size << ")";
  ++(s.ok() ? agreements.decoded : agreements.rejected);
  if (s.ok()) EXPECT_EQ(out, *expected);
  else EXPECT_EQ(s.code(), Status::Code::kCorruption);
}

// Bytes whose code lengths run from 1 to 11 bits.
std::vector<uint8_t> GeometricBytes(size_t size, double p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::geometric_distribution<int> skewed(p);
  std::vector<uint8_t> src(size);
  for (auto& b : src) b = static_cast<uint8_t>(std::min(skewed(rng), 255));
  return src;
}

void ExpectRoundTrip(const std::vector<uint8_t>& src) {
  std::vector<uint8_t> payload = Compress(src);
  std::vector<uint8_t> back(src.size(), 0xAA);
  Status s = HuffmanDecompress(payload, back);
  ASSERT_TRUE(s.ok()) << s.ToString() << " (size " << src.size() << ")";
  EXPECT_EQ(back, src);
}

TEST(HuffmanTest, RoundTripsSkewedDataOfManySizes) {
  std::mt19937_64 rng(7);
  std::geometric_distribution<int> skewed(0.35);
  for (size_t size : {0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 100, 4095, 4096, 4097, 65537, 300000}) {
    std::vector<uint8_t> src(size);
    for (auto& b : src) b = static_cast<uint8_t>(std::min(skewed(rng), 255));
    ExpectRoundTrip(src);
  }
}

TEST(HuffmanTest, RoundTripsUniformAndTwoSymbolData) {
  std::mt19937_64 rng(9);
  std::vector<uint8_t> uniform(100000), two(100000);
  for (auto& b : uniform) b = static_cast<uint8_t>(rng());
  for (auto& b : two) b = (rng() & 1) ? 0x3f : 0xbf;
  ExpectRoundTrip(uniform);
  ExpectRoundTrip(two);
}

TEST(HuffmanTest, CompressesToNearTheEntropy) {
  // Two symbols at 1/2 and 1/2: one bit each.
  std::mt19937_64 rng(3);
  std::vector<uint8_t> src(1 << 20);
  for (auto& b : src) b = (rng() & 1) ? 'a' : 'b';
  std::vector<uint8_t> payload = Compress(src);
  EXPECT_LT(payload.size(), src.size() / 8 + 256);
  EXPECT_GT(payload.size(), src.size() / 8);
}

TEST(HuffmanTest, LimitsCodeLengthsForFibonacciCounts) {
  // Fibonacci frequencies make the deepest possible Huffman tree (length 24+
  // for 26 symbols); lengths must still be limited to 11.
  std::vector<uint8_t> src;
  uint64_t a = 1, b = 1;
  for (int s = 0; s < 26; ++s) {
    for (uint64_t i = 0; i < a; ++i) src.push_back(static_cast<uint8_t>(s));
    uint64_t c = a + b;
    a = b;
    b = c;
  }
  std::vector<uint8_t> payload = Compress(src);
  for (int s = 0; s < 256; ++s) {
    uint8_t packed = payload[1 + s / 2];
    EXPECT_LE((s & 1) ? packed >> 4 : packed & 15, 11) << "symbol " << s;
  }
  ExpectRoundTrip(src);
}

TEST(HuffmanTest, RoundTripsEverySizeAroundTheFastLoopsEdges) {
  // The fast loop stops where a stream has less than a round of output or
  // input left; sizes up to a few hundred symbols per stream end there in
  // every phase, for codes of 1 bit (two symbols), long codes and a mix.
  for (double p : {0.5, 0.35, 0.05}) {
    std::vector<uint8_t> src = GeometricBytes(1200, p, 11);
    for (size_t size = 0; size <= src.size(); size += (size < 300 ? 1 : 37))
      ExpectRoundTrip(std::vector<uint8_t>(src.begin(), src.begin() + size));
  }
  std::mt19937_64 rng(12);
  std::vector<uint8_t> two(777);
  for (auto& b : two) b = static_cast<uint8_t>(rng() & 1);
  ExpectRoundTrip(two);
}

TEST(HuffmanTest, RoundTripsCodesOfTheMaximumLength) {
  // 2048 equally likely symbols cannot exist, but 256 nearly uniform bytes
  // with a few rare ones give 7-, 8- and 11-bit codes side by side.
  std::mt19937_64 rng(13);
  std::vector<uint8_t> src(200000);
  for (auto& b : src) b = static_cast<uint8_t>(rng() % 250);
  for (size_t i = 0; i < 6; ++i) src[i * 30000] = static_cast<uint8_t>(250 + i);
  std::vector<uint8_t> payload = Compress(src);
  unsigned longest = 0;
  for (int s = 0; s < 256; ++s)
    longest = std::max<unsigned>(longest, (s & 1) ? payload[1 + s / 2] >> 4 : payload[1 + s / 2] & 15);
  EXPECT_EQ(longest, kHuffmanMaxCodeLength);
  ExpectRoundTrip(src);
}

TEST(HuffmanTest, ADecoderReusedAcrossCodesDecodesEach) {
  // The decoder keeps its table while the code lengths stay the same: a
  // different code, a malformed one in between, and the first again.
  const std::vector<uint8_t> a = GeometricBytes(50000, 0.35, 21), b = GeometricBytes(50000, 0.05, 22);
  const std::vector<uint8_t> pa = Compress(a), pb = Compress(b);
  ASSERT_NE(std::vector<uint8_t>(pa.begin(), pa.begin() + 129), std::vector<uint8_t>(pb.begin(), pb.begin() + 129));
  HuffmanDecoder decoder;
  std::vector<uint8_t> out(a.size());
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(decoder.Decompress(pa, out).ok());
    EXPECT_EQ(out, a);
    ASSERT_TRUE(decoder.Decompress(pb, out).ok());
    EXPECT_EQ(out, b);
    std::vector<uint8_t> bad = pa;
    bad[1] = 0;  // incomplete code
    EXPECT_EQ(decoder.Decompress(bad, out).code(), Status::Code::kCorruption);
  }
}

TEST(HuffmanTest, AgreesWithAReferenceDecoderOnDamagedPayloads) {
  // Valid payloads with bytes flipped, stream sizes moved and tails cut:
  // the decoder must reject exactly what a bit-by-bit reference rejects and
  // decode the rest identically (and never read or write out of bounds,
  // which the sanitizer builds check).
  std::mt19937_64 rng(31);
  HuffmanDecoder baseline(IsaKernel::kBaseline);
  std::optional<HuffmanDecoder> bmi2;
  if (CpuHasBmi2()) bmi2.emplace(IsaKernel::kBmi2);
  Agreements agreements;
  // Each payload through the baseline decoding loop and, where the CPU has
  // BMI2, the one built for it.
  auto expect_agrees = [&](const std::vector<uint8_t>& payload, size_t size) {
    ExpectAgreesWithReference(baseline, payload, size, agreements);
    if (bmi2) ExpectAgreesWithReference(*bmi2, payload, size, agreements);
  };
  for (size_t size : {37, 1000, 20000}) {
    for (double p : {0.5, 0.3, 0.08}) {
      const std::vector<uint8_t> src = GeometricBytes(size, p, size);
      const std::vector<uint8_t> good = Compress(src);
      expect_agrees(good, size);
      for (int trial = 0; trial < 40; ++trial) {
        std::vector<uint8_t> bad = good;
        switch (trial % 4) {
          case 0:  // flip bits in the streams
            for (int f = 0; f < 1 + trial / 4; ++f)
              bad[141 + rng() % (bad.size() - 149)] ^= static_cast<uint8_t>(1u << rng() % 8);
            break;
          case 1: {  // move a boundary between streams
            const size_t at = 129 + 4 * (rng() % 3);
            StoreLE32(bad.data() + at, static_cast<uint32_t>(LoadLE32(bad.data() + at) + (rng() % 9) - 4));
            break;
          }
          case 2:  // cut bytes from the end of the last stream, keeping the padding
            bad.erase(bad.end() - 8 - std::min<size_t>(1 + rng() % 16, bad.size() - 149), bad.end() - 8);
            break;
          case 3:  // garbage streams after a valid header
            for (size_t i = 141; i + 8 < bad.size(); ++i) bad[i] = static_cast<uint8_t>(rng());
            break;
        }
        expect_agrees(bad, size);
        expect_agrees(bad, size + 1);  // one symbol more than was coded
      }
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(agreements.decoded, 20);
  EXPECT_GT(agreements.rejected, 200);
}

// Payloads of kCodeInPlaceMinBytes or more not counted by pairs have their
// streams coded end to end in their final places, where each stream's last
// stores reach into the next: the reference decoder, which reads every bit
// and checks the padding, gets the input back from each, on both sides of
// the threshold, for few and many distinct values, and where the
// streams' sizes differ a lot (a value that fills only one quarter).
TEST(HuffmanTest, StreamsCodedInPlaceDecodeBitByBit) {
  constexpr size_t kMin = HuffmanEncoder::kCodeInPlaceMinBytes;
  std::mt19937_64 rng(41);
  for (size_t size : {kMin - 1, kMin, kMin + 1, kMin + 5, 4 * kMin + 3, size_t{1} << 20}) {
    std::vector<std::vector<uint8_t>> inputs;
    for (double p : {0.5, 0.08}) inputs.push_back(GeometricBytes(size, p, size));
    std::vector<uint8_t> uneven(size);
    for (size_t i = 0; i < size; ++i) uneven[i] = i < size / 4 ? static_cast<uint8_t>(rng()) : (rng() % 64 == 0);
    inputs.push_back(uneven);
    for (const std::vector<uint8_t>& src : inputs) {
      const std::vector<uint8_t> payload = Compress(src);
      std::optional<std::vector<uint8_t>> back = ReferenceDecode(payload, src.size());
      ASSERT_TRUE(back.has_value()) << "size " << size;
      EXPECT_EQ(*back, src) << "size " << size;
    }
  }
}

TEST(HuffmanTest, BitsPerSymbolIsTheHuffmanOptimum) {
  // The cost of a Huffman code is the sum of the weights of all merged
  // nodes, whatever ties it breaks: computed here with a priority queue, for
  // counts whose code stays within 11 bits (and some equal counts).
  std::mt19937_64 rng(41);
  for (int trial = 0; trial < 50; ++trial) {
    std::array<uint64_t, 256> counts{};
    const int symbols = 2 + static_cast<int>(rng() % 200);
    for (int i = 0; i < symbols; ++i) counts[rng() % 256] = 1000 + rng() % (trial % 2 ? 3 : 2000);
    std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> queue;
    uint64_t total = 0, cost = 0;
    for (uint64_t c : counts)
      if (c) queue.push(c), total += c;
    if (queue.size() < 2) continue;
    while (queue.size() > 1) {
      uint64_t a = queue.top();
      queue.pop();
      uint64_t b = queue.top();
      queue.pop();
      cost += a + b;
      queue.push(a + b);
    }
    EXPECT_DOUBLE_EQ(HuffmanBitsPerSymbol(counts), static_cast<double>(cost) / static_cast<double>(total)) << trial;
  }
}

// The cheapest code within kHuffmanMaxCodeLength bits, by dynamic
// programming over the symbols and the Kraft sum spent so far (in units of
// 2^-11): any lengths whose Kraft sum is at most 1 make a prefix code.
uint64_t LimitedCodeCost(const std::array<uint64_t, 256>& counts) {
  constexpr uint64_t kUnreachable = ~uint64_t{0};
  constexpr size_t kUnits = size_t{1} << kHuffmanMaxCodeLength;
  std::vector<uint64_t> best(kUnits + 1, kUnreachable), next;
  best[0] = 0;
  for (uint64_t count : counts) {
    if (!count) continue;
    next.assign(kUnits + 1, kUnreachable);
    for (size_t spent = 0; spent <= kUnits; ++spent) {
      if (best[spent] == kUnreachable) continue;
      for (unsigned length = 1; length <= kHuffmanMaxCodeLength; ++length) {
        const size_t after = spent + (kUnits >> length);
        if (after <= kUnits) next[after] = std::min(next[after], best[spent] + count * length);
      }
    }
    best.swap(next);
  }
  return *std::min_element(best.begin(), best.end());
}

TEST(HuffmanTest, BitsPerSymbolIsTheBestCodeWithinTheLengthLimit) {
  // Skewed counts over many symbols, whose Huffman codes need more than 11
  // bits (package-merge), with ties among the rare ones.
  std::mt19937_64 rng(43);
  for (int trial = 0; trial < 12; ++trial) {
    std::array<uint64_t, 256> counts{};
    const int symbols = 20 + static_cast<int>(rng() % 200);
    for (int i = 0; i < symbols; ++i) {
      const unsigned depth = static_cast<unsigned>(rng() % (trial % 3 ? 24 : 14));
      counts[rng() % 256] = (uint64_t{1} << 24 >> depth) + (trial % 2 ? 0 : rng() % 3);
    }
    uint64_t total = 0;
    for (uint64_t c : counts) total += c;
    EXPECT_DOUBLE_EQ(HuffmanBitsPerSymbol(counts),
                     static_cast<double>(LimitedCodeCost(counts)) / static_cast<double>(total))
        << trial;
  }
}

TEST(HuffmanTest, SingleSymbolIsTwoBytes) {
  std::vector<uint8_t> src(5000, 0x42);
  std::vector<uint8_t> payload = Compress(src);
  ASSERT_EQ(payload.size(), 2u);
  EXPECT_EQ(payload[0], 0);
  EXPECT_EQ(payload[1], 0x42);
  ExpectRoundTrip(src);
}

TEST(HuffmanTest, RejectsMalformedPayloads) {
  std::mt19937_64 rng(5);
  std::vector<uint8_t> src(10000);
  for (auto& b : src) b = static_cast<uint8_t>(rng() % 5);
  const std::vector<uint8_t> good = Compress(src);
  std::vector<uint8_t> out(src.size());
  auto expect_corrupt = [&](std::vector<uint8_t> bad, const char* what) {
    Status s = HuffmanDecompress(bad, out);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << what << ": " << s.ToString();
  };
  expect_corrupt({}, "empty");
  expect_corrupt({7, 0}, "unknown mode");
  expect_corrupt({0, 1, 2}, "single symbol with extra byte");
  expect_corrupt(std::vector<uint8_t>(good.begin(), good.begin() + 100), "truncated header");
  std::vector<uint8_t> bad = good;
  bad[1] = 0;  // drop symbols 0 and 1 from the code: incomplete
  expect_corrupt(bad, "incomplete code");
  bad = good;
  bad[1] = 0xCC;  // lengths 12
  expect_corrupt(bad, "length above 11");
  bad = good;
  StoreLE32(bad.data() + 129, LoadLE32(bad.data() + 129) + 1);
  expect_corrupt(bad, "stream size off by one");
  bad = good;
  StoreLE32(bad.data() + 129, 0xffffffffu);
  expect_corrupt(bad, "stream size huge");
  bad = good;
  bad.back() = 1;
  expect_corrupt(bad, "padding not zero");
  bad = good;
  bad.erase(bad.end() - 9);
  expect_corrupt(bad, "last stream short");
  // Random garbage after a valid header never crashes.
  for (int trial = 0; trial < 200; ++trial) {
    bad = good;
    for (size_t i = 141; i + 8 < bad.size(); ++i) bad[i] = static_cast<uint8_t>(rng());
    Status s = HuffmanDecompress(bad, out);
    (void)s;  // may or may not decode; must not crash or read out of bounds
  }
}

}  // namespace
}  // namespace vramflow
