// SPDX-License-Identifier: MIT
#include "codecs/huffman.h"

#include <gtest/gtest.h>

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
