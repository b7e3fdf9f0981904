// SPDX-License-Identifier: MIT
// The SEEK_INDEX frame: what the writer records, its byte encoding, the
// validator's check against the frames, and ReadSeekIndex from a stream's
// two ends.
#include "streamer/format/seek_index.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using testing::ModelBytes;
using testing::RandomBytes;
using testing::TextBytes;

constexpr uint32_t kChunk = 64 << 10;

void Check(const Status& s) { ASSERT_TRUE(s.ok()) << s.ToString(); }

// Two interleaved objects (text and fp32 weights), one with a zero hole, and
// a third that repeats the first one's chunks as DEDUP_REFs.
std::vector<uint8_t> IndexedStream(uint32_t flags = kStreamFlagSeekIndex | kStreamFlagDedup) {
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = kChunk;
  header.flags = flags;
  StreamWriter writer(&sink, header);
  EXPECT_TRUE(writer.Start().ok());
  std::vector<uint8_t> a = TextBytes(5 * kChunk + 100);
  std::vector<uint8_t> b = ModelBytes(DataKind::kFp32Weights, 6 * kChunk, 3);
  std::fill(b.begin() + kChunk, b.begin() + 3 * kChunk, 0);
  ChunkEncoder encoder(EncoderOptions{});
  uint32_t ia = *writer.BeginObject(ObjectMetadata{"gpu0/a", {{"gpu", "0"}}}, a.size());
  uint32_t ib = *writer.BeginObject(ObjectMetadata{"gpu1/b", {{"gpu", "1"}}}, b.size());
  std::vector<uint64_t> hashes;
  for (uint64_t off = 0; off < b.size(); off += kChunk) {
    EncodedChunk chunk;
    if (off < a.size()) {
      size_t n = std::min<uint64_t>(kChunk, a.size() - off);
      EXPECT_TRUE(encoder.Encode(std::span<const uint8_t>(a.data() + off, n), &chunk).ok());
      hashes.push_back(chunk.raw_hash);
      EXPECT_TRUE(writer.AddChunk(ia, off, n, chunk).ok());
    }
    EXPECT_TRUE(encoder.Encode(std::span<const uint8_t>(b.data() + off, kChunk), &chunk).ok());
    EXPECT_TRUE(writer.AddChunk(ib, off, kChunk, chunk).ok());
  }
  EXPECT_TRUE(writer.EndObject(ia).ok());
  EXPECT_TRUE(writer.EndObject(ib).ok());
  if (flags & kStreamFlagDedup) {
    uint32_t ic = *writer.BeginObject(ObjectMetadata{"gpu1/copy-of-a", {{"gpu", "1"}}}, 2 * kChunk);
    for (uint64_t i = 0; i < 2; ++i) {
      DedupRef ref;
      ref.source_object_id = ia;
      ref.source_offset = i * kChunk;
      ref.content = HashContent128(a.data() + i * kChunk, kChunk);
      EXPECT_TRUE(writer.AddDedupRef(ic, i * kChunk, kChunk, hashes[i], ref).ok());
    }
    EXPECT_TRUE(writer.EndObject(ic).ok());
  }
  EXPECT_TRUE(writer.Finish().ok());
  return sink.bytes();
}

// Puts `payload` (as long as the old one) into the frame at `offset` and
// fixes the frame's hash and header checksum.
void RewritePayload(std::vector<uint8_t>& stream, uint64_t offset, const std::vector<uint8_t>& payload) {
  FrameHeader h;
  ASSERT_TRUE(DecodeFrameHeader(stream.data() + offset, &h).ok());
  ASSERT_EQ(h.payload_size, payload.size());
  h.raw_hash = Hash64(payload.data(), payload.size());
  EncodeFrameHeader(h, stream.data() + offset);
  std::copy(payload.begin(), payload.end(), stream.begin() + static_cast<ptrdiff_t>(offset + kFrameHeaderSize));
}

