// SPDX-License-Identifier: MIT
// StreamWriter -> ReadStream round trips: object sizes around chunk
// boundaries, several and interleaved objects, every codec, zero-run merging,
// objects of unknown size, writer misuse, and the RangeSet used by the reader.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "streamer/format/frame_reader.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_validator.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using testing::ModelBytes;
using testing::PackToMemory;
using testing::TestObject;
using testing::UnpackFromMemory;

constexpr uint32_t kChunk = 4096;

const std::vector<std::string>& CodecSpecs() {
  static const std::vector<std::string> specs = {"raw", "lz4", "zstd", "zstd:-5", "zstd:3", "huffman", "auto"};
  return specs;
}

EncoderOptions Options(const std::string& codec, const std::string& transform = "auto") {
  EncoderOptions o;
  EXPECT_TRUE(ParseCodecSpec(codec, &o).ok()) << codec;
  EXPECT_TRUE(ParseTransformSpec(transform, &o).ok()) << transform;
  return o;
}

// Every frame header of a stream, in order (STREAM_END included), read with
// FrameReader; fails the test on any framing error.
std::vector<FrameHeader> Frames(const std::vector<uint8_t>& stream) {
  MemorySource source(stream);
  FrameReader reader(&source);
  StreamHeader sh;
  Status s = reader.ReadStreamHeader(&sh);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<FrameHeader> frames;
  while (s.ok()) {
    FrameHeader h;
    bool end = false;
    s = reader.ReadFrameHeader(&h, &end);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok() || end) break;
    frames.push_back(h);
    std::vector<uint8_t> payload(h.payload_size);
    s = reader.ReadPayload(payload);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return frames;
}

size_t CountKind(const std::vector<FrameHeader>& frames, FrameKind kind, uint32_t object_id = 0) {
  size_t n = 0;
  for (const FrameHeader& h : frames)
    if (h.kind == static_cast<uint8_t>(kind) && (object_id == 0 || h.object_id == object_id)) ++n;
  return n;
}

void ExpectRoundTrip(const std::vector<TestObject>& objects, const EncoderOptions& encoder, uint32_t chunk,
                     bool interleave, const std::string& what) {
  std::vector<uint8_t> stream = PackToMemory(objects, encoder, chunk, interleave);
  std::vector<TestObject> back;
  Status s = UnpackFromMemory(stream, &back);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
  ASSERT_EQ(back.size(), objects.size()) << what;
  for (size_t i = 0; i < objects.size(); ++i) {
    EXPECT_EQ(back[i].name, objects[i].name) << what;
    EXPECT_TRUE(back[i].bytes == objects[i].bytes) << what << ": object '" << objects[i].name << "' differs";
  }
}

TEST(StreamRoundTripTest, ObjectSizesAroundChunkBoundariesForEveryCodec) {
  const size_t sizes[] = {0, 1, kChunk - 1, kChunk, kChunk + 1, 50 * kChunk, 50 * kChunk + 17};
  for (const std::string& codec : CodecSpecs()) {
    for (size_t size : sizes) {
      std::vector<TestObject> objects = {{"weights.bin", ModelBytes(DataKind::kFp32Weights, size, 21)}};
      std::string what = codec + " size " + std::to_string(size);
      ExpectRoundTrip(objects, Options(codec), kChunk, false, what);
      // One DATA frame per chunk (fp32 weights have no zero chunks), none larger than a chunk.
      std::vector<FrameHeader> frames = Frames(PackToMemory(objects, Options(codec), kChunk));
      EXPECT_EQ(CountKind(frames, FrameKind::kData), (size + kChunk - 1) / kChunk) << what;
      for (const FrameHeader& h : frames) {
        if (h.kind == static_cast<uint8_t>(FrameKind::kData)) {
          EXPECT_LE(h.raw_size, kChunk) << what;
          EXPECT_LE(h.payload_size, h.raw_size) << what;
        }
      }
      EXPECT_EQ(frames.size(), CountKind(frames, FrameKind::kData) + 3) << what;  // + BEGIN, END, STREAM_END
    }
  }
}

