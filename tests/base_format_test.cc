// SPDX-License-Identifier: MIT
// The wire pieces of incremental streams (docs/FORMAT.md 4.9 to 4.12): SHA-256,
// the BASE payload, base chunk references, and the writer's new frames.
#include <gtest/gtest.h>

#include <cstring>

#include "common/sha256.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/stream_writer.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

TEST(BaseFormat, Sha256MatchesTheStandardVectors) {
  // FIPS 180-2, appendix B.1 and the empty message.
  EXPECT_EQ(HexDigest(Sha256("abc", 3)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HexDigest(Sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256Hasher pieces;
  pieces.Update("a", 1);
  pieces.Update("bc", 2);
  EXPECT_EQ(pieces.Final(), Sha256("abc", 3));
  Sha256Digest parsed{};
  EXPECT_TRUE(ParseHexDigest(HexDigest(Sha256("abc", 3)), &parsed));
  EXPECT_EQ(parsed, Sha256("abc", 3));
  EXPECT_FALSE(ParseHexDigest("abc", &parsed));
  EXPECT_FALSE(ParseHexDigest(std::string(63, '0') + "g", &parsed));
}

BaseDescriptor SomeBase() {
  BaseDescriptor base;
  base.base_id = Sha256("base", 4);
  base.base_bytes = 123456789;
  base.base_raw_bytes = 987654321;
  base.chain_length = 3;
  base.location = "s3://bucket/ckpt-1.vfs";
  return base;
}

TEST(BaseFormat, BaseDescriptorRoundTripsAndRefusesWhatTheFormatForbids) {
  Result<std::vector<uint8_t>> bytes = EncodeBaseDescriptor(SomeBase());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(bytes->size(), kBaseDescriptorFixedSize + SomeBase().location.size());
  BaseDescriptor back;
  ASSERT_TRUE(DecodeBaseDescriptor(*bytes, &back).ok());
  EXPECT_EQ(back, SomeBase());

  std::vector<uint8_t> reserved = *bytes;
  reserved[54] = 1;
  EXPECT_EQ(DecodeBaseDescriptor(reserved, &back).code(), Status::Code::kCorruption);
  std::vector<uint8_t> long_chain = *bytes;
  long_chain[48] = kMaxBaseChain + 1;
  EXPECT_EQ(DecodeBaseDescriptor(long_chain, &back).code(), Status::Code::kCorruption);
  std::vector<uint8_t> no_chain = *bytes;
  std::memset(no_chain.data() + 48, 0, 4);
  EXPECT_EQ(DecodeBaseDescriptor(no_chain, &back).code(), Status::Code::kCorruption);
  std::vector<uint8_t> cut(bytes->begin(), bytes->end() - 1);  // location shorter than its length says
  EXPECT_EQ(DecodeBaseDescriptor(cut, &back).code(), Status::Code::kCorruption);
  EXPECT_EQ(DecodeBaseDescriptor(std::span<const uint8_t>(bytes->data(), 55), &back).code(), Status::Code::kCorruption);

  BaseDescriptor bad = SomeBase();
  bad.location = std::string(kMaxBaseLocationBytes + 1, 'x');
  EXPECT_FALSE(EncodeBaseDescriptor(bad).ok());
  bad = SomeBase();
  bad.chain_length = 0;
  EXPECT_FALSE(EncodeBaseDescriptor(bad).ok());
}

TEST(BaseFormat, BaseChunkRefChecksumCoversEveryByte) {
  BaseChunkRef ref{7, 3u << 20, Sha256("chunk", 5)};
  uint8_t bytes[kBaseChunkRefSize];
  EncodeBaseChunkRef(ref, bytes);
  BaseChunkRef back;
  ASSERT_TRUE(DecodeBaseChunkRef(bytes, &back).ok());
  EXPECT_EQ(back, ref);
  for (size_t i = 0; i < kBaseChunkRefSize; ++i) {
    uint8_t flipped[kBaseChunkRefSize];
    std::memcpy(flipped, bytes, sizeof(flipped));
    flipped[i] ^= 0x10;
    EXPECT_EQ(DecodeBaseChunkRef(flipped, &back).code(), Status::Code::kCorruption) << "byte " << i;
  }
  BaseChunkRef object_zero{0, 0, Sha256("chunk", 5)};
  EncodeBaseChunkRef(object_zero, bytes);
  EXPECT_EQ(DecodeBaseChunkRef(bytes, &back).code(), Status::Code::kCorruption);
}

TEST(BaseFormat, NewFrameKindsAreNamedAndChunkKindsKnown) {
  EXPECT_EQ(FrameKindName(9), "BASE");
  EXPECT_EQ(FrameKindName(10), "BASE_REF");
  EXPECT_EQ(FrameKindName(11), "BASE_DELTA");
  EXPECT_EQ(FrameKindName(12), "DIGEST_BLOCK");
  for (uint8_t kind : {2, 3, 6, 10, 11}) EXPECT_TRUE(IsChunkKind(kind)) << int(kind);
  for (uint8_t kind : {0, 1, 4, 5, 7, 8, 9, 12, 13}) EXPECT_FALSE(IsChunkKind(kind)) << int(kind);
}

// The writer puts the BASE frame first, and refuses base frames in a stream
// that has no base.
TEST(BaseFormat, WriterStartsAnIncrementalStreamWithItsBaseFrame) {
  MemorySink sink;
  StreamHeader header;
  header.flags = kStreamFlagBase;
  StreamWriter writer(&sink, header);
  writer.SetBase(SomeBase());
  ASSERT_TRUE(writer.Start().ok());
  const std::vector<uint8_t>& bytes = sink.bytes();
  ASSERT_GE(bytes.size(), kStreamHeaderSize + kFrameHeaderSize);
  FrameHeader first;
  ASSERT_TRUE(DecodeFrameHeader(bytes.data() + kStreamHeaderSize, &first).ok());
  EXPECT_EQ(first.kind, static_cast<uint8_t>(FrameKind::kBase));
  EXPECT_EQ(first.sequence, 0u);
  ASSERT_EQ(bytes.size(), kStreamHeaderSize + kFrameHeaderSize + first.payload_size);
  BaseDescriptor back;
  ASSERT_TRUE(
      DecodeBaseDescriptor(std::span<const uint8_t>(bytes).subspan(kStreamHeaderSize + kFrameHeaderSize), &back).ok());
  EXPECT_EQ(back, SomeBase());
  EXPECT_EQ(first.raw_hash, Hash64(bytes.data() + kStreamHeaderSize + kFrameHeaderSize, first.payload_size));

  MemorySink plain_sink;
  StreamWriter plain(&plain_sink, StreamHeader{});
  ASSERT_TRUE(plain.Start().ok());
  Result<uint32_t> id = plain.BeginObject(ObjectMetadata{"a", {}}, 4);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(plain.AddBaseRef(*id, 0, 4, 0, BaseChunkRef{1, 0, {}}).code(), Status::Code::kInternal);
}

}  // namespace
}  // namespace vramflow