// Re-encodes the SEEK_INDEX frame of `stream` after `edit` changed the
// index, fixing the header's hash and checksum, so only the validator's
// comparison with the frames can notice.
void EditIndex(std::vector<uint8_t>& stream, const std::function<void(SeekIndex&)>& edit) {
  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  SeekIndex index = stored->index;
  edit(index);
  Result<std::vector<uint8_t>> payload = EncodeSeekIndex(index);
  ASSERT_TRUE(payload.ok());
  ASSERT_EQ(payload->size(), stream.size() - stored->index_offset - kFrameHeaderSize - 96);
  RewritePayload(stream, stored->index_offset, *payload);
}

// Rewrites the INDEX_BLOCK frames of `stream` from an index whose chunks
// `edit` changed (same number per object; the chunks of IndexedStream are in
// stream order), fixing hashes, so only the checks of the records can notice.
void EditBlocks(std::vector<uint8_t>& stream, const std::function<void(SeekIndex&)>& edit) {
  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  SeekIndex index = stored->index;
  edit(index);
  for (const SeekIndexObject& o : index.objects) {
    size_t next = 0;
    for (const IndexBlockRef& b : o.blocks) {
      std::vector<uint8_t> payload =
          EncodeIndexBlock(std::span<const SeekIndexChunk>(o.chunks).subspan(next, b.chunk_count));
      next += b.chunk_count;
      ASSERT_NO_FATAL_FAILURE(RewritePayload(stream, b.stream_offset, payload));
    }
  }
}

Status ReadAll(const std::vector<uint8_t>& stream) {
  MemorySource source(stream);
  StreamVisitor nothing;
  return ReadStream(source, nothing);
}

TEST(SeekIndex, WriterIndexPointsAtEveryFrame) {
  std::vector<uint8_t> stream = IndexedStream();
  Check(ReadAll(stream));  // the validator rebuilds the index and compares
  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  const SeekIndex& index = stored->index;
  ASSERT_EQ(index.objects.size(), 3u);
  EXPECT_EQ(index.objects[0].metadata.name, "gpu0/a");
  EXPECT_EQ(*index.objects[1].metadata.Find("gpu"), "1");
  EXPECT_EQ(index.objects[1].size, 6u * kChunk);
  // b: DATA, one merged ZERO_RUN of two chunks, then DATA x3.
  ASSERT_EQ(index.objects[1].chunks.size(), 5u);
  EXPECT_EQ(index.objects[1].chunks[1].kind, FrameKind::kZeroRun);
  EXPECT_EQ(index.objects[1].chunks[1].raw_size, 2u * kChunk);
  EXPECT_EQ(index.objects[2].chunks[1].kind, FrameKind::kDedupRef);
  EXPECT_EQ(index.objects[2].chunks[1].source_object_id, index.objects[0].id);
  EXPECT_EQ(index.objects[2].chunks[1].source_offset, uint64_t{kChunk});
  // Every entry names the frame that really is at that offset.
  const uint64_t tail_offset = stream.size() - std::min<uint64_t>(stream.size(), 256u << 10);
  uint64_t block_bytes = 0;  // of the blocks before the tail read: read on their own
  for (const SeekIndexObject& o : index.objects) {
    FrameHeader h;
    EXPECT_EQ(o.chunks.size(), o.chunk_count);
    ASSERT_EQ(o.blocks.size(), 1u);  // a small object: one block, right before its end
    Check(DecodeFrameHeader(stream.data() + o.blocks[0].stream_offset, &h));
    EXPECT_EQ(h.kind, static_cast<uint8_t>(FrameKind::kIndexBlock));
    EXPECT_EQ(h.object_id, o.id);
    EXPECT_EQ(o.blocks[0].stream_offset + o.blocks[0].frame_bytes(), o.end_offset);
    if (o.blocks[0].stream_offset < tail_offset) block_bytes += o.blocks[0].frame_bytes();
    Check(DecodeFrameHeader(stream.data() + o.begin_offset, &h));
    EXPECT_EQ(h.kind, static_cast<uint8_t>(FrameKind::kObjectBegin));
    EXPECT_EQ(h.payload_size, o.begin_payload_size);
    Check(DecodeFrameHeader(stream.data() + o.end_offset, &h));
    EXPECT_EQ(h.kind, static_cast<uint8_t>(FrameKind::kObjectEnd));
    EXPECT_EQ(h.raw_hash, o.digest);
    for (const SeekIndexChunk& c : o.chunks) {
      Check(DecodeFrameHeader(stream.data() + c.stream_offset, &h));
      EXPECT_EQ(h.kind, static_cast<uint8_t>(c.kind));
      EXPECT_EQ(h.object_id, o.id);
      EXPECT_EQ(h.offset, c.object_offset);
      EXPECT_EQ(h.raw_size, c.raw_size);
      EXPECT_EQ(h.payload_size, c.payload_size);
    }
  }
  // Found from the two ends (the stream header and one tail read), then the blocks the tail lacks.
  EXPECT_EQ(stored->bytes_read, std::min<uint64_t>(stream.size(), 256u << 10) +
                                    (stream.size() > (256u << 10) ? kStreamHeaderSize : 0) + block_bytes);
  EXPECT_EQ(stored->totals.object_count, 3u);
}