std::vector<TestObject> MixedObjects() {
  std::vector<uint8_t> mixed = ModelBytes(DataKind::kBf16Weights, 9 * kChunk + 100, 3);
  std::fill(mixed.begin() + 2 * kChunk, mixed.begin() + 6 * kChunk, 0);  // a zero region in the middle
  return {
      {"fp32", ModelBytes(DataKind::kFp32Weights, 7 * kChunk + 3, 1)},
      {"bf16-with-hole", mixed},
      {"empty", {}},
      {"zeros", ModelBytes(DataKind::kZeros, 5 * kChunk + 1, 1)},
      {"random", ModelBytes(DataKind::kRandom, 3 * kChunk - 1, 1)},
      {"adam-v", ModelBytes(DataKind::kAdamV, 4 * kChunk, 1)},
      {"one-byte", {0x42}},
      {"dir/fp16", ModelBytes(DataKind::kFp16Weights, 2 * kChunk + 2, 1)},
  };
}

TEST(StreamRoundTripTest, SeveralObjectsForEveryCodec) {
  for (const std::string& codec : CodecSpecs()) {
    ExpectRoundTrip(MixedObjects(), Options(codec), kChunk, false, codec + " sequential");
  }
}

TEST(StreamRoundTripTest, InterleavedObjectsForEveryCodec) {
  for (const std::string& codec : CodecSpecs()) {
    ExpectRoundTrip(MixedObjects(), Options(codec), kChunk, true, codec + " interleaved");
  }
  // The interleaved stream really does alternate objects between DATA frames.
  std::vector<FrameHeader> frames = Frames(PackToMemory(MixedObjects(), Options("auto"), kChunk, true));
  size_t switches = 0;
  uint32_t last = 0;
  for (const FrameHeader& h : frames) {
    if (h.kind != static_cast<uint8_t>(FrameKind::kData)) continue;
    if (last != 0 && h.object_id != last) ++switches;
    last = h.object_id;
  }
  EXPECT_GT(switches, 10u);
}

TEST(StreamRoundTripTest, FixedTransformsRoundTrip) {
  for (const char* transform : {"none", "bytegroup2", "bytegroup4"}) {
    for (const char* codec : {"lz4", "zstd", "huffman", "auto"}) {
      ExpectRoundTrip(MixedObjects(), Options(codec, transform), 3 * 1024 + 1, true,
                      std::string(codec) + "/" + transform);
    }
  }
}

TEST(StreamRoundTripTest, ReadsWithShortReads) {
  std::vector<uint8_t> stream = PackToMemory(MixedObjects(), Options("auto"), kChunk);
  for (size_t max_read : {1, 7, 63, 65}) {
    MemorySource source(stream, max_read);
    StreamVisitor visitor;
    Status s = ReadStream(source, visitor);
    EXPECT_TRUE(s.ok()) << "max_read " << max_read << ": " << s.ToString();
  }
}

TEST(ZeroRunTest, ZeroObjectOfManyChunksIsOneZeroRunFrame) {
  for (bool interleave : {false, true}) {
    std::vector<TestObject> objects = {{"a", std::vector<uint8_t>(50 * kChunk + 9, 0)},
                                       {"b", std::vector<uint8_t>(30 * kChunk, 0)}};
    std::vector<uint8_t> stream = PackToMemory(objects, Options("auto"), kChunk, interleave);
    std::vector<FrameHeader> frames = Frames(stream);
    EXPECT_EQ(CountKind(frames, FrameKind::kData), 0u);
    ASSERT_EQ(CountKind(frames, FrameKind::kZeroRun, 1), 1u) << "interleave " << interleave;
    ASSERT_EQ(CountKind(frames, FrameKind::kZeroRun, 2), 1u) << "interleave " << interleave;
    for (const FrameHeader& h : frames) {
      if (h.kind != static_cast<uint8_t>(FrameKind::kZeroRun)) continue;
      EXPECT_EQ(h.offset, 0u);
      EXPECT_EQ(h.raw_size, objects[h.object_id - 1].bytes.size());
      EXPECT_EQ(h.payload_size, 0u);
    }
    EXPECT_EQ(frames.size(), 7u);  // 2 x (BEGIN, ZERO_RUN, END) + STREAM_END
    ExpectRoundTrip(objects, Options("auto"), kChunk, interleave, "zeros");
  }
}

