// SPDX-License-Identifier: MIT
// DIGEST_BLOCK rules of the validator (FORMAT.md 4.12), frame by frame: right
// after an INDEX_BLOCK of the same object, skippable, 32 bytes per record,
// all INDEX_BLOCKs or none, zero entries for ZERO_RUNs.
#include <gtest/gtest.h>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "common/sha256.h"
#include "streamer/format/seek_index.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_validator.h"
#include "streamer/format/stream_writer.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

// Feeds the validator an object with two chunk frames, each listed by its
// own INDEX_BLOCK; `digest(i)` says what follows block i (nothing, or a
// DIGEST_BLOCK header and payload), and the first failure comes back.
class Frames {
 public:
  Frames() {
    StreamHeader header;
    header.flags = kStreamFlagSeekIndex | kStreamFlagIndexBlocks;
    validator_.SetStreamHeader(header);
  }
  Status Next(FrameHeader h, std::span<const uint8_t> payload) {
    h.sequence = sequence_++;
    h.payload_size = static_cast<uint32_t>(payload.size());
    FrameAction action;
    VF_RETURN_IF_ERROR(validator_.CheckHeader(h, offset_, &action));
    offset_ += kFrameHeaderSize + payload.size();
    return validator_.Apply(h, payload);
  }
  Status Begin() {
    Result<std::vector<uint8_t>> meta = EncodeObjectMetadata(ObjectMetadata{"o", {}});
    FrameHeader h;
    h.kind = static_cast<uint8_t>(FrameKind::kObjectBegin);
    h.object_id = 1;
    h.raw_size = 20;
    h.raw_hash = Hash64(meta->data(), meta->size());
    return Next(h, *meta);
  }
  // A raw DATA chunk (or a zero run) at `offset`, then its INDEX_BLOCK.
  Status ChunkAndBlock(uint64_t offset, bool zero) {
    std::vector<uint8_t> bytes(10, zero ? 0 : 7);
    FrameHeader h;
    h.kind = static_cast<uint8_t>(zero ? FrameKind::kZeroRun : FrameKind::kData);
    h.object_id = 1;
    h.offset = offset;
    h.raw_size = 10;
    h.raw_hash = zero ? 0 : Hash64(bytes.data(), bytes.size());
    digest_ += ObjectDigestTerm(offset, 10, h.raw_hash);
    SeekIndexChunk record{offset_, offset, 10, zero ? 0u : 10u, zero ? FrameKind::kZeroRun : FrameKind::kData};
    VF_RETURN_IF_ERROR(Next(h, zero ? std::span<const uint8_t>() : std::span<const uint8_t>(bytes)));
    std::vector<uint8_t> block = EncodeIndexBlock(std::span<const SeekIndexChunk>(&record, 1));
    FrameHeader b;
    b.kind = static_cast<uint8_t>(FrameKind::kIndexBlock);
    b.object_id = 1;
    b.raw_hash = Hash64(block.data(), block.size());
    return Next(b, block);
  }
  Status Digest(uint32_t object, uint32_t flags, std::vector<uint8_t> entries) {
    FrameHeader d;
    d.kind = static_cast<uint8_t>(FrameKind::kDigestBlock);
    d.flags = flags;
    d.object_id = object;
    d.raw_hash = Hash64(entries.data(), entries.size());
    return Next(d, entries);
  }
  Status End() {
    FrameHeader h;
    h.kind = static_cast<uint8_t>(FrameKind::kObjectEnd);
    h.object_id = 1;
    h.raw_size = 20;
    h.raw_hash = digest_;
    return Next(h, {});
  }
  const StreamValidator& validator() const { return validator_; }

 private:
  StreamValidator validator_;
  uint64_t sequence_ = 0;
  uint64_t offset_ = kStreamHeaderSize;
  uint64_t digest_ = 0;
};

std::vector<uint8_t> Entry(uint8_t fill) { return std::vector<uint8_t>(kDigestEntrySize, fill); }