// The INDEX_BLOCKs inside the first (tail) read are taken from it: only the
// blocks before it are read on their own. Here an object of 6 MiB whose
// block lies before the tail, then one of 320 KiB of random bytes (stored
// raw) whose block lies inside it.
TEST(SeekIndex, BlocksInsideTheTailReadAreNotReadAgain) {
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = kChunk;
  header.flags = kStreamFlagSeekIndex;
  StreamWriter writer(&sink, header);
  Check(writer.Start());
  EncodedChunk chunk;
  ChunkEncoder encoder(EncoderOptions{});
  std::vector<uint8_t> early = ModelBytes(DataKind::kFp32Weights, 6u << 20, 1);
  uint32_t id = *writer.BeginObject(ObjectMetadata{"early", {}}, early.size());
  for (uint64_t off = 0; off < early.size(); off += kChunk) {
    Check(encoder.Encode(std::span<const uint8_t>(early.data() + off, kChunk), &chunk));
    Check(writer.AddChunk(id, off, kChunk, chunk));
  }
  Check(writer.EndObject(id));
  std::vector<uint8_t> late = RandomBytes(5 * kChunk, 7);
  id = *writer.BeginObject(ObjectMetadata{"late", {}}, late.size());
  for (uint64_t off = 0; off < late.size(); off += kChunk) {
    Check(encoder.Encode(std::span<const uint8_t>(late.data() + off, kChunk), &chunk));
    Check(writer.AddChunk(id, off, kChunk, chunk));
  }
  Check(writer.EndObject(id));
  Check(writer.Finish());
  const std::vector<uint8_t>& stream = sink.bytes();
  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(stored->index.objects.size(), 2u);
  const uint64_t tail_offset = stream.size() - (256u << 10);
  uint64_t before_tail = 0, inside_tail = 0;
  for (const SeekIndexObject& o : stored->index.objects)
    for (const IndexBlockRef& b : o.blocks)
      (b.stream_offset < tail_offset ? before_tail : inside_tail) += b.frame_bytes();
  ASSERT_GT(before_tail, 0u) << "the early object's block should lie before the tail read";
  ASSERT_GT(inside_tail, 0u) << "the late object's block should lie inside the tail read";
  EXPECT_EQ(stored->bytes_read, (256u << 10) + kStreamHeaderSize + before_tail);
  EXPECT_EQ(stored->index.objects[1].chunks.size(), 5u);
  EXPECT_EQ(stored->index.objects[0].chunks.size(), early.size() / kChunk);
}