// Counts the chunk events the reader reports, by kind.
class ChunkCounter final : public StreamVisitor {
 public:
  Status OnChunk(const ChunkEvent& e) override {
    if (e.header.kind == static_cast<uint8_t>(FrameKind::kZeroRun)) {
      ++zero_runs;
      zero_bytes += e.header.raw_size;
      EXPECT_TRUE(e.payload.empty());
      EXPECT_TRUE(e.data.empty());
    } else {
      ++data;
      EXPECT_EQ(e.data.size(), e.header.raw_size);
    }
    return Status::Ok();
  }
  size_t zero_runs = 0, data = 0;
  uint64_t zero_bytes = 0;
};

TEST(ZeroRunTest, OnlyAdjacentZeroChunksMerge) {
  // zeros(10 chunks) data(1 chunk) zeros(10 chunks + 5 bytes)
  std::vector<uint8_t> bytes(21 * kChunk + 5, 0);
  std::vector<uint8_t> data = ModelBytes(DataKind::kFp32Weights, kChunk, 2);
  std::copy(data.begin(), data.end(), bytes.begin() + 10 * kChunk);
  std::vector<uint8_t> stream = PackToMemory({{"holes", bytes}}, Options("zstd"), kChunk);
  MemorySource source(stream);
  ChunkCounter counter;
  Status s = ReadStream(source, counter);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(counter.zero_runs, 2u);
  EXPECT_EQ(counter.data, 1u);
  EXPECT_EQ(counter.zero_bytes, 20u * kChunk + 5);
  ExpectRoundTrip({{"holes", bytes}}, Options("zstd"), kChunk, false, "holes");
}

TEST(ZeroRunTest, WriterStatsCountMergedFrames) {
  MemorySink sink;
  StreamWriter writer(&sink, StreamHeader{});
  ASSERT_TRUE(writer.Start().ok());
  Result<uint32_t> id = writer.BeginObject(ObjectMetadata{"z", {}}, 8 * kChunk);
  ASSERT_TRUE(id.ok());
  EncodedChunk zero;
  zero.zero_run = true;
  for (uint64_t off = 0; off < 8 * kChunk; off += kChunk) ASSERT_TRUE(writer.AddChunk(*id, off, kChunk, zero).ok());
  ASSERT_TRUE(writer.EndObject(*id).ok());
  ASSERT_TRUE(writer.Finish().ok());
  EXPECT_EQ(writer.stats().zero_frames, 1u);
  EXPECT_EQ(writer.stats().zero_bytes, 8u * kChunk);
  EXPECT_EQ(writer.stats().data_frames, 0u);
  EXPECT_EQ(writer.bytes_written(), sink.bytes().size());
}

// Records what the reader says about each object.
class ObjectRecorder final : public StreamVisitor {
 public:
  Status OnObjectBegin(const ObjectState& o) override {
    begin_sizes.push_back(o.size);
    bytes.emplace_back();
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& e) override {
    std::vector<uint8_t>& b = bytes.back();
    if (b.size() < e.header.offset + e.header.raw_size) b.resize(e.header.offset + e.header.raw_size, 0);
    if (e.header.kind == static_cast<uint8_t>(FrameKind::kData))
      std::copy(e.data.begin(), e.data.end(), b.begin() + static_cast<ptrdiff_t>(e.header.offset));
    return Status::Ok();
  }
  Status OnObjectEnd(const ObjectState& o) override {
    end_sizes.push_back(o.size);
    return Status::Ok();
  }
  Status OnStreamEnd(const StreamTotals& t) override {
    totals = t;
    ended = true;
    return Status::Ok();
  }
  std::vector<uint64_t> begin_sizes, end_sizes;
  std::vector<std::vector<uint8_t>> bytes;
  StreamTotals totals;
  bool ended = false;
};

