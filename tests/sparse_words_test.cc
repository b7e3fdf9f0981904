// SPDX-License-Identifier: MIT
// Sparse-words transforms (codecs/sparse_words.h, docs/FORMAT.md 8.6): the
// ids and names, round trips of every rotation and word size with zero words
// in runs, scattered, none or all, a payload built by hand from the format's
// description, corrupt payloads refused with an error that says what is
// wrong, and the writer's choice on real training state (the fixture in
// tests/data/train_state, made by bench/train_state.py).
#include "codecs/sparse_words.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "codecs/chunk_analysis.h"
#include "codecs/chunk_codec.h"
#include "common/endian.h"
#include "datagen/model_data.h"

namespace vramflow {
namespace {

EncodedChunk EncodeWith(const EncoderOptions& options, const std::vector<uint8_t>& raw, std::vector<uint8_t>* payload) {
  ChunkEncoder encoder(options);
  EncodedChunk chunk;
  Status s = encoder.Encode(raw, &chunk);
  EXPECT_TRUE(s.ok()) << s.ToString();
  payload->assign(chunk.payload.begin(), chunk.payload.end());
  chunk.payload = *payload;
  return chunk;
}

std::vector<uint8_t> Decode(const EncodedChunk& chunk, size_t raw_size, Status* status) {
  std::vector<uint8_t> out(raw_size, 0xA5);
  ChunkDecoder decoder;
  *status = chunk.zero_run ? Status::Ok() : decoder.Decode(chunk.codec, chunk.transform, chunk.payload, out);
  if (chunk.zero_run) std::fill(out.begin(), out.end(), 0);
  return out;
}

// fp32-like words (the generator's weights) with zero words: `pattern`
// "runs" (rows of 96 words, every other one zero), "scattered" (each word
// zero with probability 1/3), "none", "all but one".
std::vector<uint8_t> WordsWithZeros(size_t bytes, const std::string& pattern, uint64_t seed) {
  std::vector<uint8_t> data(bytes);
  GenerateModelData(DataKind::kFp32Weights, seed, 0, data);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    const size_t w = i / 4;
    bool zero = false;
    if (pattern == "runs") zero = (w / 96) % 2 == 1;
    if (pattern == "scattered") zero = rng() % 3 == 0;
    if (pattern == "all but one") zero = w != bytes / 8;
    if (zero) std::fill(data.begin() + i, data.begin() + i + 4, 0);
  }
  return data;
}

TEST(SparseWordsTest, IdsNamesAndPlaneCounts) {
  for (unsigned word : {2u, 4u})
    for (unsigned r = 0; r <= 7; ++r) {
      const TransformId t = SparseTransform(word, r);
      EXPECT_EQ(static_cast<unsigned>(t), word << 4 | 8 | r);
      EXPECT_TRUE(IsKnownTransform(static_cast<uint8_t>(t)));
      EXPECT_TRUE(IsSparse(t));
      EXPECT_EQ(WordSize(t), word);
      EXPECT_EQ(RotationBits(t), r);
      EXPECT_EQ(PlaneCount(t), word + 1);
      EXPECT_EQ(DenseTransform(t), r == 0 ? static_cast<TransformId>(word) : BitPlanesTransform(word, r));
      const std::string name = "sparse" + std::to_string(word) + "r" + std::to_string(r);
      EXPECT_EQ(TransformName(t), name);
      EncoderOptions o;
      ASSERT_TRUE(ParseTransformSpec(name, &o).ok()) << name;
      EXPECT_EQ(o.bit_planes, t);
    }
  EXPECT_FALSE(IsSparse(BitPlanesTransform(4, 1)));
  EXPECT_FALSE(IsSparse(TransformId::kByteGroup4));
  EXPECT_FALSE(IsSparse(TransformId::kSignPlanes1));
  EXPECT_FALSE(IsKnownTransform(0x18));  // 1-byte words have no sparse form
  EncoderOptions o;
  EXPECT_FALSE(ParseTransformSpec("sparse4r8", &o).ok());
  EXPECT_FALSE(ParseTransformSpec("sparse1r0", &o).ok());
}

TEST(SparseWordsTest, EveryRotationAndPatternRoundTripsAndZerosAreLeftOut) {
  for (unsigned word : {2u, 4u})
    for (unsigned r = 0; r <= 7; ++r)
      for (const char* pattern : {"runs", "scattered", "none", "all but one"})
        for (size_t size : {size_t{8}, size_t{9}, size_t{67}, size_t{4097}, size_t{64} << 10}) {
          const std::string what = TransformName(SparseTransform(word, r)) + " " + pattern + " " + std::to_string(size);
          const std::vector<uint8_t> raw = WordsWithZeros(size, pattern, size + r);
          EncoderOptions o;
          o.transform = TransformChoice::kBitPlanes;
          o.bit_planes = SparseTransform(word, r);
          o.detect_zero_runs = false;
          std::vector<uint8_t> payload;
          const EncodedChunk chunk = EncodeWith(o, raw, &payload);
          Status s;
          EXPECT_EQ(Decode(chunk, raw.size(), &s), raw) << what;
          EXPECT_TRUE(s.ok()) << what << ": " << s.ToString();
          if (std::string(pattern) == "runs" && size >= 4097) {
            EXPECT_EQ(chunk.codec, CodecId::kPlanar) << what;  // half the words zero: it pays
          }
          if (chunk.codec != CodecId::kPlanar) continue;  // stored raw: too small to pay
          EXPECT_EQ(chunk.transform, SparseTransform(word, r)) << what;
          std::vector<PlaneInfo> planes;
          ASSERT_TRUE(ReadPlaneTable(chunk.transform, chunk.payload, raw.size(), &planes).ok()) << what;
          EXPECT_EQ(planes.size(), word + 1u) << what;
        }
}

TEST(SparseWordsTest, HandBuiltPayloadDecodesAsFormatSays) {
  // fp32 words 0, 1.0f, 0, 2.0f and a tail byte, with raw planes: the bitmap
  // 0b1010, then bytes 0..3 of the two non-zero words (no rotation).
  const std::vector<uint8_t> raw = {0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40, 0xab};
  std::vector<uint8_t> payload(5 * 8, 0);
  const uint32_t sizes[5] = {1, 2, 2, 2, 2};
  for (int p = 0; p < 5; ++p) StoreLE32(payload.data() + 8 * p + 4, sizes[p]);
  const std::vector<uint8_t> body = {0x0a, 0, 0, 0, 0, 0x80, 0, 0x3f, 0x40, 0xab};
  payload.insert(payload.end(), body.begin(), body.end());
  std::vector<uint8_t> out(raw.size());
  ChunkDecoder decoder;
  Status s = decoder.Decode(CodecId::kPlanar, SparseTransform(4, 0), payload, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out, raw);
  // With rotation 1 the upper halves were rotated left by one bit: 1.0f's
  // 0x3f80 is stored as 0x7f00, 2.0f's 0x4000 as 0x8000.
  std::vector<uint8_t> rotated = payload;
  const std::vector<uint8_t> upper = {0x00, 0x00, 0x7f, 0x80};  // planes 2 and 3, two bytes each
  std::copy(upper.begin(), upper.end(), rotated.begin() + 40 + 5);
  s = decoder.Decode(CodecId::kPlanar, SparseTransform(4, 1), rotated, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out, raw);
}

void ExpectCorruption(const Status& s, const std::string& what) {
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.ToString().find(what), std::string::npos) << s.ToString();
}

