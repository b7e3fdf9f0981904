// SPDX-License-Identifier: MIT
// BaseChunkCoder (streamer/base_chunk_coding.h): how one chunk is coded
// against the base's chunk at its place, on a test-only base
// (tests/support/fake_base_stream.h) that counts the chunks it is asked to read.
#include <gtest/gtest.h>

#include <cstring>

#include "streamer/base_chunk_coding.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/fake_base_stream.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

constexpr size_t kChunk = 64 << 10;

// A stored stream of one object "pages-1.img" (4 chunks of fp32 weights), its
// last chunk a zero run, as a fake base.
std::shared_ptr<testing::FakeBaseStream> MakeBase(const std::vector<uint8_t>& bytes, bool digests) {
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = kChunk;
  header.flags = kStreamFlagSeekIndex;
  StreamWriter writer(&sink, header);
  EXPECT_TRUE(writer.Start().ok());
  ObjectMetadata metadata;
  metadata.name = "pages-1.img";
  const uint32_t id = writer.BeginObject(metadata, bytes.size()).value();
  ChunkEncoder encoder(EncoderOptions{});
  for (size_t offset = 0; offset < bytes.size(); offset += kChunk) {
    EncodedChunk encoded;
    EXPECT_TRUE(encoder.Encode(std::span<const uint8_t>(bytes.data() + offset, kChunk), &encoded).ok());
    EXPECT_TRUE(writer.AddChunk(id, offset, kChunk, encoded).ok());
  }
  EXPECT_TRUE(writer.EndObject(id).ok());
  EXPECT_TRUE(writer.Finish().ok());
  return testing::FakeBaseStream::Create(sink.bytes(), {{"pages-1.img", bytes}}, digests).value();
}

class BaseChunkCoding : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes = testing::ModelBytes(DataKind::kFp32Weights, 4 * kChunk, 5);
    std::memset(bytes.data() + 3 * kChunk, 0, kChunk);
  }
  std::span<const uint8_t> Chunk(const std::vector<uint8_t>& b, size_t i) {
    return std::span<const uint8_t>(b.data() + i * kChunk, kChunk);
  }
  std::vector<uint8_t> bytes;
  MemoryBudget budget{64ull << 20};
  ChunkEncoder encoder{EncoderOptions{}};
};

// A digest finds the equal chunk; the base chunk, read and checked against
// it, proves it before it is named.
TEST_F(BaseChunkCoding, EqualChunkIsAReferenceProvenByReadingTheBaseChunk) {
  auto base = MakeBase(bytes, /*digests=*/true);
  auto coder = BaseChunkCoder::Create(base, kChunk, /*refs_only=*/false, &budget).value();
  const uint32_t object = base->index().index.objects[0].id;
  BaseCoding coding = coder->Reference(object, kChunk, Chunk(bytes, 1), Sha256(Chunk(bytes, 1))).value();
  EXPECT_EQ(coding.kind, BaseCoding::Kind::kRef);
  EXPECT_EQ(coding.ref.base_object_id, object);
  EXPECT_EQ(coding.ref.base_offset, kChunk);
  EXPECT_EQ(coding.ref.base_sha256, Sha256(Chunk(bytes, 1)));
  EXPECT_EQ(base->chunk_reads.load(), 1u) << "the stored digest alone proves nothing";
}