// Writes `content` as one object of unknown size, in chunks of `chunk` bytes.
std::vector<uint8_t> WriteUnknownSize(const std::vector<uint8_t>& content, uint32_t chunk) {
  MemorySink sink;
  StreamWriter writer(&sink, StreamHeader{});
  ChunkEncoder encoder(Options("auto"));
  EXPECT_TRUE(writer.Start().ok());
  Result<uint32_t> id = writer.BeginObject(ObjectMetadata{"stdin", {}}, kUnknownObjectSize);
  EXPECT_TRUE(id.ok());
  for (size_t off = 0; off < content.size(); off += chunk) {
    size_t n = std::min<size_t>(chunk, content.size() - off);
    EncodedChunk c;
    EXPECT_TRUE(encoder.Encode(std::span<const uint8_t>(content.data() + off, n), &c).ok());
    Status s = writer.AddChunk(*id, off, n, c);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  Status s = writer.EndObject(*id);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = writer.Finish();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return sink.bytes();
}

TEST(UnknownSizeTest, ObjectOfUnknownSizeRoundTripsAndReportsItsRealSize) {
  std::vector<uint8_t> trailing_zeros = ModelBytes(DataKind::kBf16Weights, 6 * kChunk + 5, 8);
  std::fill(trailing_zeros.begin() + 3 * kChunk, trailing_zeros.end(), 0);
  const std::vector<std::vector<uint8_t>> contents = {{},
                                                      {7},
                                                      ModelBytes(DataKind::kFp32Weights, 3 * kChunk + 5, 4),
                                                      trailing_zeros,
                                                      std::vector<uint8_t>(4 * kChunk, 0)};
  for (const std::vector<uint8_t>& content : contents) {
    std::vector<uint8_t> stream = WriteUnknownSize(content, kChunk);
    MemorySource source(stream);
    ObjectRecorder rec;
    Status s = ReadStream(source, rec);
    ASSERT_TRUE(s.ok()) << "size " << content.size() << ": " << s.ToString();
    ASSERT_EQ(rec.begin_sizes.size(), 1u);
    EXPECT_EQ(rec.begin_sizes[0], kUnknownObjectSize);
    ASSERT_EQ(rec.end_sizes.size(), 1u);
    EXPECT_EQ(rec.end_sizes[0], content.size());
    rec.bytes[0].resize(rec.end_sizes[0], 0);
    EXPECT_TRUE(rec.bytes[0] == content) << "size " << content.size();
    EXPECT_TRUE(rec.ended);
    EXPECT_EQ(rec.totals.raw_bytes, content.size());
    EXPECT_EQ(rec.totals.object_count, 1u);
    std::vector<TestObject> back;
    ASSERT_TRUE(UnpackFromMemory(stream, &back).ok());
    ASSERT_EQ(back.size(), 1u);
    EXPECT_TRUE(back[0].bytes == content);
  }
}

TEST(UnknownSizeTest, ZeroTailOfUnknownSizeIsOneFrame) {
  std::vector<uint8_t> content(9 * kChunk + 3, 0);
  std::vector<FrameHeader> frames = Frames(WriteUnknownSize(content, kChunk));
  ASSERT_EQ(CountKind(frames, FrameKind::kZeroRun), 1u);
  ASSERT_EQ(CountKind(frames, FrameKind::kObjectEnd), 1u);
  for (const FrameHeader& h : frames) {
    if (h.kind == static_cast<uint8_t>(FrameKind::kZeroRun)) {
      EXPECT_EQ(h.raw_size, content.size());
    }
    if (h.kind == static_cast<uint8_t>(FrameKind::kObjectBegin)) {
      EXPECT_EQ(h.raw_size, kUnknownObjectSize);
    }
    if (h.kind == static_cast<uint8_t>(FrameKind::kObjectEnd)) {
      EXPECT_EQ(h.raw_size, content.size());
    }
  }
}

// A started writer with one object of `size` bytes open.
struct OpenWriter {
  MemorySink sink;
  StreamWriter writer{&sink, StreamHeader{}};
  uint32_t id = 0;
  EncodedChunk chunk;  // a raw chunk of arbitrary bytes
  std::vector<uint8_t> bytes = std::vector<uint8_t>(kChunk, 0x11);
  explicit OpenWriter(uint64_t size) {
    EXPECT_TRUE(writer.Start().ok());
    Result<uint32_t> r = writer.BeginObject(ObjectMetadata{"obj", {}}, size);
    EXPECT_TRUE(r.ok());
    id = r.ok() ? *r : 0;
    ChunkEncoder encoder(Options("raw"));
    EXPECT_TRUE(encoder.Encode(bytes, &chunk).ok());  // payload points into `bytes`
  }
};

// The stream a writer produced reads back without error.
Status Verify(const MemorySink& sink) {
  MemorySource source(sink.bytes());
  StreamVisitor visitor;
  return ReadStream(source, visitor);
}

TEST(StreamWriterErrorTest, AddChunkOutsideTheObjectIsRefused) {
  OpenWriter w(2 * kChunk);
  EXPECT_FALSE(w.writer.AddChunk(w.id, 2 * kChunk, kChunk, w.chunk).ok()) << "starts at the end";
  EXPECT_FALSE(w.writer.AddChunk(w.id, kChunk + 1, kChunk, w.chunk).ok()) << "ends one byte past the end";
  EXPECT_FALSE(w.writer.AddChunk(w.id, ~uint64_t{0} - 10, kChunk, w.chunk).ok()) << "offset overflow";
  EXPECT_FALSE(w.writer.AddChunk(w.id, 0, 0, w.chunk).ok()) << "empty chunk";
  EXPECT_FALSE(w.writer.AddChunk(w.id + 1, 0, kChunk, w.chunk).ok()) << "object not open";
  // Refused calls change nothing: the object can still be completed.
  ASSERT_TRUE(w.writer.AddChunk(w.id, 0, kChunk, w.chunk).ok());
  ASSERT_TRUE(w.writer.AddChunk(w.id, kChunk, kChunk, w.chunk).ok());
  ASSERT_TRUE(w.writer.EndObject(w.id).ok());
  ASSERT_TRUE(w.writer.Finish().ok());
  Status s = Verify(w.sink);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(StreamWriterErrorTest, UnknownSizeChunksMustComeInOrder) {
  OpenWriter w(kUnknownObjectSize);
  ASSERT_TRUE(w.writer.AddChunk(w.id, 0, kChunk, w.chunk).ok());
  EXPECT_FALSE(w.writer.AddChunk(w.id, 2 * kChunk, kChunk, w.chunk).ok()) << "gap";
  EXPECT_FALSE(w.writer.AddChunk(w.id, 0, kChunk, w.chunk).ok()) << "repeat";
  ASSERT_TRUE(w.writer.AddChunk(w.id, kChunk, kChunk, w.chunk).ok());
  ASSERT_TRUE(w.writer.EndObject(w.id).ok());
  ASSERT_TRUE(w.writer.Finish().ok());
  EXPECT_TRUE(Verify(w.sink).ok());
}

TEST(StreamWriterErrorTest, EndObjectBeforeCompleteIsRefused) {
  OpenWriter w(2 * kChunk);
  EXPECT_FALSE(w.writer.EndObject(w.id).ok()) << "nothing added";
  ASSERT_TRUE(w.writer.AddChunk(w.id, 0, kChunk, w.chunk).ok());
  EXPECT_FALSE(w.writer.EndObject(w.id).ok()) << "half added";
  EXPECT_FALSE(w.writer.EndObject(w.id + 7).ok()) << "never begun";
  ASSERT_TRUE(w.writer.AddChunk(w.id, kChunk, kChunk, w.chunk).ok());
  ASSERT_TRUE(w.writer.EndObject(w.id).ok());
  EXPECT_FALSE(w.writer.EndObject(w.id).ok()) << "ended twice";
  ASSERT_TRUE(w.writer.Finish().ok());
  EXPECT_TRUE(Verify(w.sink).ok());
}

TEST(StreamWriterErrorTest, FinishWithAnObjectOpenIsRefused) {
  OpenWriter w(kChunk);
  Status s = w.writer.Finish();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("obj"), std::string::npos) << s.ToString();
  // No STREAM_END was written: what is there is an incomplete stream.
  Status v = Verify(w.sink);
  EXPECT_EQ(v.code(), Status::Code::kTruncated) << v.ToString();
}

TEST(StreamWriterErrorTest, CallsOutsideAnOpenStreamAreRefused) {
  MemorySink sink;
  StreamWriter writer(&sink, StreamHeader{});
  EXPECT_FALSE(writer.BeginObject(ObjectMetadata{"x", {}}, 1).ok()) << "before Start";
  EXPECT_FALSE(writer.Finish().ok()) << "Finish before Start";
  ASSERT_TRUE(writer.Start().ok());
  EXPECT_FALSE(writer.Start().ok()) << "Start twice";
  EXPECT_EQ(writer.BeginObject(ObjectMetadata{"", {}}, 1).status().code(), Status::Code::kInvalidArgument)
      << "empty name";
  EXPECT_FALSE(writer.BeginObject(ObjectMetadata{"big", {}}, kMaxObjectSize + 1).ok()) << "too large";
  ASSERT_TRUE(writer.Finish().ok());
  EXPECT_FALSE(writer.BeginObject(ObjectMetadata{"x", {}}, 1).ok()) << "after Finish";
  EXPECT_FALSE(writer.Finish().ok()) << "Finish twice";
  EXPECT_TRUE(Verify(sink).ok());
}

// A dedup stream: object "a" of three DATA chunks, object "b" whose chunks 0
// and 2 refer to a's chunk 1 and to b's own chunk 1.
struct DedupStream {
  std::vector<TestObject> objects;
  std::vector<uint8_t> stream;
  WriterStats stats;
};

DedupStream WriteDedupStream(uint64_t b_size_declared) {
  DedupStream d;
  std::vector<uint8_t> a = ModelBytes(DataKind::kFp32Weights, 3 * kChunk, 1);
  std::vector<uint8_t> b_mid = ModelBytes(DataKind::kBf16Weights, kChunk, 2);
  std::vector<uint8_t> b(a.begin() + kChunk, a.begin() + 2 * kChunk);
  b.insert(b.end(), b_mid.begin(), b_mid.end());
  b.insert(b.end(), b_mid.begin(), b_mid.end());
  d.objects = {{"a", a}, {"b", b}};

  MemorySink sink;
  StreamHeader header;
  header.flags = kStreamFlagDedup;
  StreamWriter writer(&sink, header);
  ChunkEncoder encoder(Options("auto"));
  EXPECT_TRUE(writer.Start().ok());
  Result<uint32_t> ida = writer.BeginObject(ObjectMetadata{"a", {}}, a.size());
  EXPECT_TRUE(ida.ok());
  for (uint64_t off = 0; off < a.size(); off += kChunk) {
    EncodedChunk c;
    EXPECT_TRUE(encoder.Encode(std::span<const uint8_t>(a.data() + off, kChunk), &c).ok());
    EXPECT_TRUE(writer.AddChunk(*ida, off, kChunk, c).ok());
  }
  EXPECT_TRUE(writer.EndObject(*ida).ok());
  Result<uint32_t> idb = writer.BeginObject(ObjectMetadata{"b", {}}, b_size_declared);
  EXPECT_TRUE(idb.ok());
  auto hash = [&](uint64_t off) { return Hash64(b.data() + off, kChunk); };
  Status s = writer.AddDedupRef(*idb, 0, kChunk, hash(0), DedupRef{*ida, kChunk, HashContent128(b.data(), kChunk)});
  EXPECT_TRUE(s.ok()) << s.ToString();
  EncodedChunk c;
  EXPECT_TRUE(encoder.Encode(std::span<const uint8_t>(b.data() + kChunk, kChunk), &c).ok());
  EXPECT_TRUE(writer.AddChunk(*idb, kChunk, kChunk, c).ok());
  s = writer.AddDedupRef(*idb, 2 * kChunk, kChunk, hash(2 * kChunk),
                         DedupRef{*idb, kChunk, HashContent128(b.data() + 2 * kChunk, kChunk)});
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(writer.EndObject(*idb).ok());
  EXPECT_TRUE(writer.Finish().ok());
  d.stream = sink.bytes();
  d.stats = writer.stats();
  return d;
}

TEST(DedupStreamTest, ReferencesRoundTrip) {
  for (uint64_t declared : {uint64_t{3 * kChunk}, kUnknownObjectSize}) {
    DedupStream d = WriteDedupStream(declared);
    EXPECT_EQ(d.stats.dedup_frames, 2u);
    EXPECT_EQ(d.stats.dedup_bytes, 2u * kChunk);
    std::vector<FrameHeader> frames = Frames(d.stream);
    EXPECT_EQ(CountKind(frames, FrameKind::kDedupRef), 2u);
    EXPECT_EQ(CountKind(frames, FrameKind::kData), 4u);
    std::vector<TestObject> back;
    Status s = UnpackFromMemory(d.stream, &back);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(back.size(), 2u);
    EXPECT_TRUE(back[0].bytes == d.objects[0].bytes);
    EXPECT_TRUE(back[1].bytes == d.objects[1].bytes);
  }
}

TEST(StreamWriterErrorTest, DedupRefMisuseIsRefused) {
  const DedupRef ref{1, 0, {}};
  {
    OpenWriter w(2 * kChunk);  // the stream header has no dedup flag
    EXPECT_FALSE(w.writer.AddDedupRef(w.id, 0, kChunk, 1, ref).ok());
  }
  MemorySink sink;
  StreamHeader header;
  header.flags = kStreamFlagDedup;
  StreamWriter writer(&sink, header);
  ASSERT_TRUE(writer.Start().ok());
  Result<uint32_t> id = writer.BeginObject(ObjectMetadata{"x", {}}, 2 * kChunk);
  ASSERT_TRUE(id.ok());
  EXPECT_FALSE(writer.AddDedupRef(*id, kChunk + 1, kChunk, 1, ref).ok()) << "past the object size";
  EXPECT_FALSE(writer.AddDedupRef(*id, 0, 0, 1, ref).ok()) << "empty";
  EXPECT_FALSE(writer.AddDedupRef(*id + 1, 0, kChunk, 1, ref).ok()) << "object not open";
  Result<uint32_t> unknown = writer.BeginObject(ObjectMetadata{"y", {}}, kUnknownObjectSize);
  ASSERT_TRUE(unknown.ok());
  EXPECT_FALSE(writer.AddDedupRef(*unknown, kChunk, kChunk, 1, ref).ok()) << "unknown size, out of order";
  EXPECT_FALSE(writer.AddDedupRef(*unknown, kMaxObjectSize, kChunk, 1, ref).ok()) << "unknown size, far past the end";
}

TEST(StreamWriterTest, EmptyStreamIsValid) {
  std::vector<uint8_t> stream = PackToMemory({}, Options("auto"), kChunk);
  EXPECT_EQ(stream.size(), kStreamHeaderSize + kFrameHeaderSize + kStreamEndPayloadSize);
  std::vector<TestObject> back;
  Status s = UnpackFromMemory(stream, &back);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(back.empty());
}

TEST(RangeSetTest, AdjacentRangesMerge) {
  RangeSet r;
  EXPECT_EQ(r.End(), 0u);
  EXPECT_TRUE(r.Add(0, 10));
  EXPECT_TRUE(r.Add(10, 20));
  EXPECT_EQ(r.range_count(), 1u);
  EXPECT_TRUE(r.Add(30, 40));
  EXPECT_EQ(r.range_count(), 2u);
  EXPECT_TRUE(r.Add(25, 30));  // merges with the range after it
  EXPECT_EQ(r.range_count(), 2u);
  EXPECT_TRUE(r.Add(20, 25));  // bridges both
  EXPECT_EQ(r.range_count(), 1u);
  EXPECT_EQ(r.End(), 40u);
  uint64_t b = 0, e = 0;
  EXPECT_FALSE(r.FirstGap(40, &b, &e));
}

TEST(RangeSetTest, InOrderChunksKeepOneRange) {
  RangeSet r;
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(r.Add(i * 4096, (i + 1) * 4096));
  EXPECT_EQ(r.range_count(), 1u);
  EXPECT_EQ(r.End(), 1000u * 4096);
}

TEST(RangeSetTest, OverlapsAreRefusedAndChangeNothing) {
  RangeSet r;
  ASSERT_TRUE(r.Add(10, 20));
  ASSERT_TRUE(r.Add(40, 50));
  const std::pair<uint64_t, uint64_t> overlapping[] = {{10, 20}, {12, 15}, {5, 25},  {5, 11},  {19, 30},
                                                       {0, 100}, {15, 45}, {35, 41}, {49, 60}, {45, 46}};
  for (auto [b, e] : overlapping) {
    EXPECT_FALSE(r.Add(b, e)) << "[" << b << ", " << e << ")";
    EXPECT_EQ(r.range_count(), 2u);
    uint64_t gb = 0, ge = 0;
    ASSERT_TRUE(r.FirstGap(50, &gb, &ge));
    EXPECT_EQ(gb, 0u);
    EXPECT_EQ(ge, 10u);
    EXPECT_EQ(r.End(), 50u);
  }
  EXPECT_TRUE(r.Add(20, 40));  // touching on both sides is not overlap
  EXPECT_EQ(r.range_count(), 1u);
}

TEST(RangeSetTest, EmptyRangeAddsNothing) {
  RangeSet r;
  EXPECT_TRUE(r.Add(5, 5));
  EXPECT_EQ(r.range_count(), 0u);
  EXPECT_EQ(r.End(), 0u);
}

TEST(RangeSetTest, FirstGapFindsTheEarliestHole) {
  RangeSet r;
  uint64_t b = 99, e = 99;
  EXPECT_FALSE(r.FirstGap(0, &b, &e));
  ASSERT_TRUE(r.FirstGap(10, &b, &e));
  EXPECT_EQ(b, 0u);
  EXPECT_EQ(e, 10u);

  ASSERT_TRUE(r.Add(5, 10));
  ASSERT_TRUE(r.FirstGap(10, &b, &e));  // hole at the start
  EXPECT_EQ(b, 0u);
  EXPECT_EQ(e, 5u);

  ASSERT_TRUE(r.Add(0, 5));
  EXPECT_FALSE(r.FirstGap(10, &b, &e));
  ASSERT_TRUE(r.FirstGap(15, &b, &e));  // hole at the end
  EXPECT_EQ(b, 10u);
  EXPECT_EQ(e, 15u);

  ASSERT_TRUE(r.Add(20, 30));
  ASSERT_TRUE(r.Add(40, 45));
  ASSERT_TRUE(r.FirstGap(45, &b, &e));  // first of two holes in the middle
  EXPECT_EQ(b, 10u);
  EXPECT_EQ(e, 20u);
  EXPECT_EQ(r.End(), 45u);
}

}  // namespace
}  // namespace vramflow
