// The SEEK_INDEX frame: what the writer records, its byte encoding, the
// validator's check against the frames, and ReadSeekIndex from a stream's
// two ends.
#include "streamer/seek_index.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "streamer/stream_reader.h"
#include "streamer/stream_writer.h"
#include "tests/test_util.h"
#include "transport/memory_stream.h"

namespace vramflow {
namespace {

using testing::ModelBytes;
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
  FrameHeader h;
  ASSERT_TRUE(DecodeFrameHeader(stream.data() + stored->index_offset, &h).ok());
  h.raw_hash = Hash64(payload->data(), payload->size());
  EncodeFrameHeader(h, stream.data() + stored->index_offset);
  std::copy(payload->begin(), payload->end(), stream.begin() + stored->index_offset + kFrameHeaderSize);
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
  for (const SeekIndexObject& o : index.objects) {
    FrameHeader h;
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
  // Found from the two ends: the stream header and one tail read.
  EXPECT_EQ(stored->bytes_read, std::min<uint64_t>(stream.size(), 256u << 10) +
                                    (stream.size() > (256u << 10) ? kStreamHeaderSize : 0));
  EXPECT_EQ(stored->totals.object_count, 3u);
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

TEST(SeekIndex, EncodeDecodeRoundTrip) {
  std::vector<uint8_t> stream = IndexedStream();
  MemoryRandomAccess at(stream);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok());
  Result<std::vector<uint8_t>> bytes = EncodeSeekIndex(stored->index);
  ASSERT_TRUE(bytes.ok());
  Result<SeekIndex> back = DecodeSeekIndex(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == stored->index);
}

// Decoding rejects an index that contradicts itself, naming what is wrong.
TEST(SeekIndex, DecodeRejectsInconsistentIndexes) {
  std::vector<uint8_t> stream = IndexedStream();
  MemoryRandomAccess at(stream);
  const SeekIndex good = ReadSeekIndex(at)->index;
  auto rejects = [&](const std::function<void(SeekIndex&)>& edit, const std::string& words) {
    SeekIndex index = good;
    edit(index);
    Result<std::vector<uint8_t>> bytes = EncodeSeekIndex(index);
    ASSERT_TRUE(bytes.ok());
    Result<SeekIndex> back = DecodeSeekIndex(*bytes);
    ASSERT_FALSE(back.ok()) << "accepted: " << words;
    EXPECT_NE(back.status().ToString().find(words), std::string::npos) << back.status().ToString();
  };
  rejects([](SeekIndex& i) { i.objects[0].chunks.pop_back(); }, "cover");
  rejects([](SeekIndex& i) { i.objects[1].chunks[2].object_offset += 1; }, "does not start where");
  rejects([](SeekIndex& i) { i.objects[1].chunks[0].stream_offset = i.objects[0].chunks[0].stream_offset; }, "overlap");
  rejects([](SeekIndex& i) { i.objects[2].chunks[0].source_offset = 7; }, "no earlier DATA frame");
  rejects([](SeekIndex& i) { i.objects[2].id = i.objects[0].id; }, "listed twice");
  rejects([](SeekIndex& i) { i.objects[0].chunks[0].kind = FrameKind::kObjectEnd; }, "is not a chunk");
  rejects([](SeekIndex& i) { i.objects[0].chunks[0].stream_offset = i.objects[0].end_offset + 1; }, "outside");

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

TEST(SeekIndex, ValidatorRejectsAnIndexThatDisagreesWithTheFrames) {
  std::vector<uint8_t> stream = IndexedStream();
  EditIndex(stream, [](SeekIndex& i) {
    // Swap two DATA entries' stream offsets: self-consistent, but wrong.
    std::swap(i.objects[0].chunks[0].stream_offset, i.objects[1].chunks[0].stream_offset);
    std::swap(i.objects[0].chunks[0].payload_size, i.objects[1].chunks[0].payload_size);
  });
  Status s = ReadAll(stream);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("seek index entry of object 1 'gpu0/a'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("SEEK_INDEX"), std::string::npos) << s.ToString();

  std::vector<uint8_t> renamed = IndexedStream();
  EditIndex(renamed, [](SeekIndex& i) { i.objects[1].metadata.attributes[0].second = "7"; });
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
  ASSERT_EQ(testing::RunCommand(bin + " pack -q " + dir.File("in.bin") + " -o " + dir.File("file.vfs"), &out), 0) << out;
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