// A stored stream's index is held only within the reader's share of the
// budget: past it, ReadSeekIndex says NotSupported (the caller reads the
// stream whole, within its budget) before reading what would not fit.
TEST(SeekIndex, AnIndexLargerThanItsBudgetIsNotHeld) {
  std::vector<uint8_t> stream = IndexedStream();
  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  const uint64_t index_frame = stream.size() - 96 - stored->index_offset;

  Result<StoredStreamIndex> tiny = ReadSeekIndex(at, index_frame);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), Status::Code::kNotSupported) << tiny.status().ToString();
  EXPECT_NE(tiny.status().message().find("SEEK_INDEX"), std::string::npos) << tiny.status().ToString();

  // Room for the SEEK_INDEX frame but not for the chunk records of its blocks.
  Result<StoredStreamIndex> no_records = ReadSeekIndex(at, 2 * index_frame);
  ASSERT_FALSE(no_records.ok());
  EXPECT_EQ(no_records.status().code(), Status::Code::kNotSupported) << no_records.status().ToString();
  EXPECT_NE(no_records.status().message().find("chunk records"), std::string::npos) << no_records.status().ToString();

  Result<StoredStreamIndex> enough = ReadSeekIndex(at, 1u << 20);
  ASSERT_TRUE(enough.ok()) << enough.status().ToString();
  EXPECT_EQ(enough->index, stored->index);
}

TEST(SeekIndex, LargeIndexIsReadBeyondTheFirstTailRead) {
  // 6000 one-chunk objects: an index of ~0.5 MiB, more than the first read.
  MemorySink sink;
  StreamHeader header;
  header.flags = kStreamFlagSeekIndex;
  StreamWriter writer(&sink, header);
  Check(writer.Start());
  EncodedChunk zero;
  zero.zero_run = true;
  for (int i = 0; i < 6000; ++i) {
    uint32_t id = *writer.BeginObject(ObjectMetadata{"bo-" + std::to_string(i), {{"gpu", "0"}}}, 4096);
    Check(writer.AddChunk(id, 0, 4096, zero));
    Check(writer.EndObject(id));
  }
  Check(writer.Finish());
  Check(ReadAll(sink.bytes()));
  MemoryRandomAccess at(sink.bytes());
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->index.objects.size(), 6000u);
  EXPECT_EQ(stored->index.objects[5999].metadata.name, "bo-5999");
  EXPECT_LT(stored->bytes_read, sink.bytes().size());
}

// The frames of a stream, walked in order: (stream offset, header).
std::vector<std::pair<uint64_t, FrameHeader>> Frames(const std::vector<uint8_t>& stream) {
  std::vector<std::pair<uint64_t, FrameHeader>> frames;
  for (uint64_t at = kStreamHeaderSize; at < stream.size();) {
    FrameHeader h;
    EXPECT_TRUE(DecodeFrameHeader(stream.data() + at, &h).ok());
    frames.emplace_back(at, h);
    at += kFrameHeaderSize + h.payload_size;
  }
  return frames;
}