TEST_F(BaseChunkCoding, WithoutDigestsTheBaseChunkIsReadOnceForReferenceAndDelta) {
  auto base = MakeBase(bytes, /*digests=*/false);
  auto coder = BaseChunkCoder::Create(base, kChunk, false, &budget).value();
  const uint32_t object = base->index().index.objects[0].id;
  EXPECT_EQ(coder->Reference(object, 0, Chunk(bytes, 0), Sha256(Chunk(bytes, 0))).value().kind, BaseCoding::Kind::kRef);
  EXPECT_EQ(base->chunk_reads.load(), 1u);

  std::vector<uint8_t> changed = bytes;
  for (size_t i = kChunk; i < 2 * kChunk; i += 4) changed[i] ^= 0x7;  // low mantissa bits of every fp32 word
  const std::span<const uint8_t> chunk = Chunk(changed, 1);
  EXPECT_EQ(coder->Reference(object, kChunk, chunk, Sha256(chunk)).value().kind, BaseCoding::Kind::kOwn);
  EncodedChunk own;
  ASSERT_TRUE(encoder.Encode(chunk, &own).ok());
  BaseCoding delta = coder->Delta(object, kChunk, chunk, own.payload.size(), encoder).value();
  ASSERT_EQ(delta.kind, BaseCoding::Kind::kDelta);
  EXPECT_EQ(base->chunk_reads.load(), 2u) << "Delta used the chunk Reference read";
  EXPECT_EQ(delta.ref.base_sha256, Sha256(Chunk(bytes, 1)));
  EXPECT_LT(delta.delta.payload.size() + kBaseChunkRefSize, own.payload.size());
  // The delta decodes to the XOR: base XOR delta is the chunk.
  std::vector<uint8_t> decoded(kChunk);
  ChunkDecoder decoder;
  ASSERT_TRUE(decoder.Decode(delta.delta.codec, delta.delta.transform, delta.delta.payload, decoded).ok());
  XorInto(decoded, Chunk(bytes, 1));
  EXPECT_TRUE(std::equal(decoded.begin(), decoded.end(), chunk.begin()));
}

TEST_F(BaseChunkCoding, ADeltaThatDoesNotPayStaysPlain) {
  auto base = MakeBase(bytes, true);
  auto coder = BaseChunkCoder::Create(base, kChunk, false, &budget).value();
  const uint32_t object = base->index().index.objects[0].id;
  const std::vector<uint8_t> other = testing::ModelBytes(DataKind::kRandom, kChunk, 8);
  EncodedChunk own;
  ASSERT_TRUE(encoder.Encode(other, &own).ok());
  EXPECT_EQ(coder->Reference(object, 0, other, Sha256(other)).value().kind, BaseCoding::Kind::kOwn);
  EXPECT_EQ(coder->Delta(object, 0, other, own.payload.size(), encoder).value().kind, BaseCoding::Kind::kOwn);
}

TEST_F(BaseChunkCoding, NoBaseChunkThereMeansNoReference) {
  auto base = MakeBase(bytes, true);
  auto coder = BaseChunkCoder::Create(base, kChunk, false, &budget).value();
  const uint32_t object = base->index().index.objects[0].id;
  // Another size at a chunk's offset, an offset past the object, and the zero run.
  const std::span<const uint8_t> half(bytes.data(), kChunk / 2);
  EXPECT_EQ(coder->Reference(object, 0, half, Sha256(half)).value().kind, BaseCoding::Kind::kOwn);
  EXPECT_EQ(coder->Reference(object, 8 * kChunk, Chunk(bytes, 0), Sha256(Chunk(bytes, 0))).value().kind,
            BaseCoding::Kind::kOwn);
  EXPECT_EQ(coder->Reference(object, 3 * kChunk, Chunk(bytes, 3), Sha256(Chunk(bytes, 3))).value().kind,
            BaseCoding::Kind::kOwn);
  EXPECT_EQ(base->chunk_reads.load(), 0u);
}

TEST_F(BaseChunkCoding, RefsOnlyReadsOnlyWhatItReferencesAndNeedsDigests) {
  auto plain = MakeBase(bytes, false);
  Result<std::unique_ptr<BaseChunkCoder>> refused = BaseChunkCoder::Create(plain, kChunk, /*refs_only=*/true, &budget);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("digests"), std::string::npos) << refused.status().ToString();

  auto base = MakeBase(bytes, true);
  const uint64_t before = budget.in_use();
  auto coder = BaseChunkCoder::Create(base, kChunk, true, &budget).value();
  EXPECT_EQ(budget.in_use() - before, BaseChunkCoder::MemoryBytes(*base, kChunk, true))
      << "references only holds a base chunk, to prove it, and no delta buffers";
  EXPECT_LT(BaseChunkCoder::MemoryBytes(*base, kChunk, true), BaseChunkCoder::MemoryBytes(*base, kChunk, false));
  const uint32_t object = base->index().index.objects[0].id;
  std::vector<uint8_t> changed = bytes;
  changed[10] ^= 1;
  EXPECT_EQ(coder->Reference(object, 0, Chunk(changed, 0), Sha256(Chunk(changed, 0))).value().kind,
            BaseCoding::Kind::kOwn);
  EXPECT_EQ(coder->Delta(object, 0, Chunk(changed, 0), kChunk, encoder).value().kind, BaseCoding::Kind::kOwn);
  EXPECT_EQ(base->chunk_reads.load(), 0u) << "a changed chunk's base bytes are never read";
  EXPECT_EQ(coder->Reference(object, kChunk, Chunk(bytes, 1), Sha256(Chunk(bytes, 1))).value().kind,
            BaseCoding::Kind::kRef);
  EXPECT_EQ(base->chunk_reads.load(), 1u) << "the referenced one is";
}