TEST(SparseWordsTest, CorruptPayloadsAreRefusedWithWhatIsWrong) {
  // Three 2-byte words, word 1 zero: bitmap 0b101, raw planes of 2 bytes.
  auto build = [](uint8_t bitmap, uint32_t bitmap_size, uint32_t plane_size) {
    std::vector<uint8_t> p(3 * 8, 0);
    StoreLE32(p.data() + 4, bitmap_size);
    StoreLE32(p.data() + 12, plane_size);
    StoreLE32(p.data() + 20, plane_size);
    p.push_back(bitmap);
    for (uint32_t i = 1; i < bitmap_size; ++i) p.push_back(0);
    for (uint32_t i = 0; i < 2 * plane_size; ++i) p.push_back(static_cast<uint8_t>(i + 1));
    return p;
  };
  ChunkDecoder decoder;
  std::vector<uint8_t> out(6);
  ASSERT_TRUE(decoder.Decode(CodecId::kPlanar, SparseTransform(2, 0), build(0x05, 1, 2), out).ok());
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 3, 0, 0, 2, 4}));
  ExpectCorruption(decoder.Decode(CodecId::kPlanar, SparseTransform(2, 0), build(0x0d, 1, 3), out),
                   "bitmap marks words past the chunk's 3");
  ExpectCorruption(decoder.Decode(CodecId::kPlanar, SparseTransform(2, 0), build(0x07, 1, 2), out),
                   "expected 3 (the non-zero words)");
  ExpectCorruption(decoder.Decode(CodecId::kPlanar, SparseTransform(2, 0), build(0x05, 2, 2), out),
                   "raw sparse-words bitmap stores 2 bytes, expected 1");
  // A compressed bitmap that decodes to another size.
  std::vector<uint8_t> bad = build(0x05, 1, 2);
  bad[0] = static_cast<uint8_t>(CodecId::kHuffman);
  bad[24] = 7;  // Huffman mode 7
  ExpectCorruption(decoder.Decode(CodecId::kPlanar, SparseTransform(2, 0), bad, out), "sparse-words bitmap");
}