// Two interleaved objects of 5000 and 7000 small chunks: the index records
// held at any point stay within kMaxUnlistedChunks, and the SEEK_INDEX names
// blocks, not chunks.
TEST(SeekIndex, BlocksBoundTheRecordsHeldAndKeepTheSeekIndexSmall) {
  constexpr uint32_t kSmall = 64;
  MemorySink sink;
  StreamHeader header;
  header.flags = kStreamFlagSeekIndex;
  StreamWriter writer(&sink, header);
  Check(writer.Start());
  ChunkEncoder encoder(EncoderOptions{});
  std::vector<uint8_t> text = TextBytes(7000 * kSmall);
  uint32_t ia = *writer.BeginObject(ObjectMetadata{"a", {}}, 5000 * kSmall);
  uint32_t ib = *writer.BeginObject(ObjectMetadata{"b", {}}, 7000 * kSmall);
  for (uint64_t i = 0; i < 7000; ++i) {
    EncodedChunk chunk;
    Check(encoder.Encode(std::span<const uint8_t>(text.data() + i * kSmall, kSmall), &chunk));
    if (i < 5000) Check(writer.AddChunk(ia, i * kSmall, kSmall, chunk));
    Check(writer.AddChunk(ib, i * kSmall, kSmall, chunk));
    if (i == 4999) Check(writer.EndObject(ia));
  }
  Check(writer.EndObject(ib));
  Check(writer.Finish());
  const std::vector<uint8_t>& stream = sink.bytes();
  Check(ReadAll(stream));

  size_t unlisted = 0, most = 0, blocks = 0;
  for (const auto& [at, h] : Frames(stream)) {
    auto kind = static_cast<FrameKind>(h.kind);
    if (kind == FrameKind::kData || kind == FrameKind::kZeroRun || kind == FrameKind::kDedupRef) ++unlisted;
    if (kind == FrameKind::kIndexBlock) {
      ++blocks;
      ASSERT_LE(h.payload_size / kChunkRecordSize, unlisted);
      unlisted -= h.payload_size / kChunkRecordSize;
    }
    most = std::max(most, unlisted);
  }
  EXPECT_EQ(unlisted, 0u);
  EXPECT_EQ(most, kMaxUnlistedChunks);
  EXPECT_GE(blocks, 12000u / kMaxUnlistedChunks);

  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  const uint64_t index_payload = stream.size() - 96 - stored->index_offset - kFrameHeaderSize;
  EXPECT_LT(index_payload, 512u) << "a SEEK_INDEX listing all 12000 chunks would take 576000 bytes";
  ASSERT_EQ(stored->index.objects.size(), 2u);
  EXPECT_EQ(stored->index.objects[0].chunks.size(), 5000u);
  EXPECT_EQ(stored->index.objects[1].chunks.size(), 7000u);
  EXPECT_EQ(stored->index.objects[1].chunks[6999].object_offset, 6999u * kSmall);

  // Without its first INDEX_BLOCK (frames renumbered), too many chunk frames go unlisted.
  std::vector<uint8_t> dropped(stream.begin(), stream.begin() + kStreamHeaderSize);
  bool skipped = false;
  uint64_t sequence = 0;
  for (const auto& [at, h] : Frames(stream)) {
    if (!skipped && h.kind == static_cast<uint8_t>(FrameKind::kIndexBlock)) {
      skipped = true;
      continue;
    }
    FrameHeader renumbered = h;
    renumbered.sequence = sequence++;
    uint8_t bytes[kFrameHeaderSize];
    EncodeFrameHeader(renumbered, bytes);
    dropped.insert(dropped.end(), bytes, bytes + kFrameHeaderSize);
    dropped.insert(dropped.end(), stream.begin() + static_cast<ptrdiff_t>(at + kFrameHeaderSize),
                   stream.begin() + static_cast<ptrdiff_t>(at + kFrameHeaderSize + h.payload_size));
  }
  Status s = ReadAll(dropped);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("more than 4096 chunk frames that no INDEX_BLOCK lists yet"), std::string::npos)
      << s.ToString();
}

// A stream of an earlier vramflow: the indexed flag alone, and a version 1
// SEEK_INDEX. It is read in order, its index passed over; random access
// says it cannot use it.
TEST(SeekIndex, VersionOneIndexIsReadPastAndNotUsed) {
  std::vector<uint8_t> stream = IndexedStream(kStreamFlagDedup);
  StreamHeader header;
  Check(DecodeStreamHeader(stream.data(), &header));
  header.flags |= kStreamFlagSeekIndex;
  EncodeStreamHeader(header, stream.data());
  const size_t end_at = stream.size() - 96;
  FrameHeader end;
  Check(DecodeFrameHeader(stream.data() + end_at, &end));
  StreamTotals totals = DecodeStreamTotals(stream.data() + end_at + kFrameHeaderSize);
  std::vector<uint8_t> payload = TextBytes(1000);  // not looked at
  FrameHeader index;
  index.kind = static_cast<uint8_t>(FrameKind::kSeekIndex);
  index.sequence = end.sequence;
  index.payload_size = static_cast<uint32_t>(payload.size());
  index.raw_hash = Hash64(payload.data(), payload.size());
  std::vector<uint8_t> tail(kFrameHeaderSize);
  EncodeFrameHeader(index, tail.data());
  tail.insert(tail.end(), payload.begin(), payload.end());
  totals.frame_count += 1;
  totals.stream_bytes += tail.size();
  uint8_t totals_bytes[kStreamEndPayloadSize];
  EncodeStreamTotals(totals, totals_bytes);
  end.sequence += 1;
  end.raw_hash = Hash64(totals_bytes, sizeof(totals_bytes));
  uint8_t end_bytes[kFrameHeaderSize];
  EncodeFrameHeader(end, end_bytes);
  stream.resize(end_at);
  stream.insert(stream.end(), tail.begin(), tail.end());
  stream.insert(stream.end(), end_bytes, end_bytes + kFrameHeaderSize);
  stream.insert(stream.end(), totals_bytes, totals_bytes + sizeof(totals_bytes));

  Check(ReadAll(stream));
  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.status().code(), Status::Code::kNotSupported);
  EXPECT_NE(stored.status().ToString().find("version 1 seek index"), std::string::npos) << stored.status().ToString();
}