TEST(DigestBlock, FollowsEachIndexBlockAndPairsWithItsRecords) {
  Frames f;
  ASSERT_TRUE(f.Begin().ok());
  ASSERT_TRUE(f.ChunkAndBlock(0, false).ok());
  Status s = f.Digest(1, kFlagSkippable, Entry(0xab));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(f.validator().has_digests(), true);
  ASSERT_EQ(f.validator().digest_records().size(), 1u);
  EXPECT_EQ(f.validator().digest_records()[0].object_offset, 0u);
  ASSERT_TRUE(f.ChunkAndBlock(10, true).ok());
  s = f.Digest(1, kFlagSkippable, Entry(0));  // a ZERO_RUN's entry is zero
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = f.End();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(DigestBlock, BrokenRulesAreCorruption) {
  auto expect = [](const Status& s, const std::string& needle) {
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  };
  {  // not after an INDEX_BLOCK
    Frames f;
    ASSERT_TRUE(f.Begin().ok());
    expect(f.Digest(1, kFlagSkippable, Entry(1)), "does not follow an INDEX_BLOCK");
  }
  {  // without the skippable flag
    Frames f;
    ASSERT_TRUE(f.Begin().ok());
    ASSERT_TRUE(f.ChunkAndBlock(0, false).ok());
    expect(f.Digest(1, 0, Entry(1)), "flags 0");
  }
  {  // another object, another size
    Frames f;
    ASSERT_TRUE(f.Begin().ok());
    ASSERT_TRUE(f.ChunkAndBlock(0, false).ok());
    expect(f.Digest(2, kFlagSkippable, Entry(1)), "after the INDEX_BLOCK of object 1");
  }
  {
    Frames f;
    ASSERT_TRUE(f.Begin().ok());
    ASSERT_TRUE(f.ChunkAndBlock(0, false).ok());
    std::vector<uint8_t> two = Entry(1);
    two.resize(2 * kDigestEntrySize);
    expect(f.Digest(1, kFlagSkippable, two), "records of its INDEX_BLOCK make 32");
  }
  {  // a ZERO_RUN's entry that is not zero
    Frames f;
    ASSERT_TRUE(f.Begin().ok());
    ASSERT_TRUE(f.ChunkAndBlock(0, true).ok());
    expect(f.Digest(1, kFlagSkippable, Entry(1)), "ZERO_RUN and must be zero");
  }
  {  // the first INDEX_BLOCK has one, the second none
    Frames f;
    ASSERT_TRUE(f.Begin().ok());
    ASSERT_TRUE(f.ChunkAndBlock(0, false).ok());
    ASSERT_TRUE(f.Digest(1, kFlagSkippable, Entry(1)).ok());
    ASSERT_TRUE(f.ChunkAndBlock(10, false).ok());
    expect(f.End(), "no DIGEST_BLOCK after the INDEX_BLOCK");
  }
  {  // the first has none, a later one has
    Frames f;
    ASSERT_TRUE(f.Begin().ok());
    ASSERT_TRUE(f.ChunkAndBlock(0, false).ok());
    ASSERT_TRUE(f.ChunkAndBlock(10, false).ok());
    EXPECT_EQ(f.validator().has_digests(), false);
    expect(f.Digest(1, kFlagSkippable, Entry(1)), "first INDEX_BLOCK had none");
  }
}

// A stream of two raw chunks with digests, the second chunk's digest wrong
// (the frames are all well formed: only the SHA-256 over the bytes tells).
std::vector<uint8_t> StreamWithAWrongDigest() {
  MemorySink sink;
  StreamHeader header;
  header.flags = kStreamFlagSeekIndex;
  StreamWriter writer(&sink, header);
  writer.SetChunkDigests(true);
  EXPECT_TRUE(writer.Start().ok());
  Result<uint32_t> id = writer.BeginObject(ObjectMetadata{"o", {}}, 2 * 4096);
  EXPECT_TRUE(id.ok());
  ChunkEncoder encoder(EncoderOptions{CodecChoice::kRaw, 0, TransformChoice::kNone, true});
  for (uint8_t i = 0; i < 2; ++i) {
    std::vector<uint8_t> bytes(4096, static_cast<uint8_t>(i + 1));
    EncodedChunk chunk;
    EXPECT_TRUE(encoder.Encode(bytes, &chunk).ok());
    Sha256Digest digest = Sha256(bytes.data(), bytes.size());
    if (i == 1) digest[0] ^= 1;
    EXPECT_TRUE(writer.AddChunk(*id, i * 4096u, 4096, chunk, &digest).ok());
  }
  EXPECT_TRUE(writer.EndObject(*id).ok());
  EXPECT_TRUE(writer.Finish().ok());
  EXPECT_EQ(writer.stats().digest_blocks, 1u);
  return sink.bytes();
}

class CountChunks : public StreamVisitor {
 public:
  Status OnChunk(const ChunkEvent&) override {
    ++chunks;
    return Status::Ok();
  }
  int chunks = 0;
};

TEST(DigestBlock, ADecodingReaderChecksEveryEntryAgainstTheBytes) {
  std::vector<uint8_t> stream = StreamWithAWrongDigest();
  MemorySource source(stream);
  CountChunks visitor;
  Status s = ReadStream(source, visitor, ReadOptions{});
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("DIGEST_BLOCK entry 1 (object offset 4096) does not match"), std::string::npos)
      << s.ToString();
}

// A reader that only restores the bytes (unpack) leaves digests to verify:
// it hashes no chunk with SHA-256, and each chunk is still checked by its
// XXH3.
TEST(DigestBlock, AReaderMayLeaveTheDigestsUnchecked) {
  std::vector<uint8_t> stream = StreamWithAWrongDigest();
  MemorySource source(stream);
  CountChunks visitor;
  ReadOptions bytes_only;
  bytes_only.check_digests = false;
  Status s = ReadStream(source, visitor, bytes_only);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(visitor.chunks, 2);
  stream[stream.size() / 3] ^= 1;  // in the first chunk's bytes
  MemorySource damaged(stream);
  s = ReadStream(damaged, visitor, bytes_only);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
}

}  // namespace
}  // namespace vramflow