TEST(SparseWordsTest, EveryTruncationAndDamageIsRefusedOrDecodesWithoutHarm) {
  const std::vector<uint8_t> raw = WordsWithZeros(16 << 10, "runs", 3);
  EncoderOptions o;
  o.transform = TransformChoice::kBitPlanes;
  o.bit_planes = SparseTransform(4, 1);
  std::vector<uint8_t> payload;
  const EncodedChunk chunk = EncodeWith(o, raw, &payload);
  ASSERT_EQ(chunk.transform, SparseTransform(4, 1));
  ChunkDecoder decoder;
  std::vector<uint8_t> out(raw.size());
  for (size_t n = 0; n < payload.size(); n += 1 + n / 64) {
    Status s = decoder.Decode(chunk.codec, chunk.transform, std::span<const uint8_t>(payload.data(), n), out);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << n;
  }
  std::mt19937_64 rng(5);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> damaged = payload;
    damaged[rng() % std::min<size_t>(damaged.size(), 200)] ^= static_cast<uint8_t>(1 + rng() % 255);
    Status s = decoder.Decode(chunk.codec, chunk.transform, damaged, out);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    }
  }
}

std::vector<uint8_t> Fixture(const std::string& name) {
  const auto path = std::filesystem::path(__FILE__).parent_path() / "data" / "train_state" / name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

size_t AutoSize(const std::vector<uint8_t>& raw, TransformId* transform,
                TransformChoice choice = TransformChoice::kAuto, TransformId forced = TransformId::kNone) {
  EncoderOptions o;
  o.transform = choice;
  o.bit_planes = forced;
  std::vector<uint8_t> payload;
  const EncodedChunk chunk = EncodeWith(o, raw, &payload);
  Status s;
  EXPECT_EQ(Decode(chunk, raw.size(), &s), raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  *transform = chunk.transform;
  return chunk.zero_run ? 0 : chunk.payload.size();
}

// Real gradients and Adam moments hold runs of zero words (embedding rows of
// tokens never seen): the writer leaves them out, and that saves at least a
// tenth against the best dense layout. Weights hold none: no sparse words.
TEST(SparseWordsTest, WriterPicksSparseWordsOnRealTrainingStateWhereTheyPay) {
  for (const char* name : {"grads.f32", "adam-m.f32", "adam-v.f32"}) {
    const std::vector<uint8_t> raw = Fixture(name);
    ASSERT_GE(raw.size(), size_t{64} << 10) << name;
    TransformId chosen, dense;
    const size_t sparse_size = AutoSize(raw, &chosen);
    EXPECT_TRUE(IsSparse(chosen)) << name << " chose " << TransformName(chosen);
    EXPECT_EQ(WordSize(chosen), 4u) << name;
    const size_t dense_size = AutoSize(raw, &dense, TransformChoice::kBitPlanes, DenseTransform(chosen));
    EXPECT_LT(sparse_size * 10, dense_size * 9) << name << ": " << sparse_size << " vs " << dense_size;
  }
  for (const char* name : {"weights.f32", "weights.bf16", "weights.f16"}) {
    TransformId chosen;
    AutoSize(Fixture(name), &chosen);
    EXPECT_FALSE(IsSparse(chosen)) << name << " chose " << TransformName(chosen);
    EXPECT_NE(chosen, TransformId::kNone) << name;
  }
}

TEST(SparseWordsTest, AnalysisIgnoresAFewZerosAndTakesRuns) {
  TransformId chosen;
  AutoSize(WordsWithZeros(1 << 20, "none", 1), &chosen);
  EXPECT_FALSE(IsSparse(chosen)) << TransformName(chosen);
  AutoSize(WordsWithZeros(1 << 20, "runs", 1), &chosen);
  EXPECT_TRUE(IsSparse(chosen)) << TransformName(chosen);
  EXPECT_EQ(WordSize(chosen), 4u);
}

}  // namespace
}  // namespace vramflow