TEST(SeekIndex, EncodeDecodeRoundTrip) {
  std::vector<uint8_t> stream = IndexedStream();
  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok());
  Result<std::vector<uint8_t>> bytes = EncodeSeekIndex(stored->index);
  ASSERT_TRUE(bytes.ok());
  Result<SeekIndex> back = DecodeSeekIndex(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  SeekIndex without_chunks = stored->index;  // the SEEK_INDEX names blocks; chunks come from them
  for (SeekIndexObject& o : without_chunks.objects) o.chunks.clear();
  EXPECT_TRUE(*back == without_chunks);
}

// Decoding rejects an index that contradicts itself, naming what is wrong.
TEST(SeekIndex, DecodeRejectsInconsistentIndexes) {
  std::vector<uint8_t> stream = IndexedStream();
  MemoryRandomAccess at(stream);
  SeekIndex good = ReadSeekIndex(at)->index;
  for (SeekIndexObject& o : good.objects) o.chunks.clear();
  auto rejects = [&](const std::function<void(SeekIndex&)>& edit, const std::string& words) {
    SeekIndex index = good;
    edit(index);
    Result<std::vector<uint8_t>> bytes = EncodeSeekIndex(index);
    ASSERT_TRUE(bytes.ok());
    Result<SeekIndex> back = DecodeSeekIndex(*bytes);
    ASSERT_FALSE(back.ok()) << "accepted: " << words;
    EXPECT_NE(back.status().ToString().find(words), std::string::npos) << back.status().ToString();
  };
  rejects([](SeekIndex& i) { i.objects[2].id = i.objects[0].id; }, "listed twice");
  rejects([](SeekIndex& i) { i.objects[1].id = 0; }, "object id 0");
  rejects([](SeekIndex& i) { i.objects[0].chunk_count += 1; }, "chunks, its entry says");
  rejects([](SeekIndex& i) { i.objects[0].blocks[0].chunk_count = 0; }, "lists 0 chunks");
  rejects([](SeekIndex& i) { i.objects[0].blocks[0].chunk_count = kMaxUnlistedChunks + 1; }, "lists 4097 chunks");

  Result<std::vector<uint8_t>> bytes = EncodeSeekIndex(good);
  ASSERT_TRUE(bytes.ok());
  for (size_t cut : {size_t{0}, size_t{20}, bytes->size() / 2, bytes->size() - 1}) {
    std::vector<uint8_t> shorter(bytes->begin(), bytes->begin() + cut);
    EXPECT_FALSE(DecodeSeekIndex(shorter).ok()) << "cut at " << cut;
  }
  std::vector<uint8_t> bad_count = *bytes;
  bad_count[4] = 0xff;  // object count
  EXPECT_FALSE(DecodeSeekIndex(bad_count).ok());
}