// A base whose chunks' bytes differ from its stored digests (a damaged
// base): the stored digests are those of `digested`, the bytes `bytes`.
class DamagedBase final : public testing::ForwardingBaseStream {
 public:
  DamagedBase(std::shared_ptr<testing::FakeBaseStream> bytes, std::shared_ptr<testing::FakeBaseStream> digested)
      : ForwardingBaseStream(std::move(bytes)), digested_(std::move(digested)) {}
  bool has_digests() const override { return true; }
  std::optional<Sha256Digest> StoredDigest(uint32_t object, uint64_t offset) const override {
    return digested_->StoredDigest(object, offset);
  }

 private:
  std::shared_ptr<testing::FakeBaseStream> digested_;
};

// A base chunk whose bytes do not match its stored digest is an error (a
// damaged base), never a silent full chunk.
TEST_F(BaseChunkCoding, ADamagedBaseChunkIsAnError) {
  std::vector<uint8_t> damaged = bytes;
  damaged[kChunk + 5] ^= 0xff;
  auto base = std::make_shared<DamagedBase>(MakeBase(damaged, false), MakeBase(bytes, true));
  auto coder = BaseChunkCoder::Create(base, kChunk, false, &budget).value();
  const uint32_t object = base->index().index.objects[0].id;
  std::vector<uint8_t> changed = bytes;
  changed[kChunk + 100] ^= 1;
  const std::span<const uint8_t> chunk = Chunk(changed, 1);
  EncodedChunk own;
  ASSERT_TRUE(encoder.Encode(chunk, &own).ok());
  EXPECT_EQ(coder->Reference(object, kChunk, chunk, Sha256(chunk)).value().kind, BaseCoding::Kind::kOwn);
  Result<BaseCoding> delta = coder->Delta(object, kChunk, chunk, own.payload.size(), encoder);
  ASSERT_FALSE(delta.ok());
  EXPECT_NE(delta.status().ToString().find("offset " + std::to_string(kChunk)), std::string::npos)
      << delta.status().ToString();
}

// A stored digest that equals the new chunk's while the base's bytes there
// differ (a digest that lies) is an error naming the chunk, in both modes:
// never a reference that no restore could resolve (a reference was made).
TEST_F(BaseChunkCoding, AStoredDigestThatLiesIsAnErrorNotAReference) {
  std::vector<uint8_t> damaged = bytes;
  damaged[kChunk + 5] ^= 0xff;
  auto base = std::make_shared<DamagedBase>(MakeBase(damaged, false), MakeBase(bytes, true));
  const uint32_t object = base->index().index.objects[0].id;
  for (bool refs_only : {false, true}) {
    SCOPED_TRACE(refs_only ? "references only" : "full mode");
    auto coder = BaseChunkCoder::Create(base, kChunk, refs_only, &budget).value();
    Result<BaseCoding> coding = coder->Reference(object, kChunk, Chunk(bytes, 1), Sha256(Chunk(bytes, 1)));
    ASSERT_FALSE(coding.ok()) << "a reference was made";
    EXPECT_EQ(coding.status().code(), Status::Code::kCorruption) << coding.status().ToString();
    EXPECT_NE(coding.status().ToString().find("offset " + std::to_string(kChunk)), std::string::npos)
        << coding.status().ToString();
  }
}

TEST(BaseChunkCodingOptions, ChainsAndRefsOnlyAreChecked) {
  PipelineOptions options;
  EXPECT_TRUE(CheckDumpBase(options).ok());
  options.base_refs_only = true;
  EXPECT_FALSE(CheckDumpBase(options).ok());
}

}  // namespace
}  // namespace vramflow