// The index read from the blocks is checked as a whole: chunks covering each
// object exactly, frames apart, DEDUP_REF sources naming earlier DATA frames.
TEST(SeekIndex, ReadSeekIndexRejectsBlocksThatContradictEachOther) {
  const std::vector<uint8_t> good = IndexedStream();
  auto rejects = [&](const std::function<void(SeekIndex&)>& edit, const std::string& words) {
    std::vector<uint8_t> stream = good;
    EditBlocks(stream, edit);
    MemoryRandomAccess at(stream);
    Result<StoredStreamIndex> stored = ReadSeekIndex(at);
    ASSERT_FALSE(stored.ok()) << "accepted: " << words;
    EXPECT_NE(stored.status().ToString().find(words), std::string::npos) << stored.status().ToString();
    EXPECT_FALSE(ReadAll(stream).ok()) << words;  // the validator compares each block with the frames
  };
  rejects([](SeekIndex& i) { i.objects[1].chunks.back().raw_size -= 1; }, "cover");
  rejects([](SeekIndex& i) { i.objects[1].chunks[2].object_offset += 1; }, "does not start where");
  rejects([](SeekIndex& i) { i.objects[1].chunks[0].stream_offset = i.objects[0].chunks[0].stream_offset; }, "overlap");
  rejects([](SeekIndex& i) { i.objects[2].chunks[0].source_offset = 7; }, "no earlier DATA frame");
  rejects([](SeekIndex& i) { i.objects[0].chunks[0].kind = FrameKind::kObjectEnd; }, "is not a chunk");
  rejects([](SeekIndex& i) { i.objects[0].chunks[0].stream_offset = i.objects[0].end_offset + 1; }, "outside");
  // A SEEK_INDEX naming a block where none is.
  std::vector<uint8_t> stream = good;
  EditIndex(stream, [](SeekIndex& i) { i.objects[1].blocks[0].stream_offset = i.objects[1].chunks[0].stream_offset; });
  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_FALSE(stored.ok());
  EXPECT_NE(stored.status().ToString().find("expected an INDEX_BLOCK"), std::string::npos)
      << stored.status().ToString();
}

TEST(SeekIndex, ValidatorRejectsAnIndexThatDisagreesWithTheFrames) {
  std::vector<uint8_t> stream = IndexedStream();
  EditBlocks(stream, [](SeekIndex& i) {
    // Swap two DATA entries' stream offsets: self-consistent, but wrong.
    std::swap(i.objects[0].chunks[0].stream_offset, i.objects[1].chunks[0].stream_offset);
    std::swap(i.objects[0].chunks[0].payload_size, i.objects[1].chunks[0].payload_size);
  });
  Status s = ReadAll(stream);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("INDEX_BLOCK record 0 says a DATA frame at stream offset"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.ToString().find("object 1 'gpu0/a'"), std::string::npos) << s.ToString();

  std::vector<uint8_t> moved = IndexedStream();
  EditIndex(moved, [](SeekIndex& i) { i.objects[0].blocks[0].stream_offset += 1; });
  s = ReadAll(moved);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("seek index entry of object 1 'gpu0/a': block 0"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("SEEK_INDEX"), std::string::npos) << s.ToString();

  std::vector<uint8_t> renamed = IndexedStream();
  EditIndex(renamed, [](SeekIndex& i) { i.objects[1].metadata.attributes[0].second.assign(1, '7'); });
  s = ReadAll(renamed);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("'gpu1/b'"), std::string::npos) << s.ToString();
}

TEST(SeekIndex, AnnouncedButMissingIndexIsCorruption) {
  std::vector<uint8_t> stream = IndexedStream(kStreamFlagDedup);  // written without an index
  StreamHeader header;
  Check(DecodeStreamHeader(stream.data(), &header));
  header.flags |= kStreamFlagSeekIndex;
  EncodeStreamHeader(header, stream.data());
  Status s = ReadAll(stream);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("ends without one"), std::string::npos) << s.ToString();
  MemoryRandomAccess at(stream);
  EXPECT_FALSE(ReadSeekIndex(at).ok());
  // Announcing index blocks too: the first object's end already finds its chunks unlisted.
  header.flags |= kStreamFlagIndexBlocks;
  EncodeStreamHeader(header, stream.data());
  s = ReadAll(stream);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("chunk frames that no INDEX_BLOCK lists"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("OBJECT_END"), std::string::npos) << s.ToString();
}

TEST(SeekIndex, StreamWithoutIndexIsNotSupportedForRandomAccess) {
  std::vector<uint8_t> stream = IndexedStream(kStreamFlagDedup);
  Check(ReadAll(stream));
  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_FALSE(stored.ok());
  EXPECT_EQ(stored.status().code(), Status::Code::kNotSupported);
  EXPECT_NE(stored.status().ToString().find("no seek index"), std::string::npos);
}

TEST(SeekIndex, TruncatedOrExtendedStreamsAreRefused) {
  std::vector<uint8_t> stream = IndexedStream();
  std::vector<uint8_t> cut(stream.begin(), stream.end() - 10);
  MemoryRandomAccess at_cut(cut);
  Result<StoredStreamIndex> r = ReadSeekIndex(at_cut);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("STREAM_END"), std::string::npos) << r.status().ToString();

  std::vector<uint8_t> longer = stream;
  longer.insert(longer.end(), 96, 0);
  MemoryRandomAccess at_longer(longer);
  EXPECT_FALSE(ReadSeekIndex(at_longer).ok());

  std::vector<uint8_t> flipped = stream;
  flipped[flipped.size() - 96 - 20] ^= 1;  // inside the index payload (its footer)
  MemoryRandomAccess at_flipped(flipped);
  EXPECT_FALSE(ReadSeekIndex(at_flipped).ok());
  EXPECT_FALSE(ReadAll(flipped).ok());
}

TEST(SeekIndex, OnlySeekableSinksGetAnIndex) {
  testing::TempDir dir;
  std::vector<uint8_t> bytes = TextBytes(300 << 10);
  testing::WriteFileBytes(dir.File("in.bin"), bytes);
  std::string out;
  const std::string bin = testing::VramflowBinary();
  ASSERT_EQ(testing::RunCommand(bin + " pack -q " + dir.File("in.bin") + " -o " + dir.File("file.vfs"), &out), 0)
      << out;
  ASSERT_EQ(testing::RunCommand(bin + " pack -q " + dir.File("in.bin") + " -o - > " + dir.File("pipe.vfs"), &out), 0)
      << out;
  // stdin is packed serially; its output file gets an index all the same.
  ASSERT_EQ(testing::RunCommand(bin + " pack -q - -o " + dir.File("stdin.vfs") + " < " + dir.File("in.bin"), &out), 0)
      << out;
  std::vector<uint8_t> file = testing::ReadFileBytes(dir.File("file.vfs"));
  std::vector<uint8_t> pipe = testing::ReadFileBytes(dir.File("pipe.vfs"));
  StreamHeader fh, ph;
  Check(DecodeStreamHeader(file.data(), &fh));
  Check(DecodeStreamHeader(pipe.data(), &ph));
  EXPECT_TRUE(fh.flags & kStreamFlagSeekIndex);
  EXPECT_FALSE(ph.flags & kStreamFlagSeekIndex);
  std::vector<uint8_t> from_stdin = testing::ReadFileBytes(dir.File("stdin.vfs"));
  MemoryRandomAccess stdin_at(from_stdin);
  Result<StoredStreamIndex> stdin_index = ReadSeekIndex(stdin_at);
  ASSERT_TRUE(stdin_index.ok()) << stdin_index.status().ToString();
  EXPECT_EQ(stdin_index->index.objects.at(0).size, bytes.size());
  EXPECT_EQ(testing::RunCommand(bin + " verify " + dir.File("stdin.vfs"), &out), 0) << out;
  MemoryRandomAccess at(file);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(stored->index.objects.size(), 1u);
  EXPECT_EQ(stored->index.objects[0].size, bytes.size());
  EXPECT_EQ(testing::RunCommand(bin + " verify " + dir.File("file.vfs"), &out), 0) << out;
}

}  // namespace
}  // namespace vramflow
