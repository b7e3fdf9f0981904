// SPDX-License-Identifier: MIT
// Damaged streams: every bit flip in a header, sampled flips in payloads,
// truncation anywhere, bad stream headers, and semantic corruptions built
// with correct checksums so each check of the reader is tested in isolation.
// ReadStream must fail with the right code and a message that says where.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/endian.h"
#include "common/hash.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using testing::ModelBytes;
using testing::TestObject;
using testing::TextBytes;
using testing::UnpackFromMemory;

constexpr uint32_t kChunk = 4096;

// Object ids in the stream BuildStream() writes.
constexpr uint32_t kPlanarObject = 1;  // fp32 weights: planar chunks
constexpr uint32_t kRawObject = 2;     // random bytes: raw chunks
constexpr uint32_t kMixedObject = 3;   // zeros, one zstd chunk, zeros
constexpr uint32_t kEmptyObject = 4;   // no chunks
constexpr uint32_t kDedupObject = 5;   // a DEDUP_REF to planar.bin's first chunk, then a raw chunk

struct Source {
  std::vector<TestObject> objects;
  std::vector<uint8_t> stream;
};

// Adds `bytes` as an object, chunk by chunk, encoding [zstd_begin, zstd_end)
// with plain zstd and the rest with `encoder`.
void AddObject(StreamWriter& writer, ChunkEncoder& encoder, const TestObject& o, uint64_t zstd_begin = 0,
               uint64_t zstd_end = 0) {
  ChunkEncoder zstd(EncoderOptions{CodecChoice::kZstd, 3, TransformChoice::kNone, true});
  Result<uint32_t> id = writer.BeginObject(ObjectMetadata{o.name, {{"kind", "test"}}}, o.bytes.size());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  for (uint64_t off = 0; off < o.bytes.size(); off += kChunk) {
    size_t n = std::min<uint64_t>(kChunk, o.bytes.size() - off);
    EncodedChunk chunk;
    ChunkEncoder& e = off >= zstd_begin && off < zstd_end ? zstd : encoder;
    ASSERT_TRUE(e.Encode(std::span<const uint8_t>(o.bytes.data() + off, n), &chunk).ok());
    ASSERT_TRUE(writer.AddChunk(*id, off, n, chunk).ok());
  }
  ASSERT_TRUE(writer.EndObject(*id).ok());
}

// A valid dedup stream of five objects with planar, raw and zstd DATA
// frames, two ZERO_RUN frames and a DEDUP_REF frame.
const Source& ValidStream() {
  static const Source* source = [] {
    auto* s = new Source;
    std::vector<uint8_t> mixed(6 * kChunk, 0);
    std::vector<uint8_t> text = TextBytes(kChunk);
    std::copy(text.begin(), text.end(), mixed.begin() + 3 * kChunk);
    s->objects = {{"planar.bin", ModelBytes(DataKind::kFp32Weights, 3 * kChunk + 12, 1)},
                  {"raw.bin", ModelBytes(DataKind::kRandom, 2 * kChunk, 1)},
                  {"mixed.bin", mixed},
                  {"empty.bin", {}},
                  {"copy.bin", {}}};
    std::vector<uint8_t>& copy = s->objects[4].bytes;
    copy.assign(s->objects[0].bytes.begin(), s->objects[0].bytes.begin() + kChunk);
    std::vector<uint8_t> tail = ModelBytes(DataKind::kRandom, kChunk, 2);
    copy.insert(copy.end(), tail.begin(), tail.end());
    MemorySink sink;
    StreamHeader header;
    header.chunk_size = kChunk;
    header.zstd_level = 3;
    header.producer = "vramflow corruption test";
    header.flags = kStreamFlagDedup;
    StreamWriter writer(&sink, header);
    ChunkEncoder encoder(EncoderOptions{});
    EXPECT_TRUE(writer.Start().ok());
    AddObject(writer, encoder, s->objects[0]);
    AddObject(writer, encoder, s->objects[1]);
    AddObject(writer, encoder, s->objects[2], 3 * kChunk, 4 * kChunk);
    AddObject(writer, encoder, s->objects[3]);
    // copy.bin: its first chunk refers to planar.bin's first chunk.
    Result<uint32_t> id = writer.BeginObject(ObjectMetadata{"copy.bin", {}}, copy.size());
    EXPECT_TRUE(id.ok());
    DedupRef ref{kPlanarObject, 0, HashContent128(copy.data(), kChunk)};
    EXPECT_TRUE(writer.AddDedupRef(*id, 0, kChunk, Hash64(copy.data(), kChunk), ref).ok());
    EncodedChunk chunk;
    EXPECT_TRUE(encoder.Encode(std::span<const uint8_t>(copy.data() + kChunk, kChunk), &chunk).ok());
    EXPECT_TRUE(writer.AddChunk(*id, kChunk, kChunk, chunk).ok());
    EXPECT_TRUE(writer.EndObject(*id).ok());
    EXPECT_TRUE(writer.Finish().ok());
    s->stream = sink.bytes();
    return s;
  }();
  return *source;
}

struct Frame {
  FrameHeader header;
  std::vector<uint8_t> payload;
  uint64_t offset = 0;  // where it was in the parsed stream
};

struct Parsed {
  std::vector<uint8_t> stream_header;
  std::vector<Frame> body;  // every frame before STREAM_END
  Frame end;                // the STREAM_END frame
};

// Splits a well-formed stream into frames (checksums checked, meaning not).
Parsed Parse(const std::vector<uint8_t>& stream) {
  Parsed p;
  p.stream_header.assign(stream.begin(), stream.begin() + kStreamHeaderSize);
  size_t pos = kStreamHeaderSize;
  while (pos < stream.size()) {
    Frame f;
    f.offset = pos;
    Status s = DecodeFrameHeader(stream.data() + pos, &f.header);
    EXPECT_TRUE(s.ok()) << s.ToString();
    pos += kFrameHeaderSize;
    f.payload.assign(stream.begin() + static_cast<ptrdiff_t>(pos),
                     stream.begin() + static_cast<ptrdiff_t>(pos + f.header.payload_size));
    pos += f.header.payload_size;
    if (f.header.kind == static_cast<uint8_t>(FrameKind::kStreamEnd)) p.end = f;
    else p.body.push_back(std::move(f));
  }
  return p;
}

void AppendFrame(std::vector<uint8_t>& out, const FrameHeader& h, std::span<const uint8_t> payload) {
  uint8_t buf[kFrameHeaderSize];
  EncodeFrameHeader(h, buf);
  out.insert(out.end(), buf, buf + kFrameHeaderSize);
  out.insert(out.end(), payload.begin(), payload.end());
}

// Writes `frames` as a stream with fresh sequence numbers, payload sizes and
// checksums, and a STREAM_END whose totals match them, so that the only
// thing wrong with the result is what the caller changed in the frames.
std::vector<uint8_t> Reframe(const std::vector<uint8_t>& stream_header, const std::vector<Frame>& frames) {
  std::vector<uint8_t> out = stream_header;
  StreamTotals totals;
  for (size_t i = 0; i < frames.size(); ++i) {
    FrameHeader h = frames[i].header;
    h.sequence = i;
    h.payload_size = static_cast<uint32_t>(frames[i].payload.size());
    if (h.kind == static_cast<uint8_t>(FrameKind::kObjectBegin)) ++totals.object_count;
    if (h.kind == static_cast<uint8_t>(FrameKind::kObjectEnd)) totals.raw_bytes += h.raw_size;
    AppendFrame(out, h, frames[i].payload);
  }
  totals.frame_count = frames.size();
  totals.stream_bytes = out.size();
  uint8_t payload[kStreamEndPayloadSize];
  EncodeStreamTotals(totals, payload);
  FrameHeader end;
  end.kind = static_cast<uint8_t>(FrameKind::kStreamEnd);
  end.sequence = frames.size();
  end.payload_size = kStreamEndPayloadSize;
  end.raw_hash = Hash64(payload, sizeof(payload));
  AppendFrame(out, end, payload);
  return out;
}

// Rewrites the frame header at `offset` (checksum recomputed).
void RewriteHeader(std::vector<uint8_t>& stream, size_t offset, const std::function<void(FrameHeader&)>& change) {
  FrameHeader h;
  ASSERT_TRUE(DecodeFrameHeader(stream.data() + offset, &h).ok());
  change(h);
  EncodeFrameHeader(h, stream.data() + offset);
}

// Rewrites the STREAM_END totals of a stream (hash and checksum recomputed).
void RewriteTotals(std::vector<uint8_t>& stream, const std::function<void(StreamTotals&)>& change) {
  const size_t at = stream.size() - kStreamEndPayloadSize - kFrameHeaderSize;
  uint8_t* payload = stream.data() + at + kFrameHeaderSize;
  StreamTotals t = DecodeStreamTotals(payload);
  change(t);
  EncodeStreamTotals(t, payload);
  RewriteHeader(stream, at, [&](FrameHeader& h) { h.raw_hash = Hash64(payload, kStreamEndPayloadSize); });
}

Status Read(const std::vector<uint8_t>& stream, bool decode = true) {
  MemorySource source(stream);
  StreamVisitor visitor;
  ReadOptions options;
  options.decode = decode;
  return ReadStream(source, visitor, options);
}

bool Contains(const Status& s, const std::string& needle) { return s.message().find(needle) != std::string::npos; }

// Index in `frames` of the n-th frame of `kind` (of `object`, if not 0).
size_t Find(const std::vector<Frame>& frames, FrameKind kind, uint32_t object = 0, int n = 0) {
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i].header.kind == static_cast<uint8_t>(kind) && (object == 0 || frames[i].header.object_id == object))
      if (n-- == 0) return i;
  ADD_FAILURE() << "no frame " << FrameKindName(static_cast<uint8_t>(kind)) << " of object " << object;
  return 0;
}

TEST(CorruptionFixtureTest, ValidStreamHasEveryFrameFlavourAndReadsBack) {
  const Source& src = ValidStream();
  Parsed p = Parse(src.stream);
  auto has = [&](FrameKind kind, CodecId codec) {
    for (const Frame& f : p.body)
      if (f.header.kind == static_cast<uint8_t>(kind) && f.header.codec == static_cast<uint8_t>(codec)) return true;
    return false;
  };
  EXPECT_TRUE(has(FrameKind::kData, CodecId::kPlanar));
  EXPECT_TRUE(has(FrameKind::kData, CodecId::kRaw));
  EXPECT_TRUE(has(FrameKind::kData, CodecId::kZstd));
  EXPECT_TRUE(has(FrameKind::kZeroRun, CodecId::kRaw));
  EXPECT_TRUE(has(FrameKind::kDedupRef, CodecId::kRaw));
  EXPECT_EQ(p.end.header.kind, static_cast<uint8_t>(FrameKind::kStreamEnd));
  std::vector<TestObject> back;
  Status s = UnpackFromMemory(src.stream, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(back.size(), src.objects.size());
  for (size_t i = 0; i < back.size(); ++i) EXPECT_TRUE(back[i].bytes == src.objects[i].bytes) << i;
}

TEST(CorruptionFixtureTest, ReframeReproducesTheWritersBytesExactly) {
  const Source& src = ValidStream();
  Parsed p = Parse(src.stream);
  EXPECT_TRUE(Reframe(p.stream_header, p.body) == src.stream);
}

// --- (a) bit flips -----------------------------------------------------------

TEST(BitFlipTest, EveryByteOfTheStreamHeader) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  for (size_t i = 0; i < kStreamHeaderSize; ++i) {
    for (unsigned bit : {i % 8, (i + 3) % 8}) {
      std::vector<uint8_t> bad = good;
      bad[i] ^= static_cast<uint8_t>(1u << bit);
      Status s = Read(bad);
      ASSERT_FALSE(s.ok()) << "byte " << i << " bit " << bit;
      EXPECT_TRUE(Contains(s, "stream header")) << "byte " << i << ": " << s.ToString();
    }
  }
}

TEST(BitFlipTest, EveryByteOfEveryFrameHeaderNamesTheFrame) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  Parsed p = Parse(good);
  std::vector<Frame> frames = p.body;
  frames.push_back(p.end);
  for (size_t k = 0; k < frames.size(); ++k) {
    const std::string where = "frame " + std::to_string(k) + " at stream offset " + std::to_string(frames[k].offset);
    for (size_t j = 0; j < kFrameHeaderSize; ++j) {
      std::vector<uint8_t> bad = good;
      unsigned bit = static_cast<unsigned>((j + k) % 8);
      bad[frames[k].offset + j] ^= static_cast<uint8_t>(1u << bit);
      for (bool decode : {true, false}) {
        Status s = Read(bad, decode);
        ASSERT_FALSE(s.ok()) << where << " byte " << j << " bit " << bit;
        EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
        EXPECT_TRUE(Contains(s, where)) << "byte " << j << ": " << s.ToString();
      }
    }
  }
}

TEST(BitFlipTest, AllBitsOfOneDataFrameHeader) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  Parsed p = Parse(good);
  const Frame& f = p.body[Find(p.body, FrameKind::kData, kPlanarObject, 1)];
  for (size_t bit = 0; bit < kFrameHeaderSize * 8; ++bit) {
    std::vector<uint8_t> bad = good;
    bad[f.offset + bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    Status s = Read(bad);
    ASSERT_FALSE(s.ok()) << "bit " << bit;
    EXPECT_TRUE(Contains(s, "checksum mismatch")) << s.ToString();
  }
}

TEST(BitFlipTest, SampledPayloadBitsFailAndNameTheFrame) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  Parsed p = Parse(good);
  std::vector<Frame> frames = p.body;
  frames.push_back(p.end);
  size_t cases = 0;
  for (size_t k = 0; k < frames.size(); ++k) {
    const size_t size = frames[k].payload.size();
    if (size == 0) continue;
    std::vector<size_t> positions = {0, size / 2, size - 1};
    for (size_t i = 1; i < 16; ++i) positions.push_back(i * size / 16);
    if (frames[k].header.kind == static_cast<uint8_t>(FrameKind::kDedupRef)) {
      // Every byte of a DEDUP_REF payload is covered by its checksum.
      positions.clear();
      for (size_t i = 0; i < kDedupRefPayloadSize; ++i) positions.push_back(i);
    }
    const std::string where = "frame " + std::to_string(k) + " (";
    const std::string at = "at stream offset " + std::to_string(frames[k].offset);
    for (size_t pos : positions) {
      std::vector<uint8_t> bad = good;
      unsigned bit = static_cast<unsigned>((pos * 7 + k) % 8);
      bad[frames[k].offset + kFrameHeaderSize + pos] ^= static_cast<uint8_t>(1u << bit);
      Status s = Read(bad);
      ++cases;
      ASSERT_FALSE(s.ok()) << FrameKindName(frames[k].header.kind) << " frame " << k << " payload byte " << pos
                           << " bit " << bit;
      EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
      EXPECT_TRUE(Contains(s, where) && Contains(s, at)) << s.ToString();
    }
  }
  EXPECT_GT(cases, 100u);
}

// --- (b) truncation ----------------------------------------------------------

void ExpectTruncated(const std::vector<uint8_t>& good, size_t length, const std::string& what) {
  std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<ptrdiff_t>(length));
  for (bool decode : {true, false}) {
    Status s = Read(cut, decode);
    EXPECT_EQ(s.code(), Status::Code::kTruncated) << what << " (length " << length << "): " << s.ToString();
    EXPECT_TRUE(Contains(s, "incomplete") || Contains(s, "truncated")) << what << ": " << s.ToString();
  }
}

TEST(TruncationTest, AtEveryFrameBoundary) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  Parsed p = Parse(good);
  ExpectTruncated(good, kStreamHeaderSize, "after the stream header");
  for (const Frame& f : p.body) ExpectTruncated(good, f.offset + kFrameHeaderSize + f.payload.size(), "after a frame");
  ExpectTruncated(good, p.end.offset, "before STREAM_END");
}

TEST(TruncationTest, InsideHeadersAndPayloads) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  Parsed p = Parse(good);
  for (size_t n : {1, 7, 8, 9, 32, 63}) ExpectTruncated(good, n, "inside the stream header");
  std::vector<Frame> frames = p.body;
  frames.push_back(p.end);
  for (const Frame& f : frames) {
    for (size_t n : {1, 16, 32, 60, 63}) ExpectTruncated(good, f.offset + n, "inside a frame header");
    const size_t size = f.payload.size();
    const size_t payload = f.offset + kFrameHeaderSize;
    if (size >= 1) ExpectTruncated(good, payload, "before a payload");
    if (size >= 2) {
      ExpectTruncated(good, payload + 1, "one byte into a payload");
      ExpectTruncated(good, payload + size / 2, "half a payload");
      ExpectTruncated(good, payload + size - 1, "one byte short of a payload");
    }
  }
  ExpectTruncated(good, good.size() - 1, "last byte missing");
}

TEST(TruncationTest, EmptyInput) {
  Status s = Read({});
  EXPECT_EQ(s.code(), Status::Code::kTruncated) << s.ToString();
  EXPECT_TRUE(Contains(s, "empty")) << s.ToString();
}

// --- (c) stream header -------------------------------------------------------

TEST(StreamHeaderTest, UnknownVersionIsNotSupported) {
  std::vector<uint8_t> bad = ValidStream().stream;
  StreamHeader h;
  ASSERT_TRUE(DecodeStreamHeader(bad.data(), &h).ok());
  h.version = 2;
  EncodeStreamHeader(h, bad.data());
  Status s = Read(bad);
  EXPECT_EQ(s.code(), Status::Code::kNotSupported) << s.ToString();
  EXPECT_TRUE(Contains(s, "unknown format version 2")) << s.ToString();
}

TEST(StreamHeaderTest, BadMagic) {
  std::vector<uint8_t> bad = ValidStream().stream;
  bad[1] = 'X';
  Status s = Read(bad);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "bad magic")) << s.ToString();
  // Something that is not a stream at all, shorter and longer than a header.
  for (size_t n : {5, 200}) {
    std::vector<uint8_t> text(n, 'a');
    s = Read(text);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << n << ": " << s.ToString();
    EXPECT_TRUE(Contains(s, "bad magic")) << s.ToString();
  }
}

TEST(StreamHeaderTest, ChecksumMismatch) {
  std::vector<uint8_t> bad = ValidStream().stream;
  bad[30] ^= 0x20;  // inside the producer string
  Status s = Read(bad);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "stream header checksum mismatch")) << s.ToString();
}

TEST(StreamHeaderTest, ReservedBytesAndFlagsWithAValidChecksum) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  for (size_t i : {21, 22, 23}) {
    std::vector<uint8_t> bad = good;
    bad[i] = 1;
    StoreLE32(bad.data() + 60, HeaderChecksum(bad.data(), 60));
    Status s = Read(bad);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << i << ": " << s.ToString();
    EXPECT_TRUE(Contains(s, "reserved")) << s.ToString();
  }
  std::vector<uint8_t> bad = good;
  StreamHeader h;
  ASSERT_TRUE(DecodeStreamHeader(bad.data(), &h).ok());
  h.flags = 16;  // the lowest bit no version of the format defines
  EncodeStreamHeader(h, bad.data());
  EXPECT_EQ(Read(bad).code(), Status::Code::kNotSupported);
  h.flags = kStreamFlagIndexBlocks;  // index blocks without a seek index
  EncodeStreamHeader(h, bad.data());
  Status s = Read(bad);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "index blocks without a seek index")) << s.ToString();

  // A dedup window needs the dedup flag, and stays within the format's limit.
  h.flags = 0;
  h.dedup_window = 16;
  EncodeStreamHeader(h, bad.data());
  s = Read(bad);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "dedup window of 16 DATA frames without the dedup flag")) << s.ToString();
  h.flags = kStreamFlagDedup;
  h.dedup_window = kMaxDedupWindow + 1;
  EncodeStreamHeader(h, bad.data());
  s = Read(bad);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "more than the format's limit of 1048576")) << s.ToString();
}

// --- (d) semantic corruptions with valid checksums ---------------------------

struct SemanticCase {
  std::string name;
  std::function<void(std::vector<Frame>&)> mutate;
  Status::Code code;
  std::string needle;
};

Frame MakeFrame(FrameKind kind, uint32_t object_id, uint64_t offset, uint64_t raw_size,
                std::vector<uint8_t> payload = {}) {
  Frame f;
  f.header.kind = static_cast<uint8_t>(kind);
  f.header.object_id = object_id;
  f.header.offset = offset;
  f.header.raw_size = raw_size;
  f.payload = std::move(payload);
  return f;
}

void RunSemanticCase(const SemanticCase& c) {
  Parsed p = Parse(ValidStream().stream);
  std::vector<Frame> frames = p.body;
  c.mutate(frames);
  std::vector<uint8_t> bad = Reframe(p.stream_header, frames);
  Status s = Read(bad);
  EXPECT_EQ(s.code(), c.code) << c.name << ": " << s.ToString();
  EXPECT_TRUE(Contains(s, c.needle)) << c.name << ": expected '" << c.needle << "' in: " << s.ToString();
  EXPECT_TRUE(Contains(s, "at stream offset")) << c.name << ": " << s.ToString();
}

using Frames = std::vector<Frame>;

TEST(SemanticCorruptionTest, UnknownCodecId) {
  RunSemanticCase({"codec 9", [](Frames& f) { f[Find(f, FrameKind::kData, kRawObject)].header.codec = 9; },
                   Status::Code::kCorruption, "unknown codec id 9"});
  RunSemanticCase({"codec 255", [](Frames& f) { f[Find(f, FrameKind::kData, kMixedObject)].header.codec = 255; },
                   Status::Code::kCorruption, "unknown codec id 255"});
}

TEST(SemanticCorruptionTest, CodecAndTransformDisagree) {
  RunSemanticCase({"unknown transform",
                   [](Frames& f) { f[Find(f, FrameKind::kData, kPlanarObject)].header.transform = 3; },
                   Status::Code::kCorruption, "unknown transform id 3"});
  RunSemanticCase({"planar without transform",
                   [](Frames& f) { f[Find(f, FrameKind::kData, kPlanarObject)].header.transform = 0; },
                   Status::Code::kCorruption, "does not go with transform"});
  RunSemanticCase({"zstd with transform",
                   [](Frames& f) { f[Find(f, FrameKind::kData, kMixedObject)].header.transform = 2; },
                   Status::Code::kCorruption, "does not go with transform"});
  RunSemanticCase({"codec on OBJECT_END",
                   [](Frames& f) { f[Find(f, FrameKind::kObjectEnd, kRawObject)].header.codec = 2; },
                   Status::Code::kCorruption, "codec/transform fields must be zero"});
}

TEST(SemanticCorruptionTest, PayloadHashMismatch) {
  for (uint32_t object : {kPlanarObject, kRawObject, kMixedObject}) {
    RunSemanticCase({"raw_hash of object " + std::to_string(object),
                     [object](Frames& f) { f[Find(f, FrameKind::kData, object)].header.raw_hash ^= 1; },
                     Status::Code::kCorruption, "payload hash mismatch"});
  }
}

TEST(SemanticCorruptionTest, DecodeFailureNamesTheFrame) {
  RunSemanticCase({"zstd payload cut short",
                   [](Frames& f) { f[Find(f, FrameKind::kData, kMixedObject)].payload.pop_back(); },
                   Status::Code::kCorruption, "zstd"});
  RunSemanticCase({"planar payload with an extra byte",
                   [](Frames& f) { f[Find(f, FrameKind::kData, kPlanarObject)].payload.push_back(0); },
                   Status::Code::kCorruption, "plane table"});
  RunSemanticCase({"raw payload shorter than raw_size",
                   [](Frames& f) { f[Find(f, FrameKind::kData, kRawObject)].payload.pop_back(); },
                   Status::Code::kCorruption, "raw payload"});
  RunSemanticCase({"payload larger than raw_size",
                   [](Frames& f) {
                     Frame& d = f[Find(f, FrameKind::kData, kMixedObject)];
                     d.payload.resize(d.header.raw_size + 1);
                   },
                   Status::Code::kCorruption, "larger than"});
}

TEST(SemanticCorruptionTest, OverlappingRanges) {
  RunSemanticCase({"DATA frame repeated",
                   [](Frames& f) {
                     size_t i = Find(f, FrameKind::kData, kPlanarObject, 1);
                     f.insert(f.begin() + static_cast<ptrdiff_t>(i) + 1, f[i]);
                   },
                   Status::Code::kCorruption, "overlaps"});
  RunSemanticCase({"DATA frame inside a zero run",
                   [](Frames& f) {
                     size_t i = Find(f, FrameKind::kData, kMixedObject);
                     f[i].header.offset = kChunk;  // the first zero run covers [0, 3 chunks)
                   },
                   Status::Code::kCorruption, "overlaps"});
  RunSemanticCase({"partial overlap",
                   [](Frames& f) { f[Find(f, FrameKind::kData, kRawObject, 1)].header.offset = kChunk - 1; },
                   Status::Code::kCorruption, "overlaps"});
}

TEST(SemanticCorruptionTest, MissingRange) {
  RunSemanticCase(
      {"DATA frame dropped",
       [](Frames& f) { f.erase(f.begin() + static_cast<ptrdiff_t>(Find(f, FrameKind::kData, kPlanarObject, 1))); },
       Status::Code::kCorruption, "missing"});
  RunSemanticCase(
      {"last DATA frame dropped",
       [](Frames& f) { f.erase(f.begin() + static_cast<ptrdiff_t>(Find(f, FrameKind::kData, kRawObject, 1))); },
       Status::Code::kCorruption, "[4096, 8192) missing"});
  RunSemanticCase(
      {"ZERO_RUN dropped",
       [](Frames& f) { f.erase(f.begin() + static_cast<ptrdiff_t>(Find(f, FrameKind::kZeroRun, kMixedObject))); },
       Status::Code::kCorruption, "[0, 12288) missing"});
}

TEST(SemanticCorruptionTest, ChunkPastTheObjectSize) {
  RunSemanticCase({"object size one smaller",
                   [](Frames& f) {
                     f[Find(f, FrameKind::kObjectBegin, kRawObject)].header.raw_size -= 1;
                     f[Find(f, FrameKind::kObjectEnd, kRawObject)].header.raw_size -= 1;
                   },
                   Status::Code::kCorruption, "past the object size"});
  RunSemanticCase({"DATA offset at the object size",
                   [](Frames& f) { f[Find(f, FrameKind::kData, kRawObject, 1)].header.offset = 2 * kChunk; },
                   Status::Code::kCorruption, "past the object size"});
  RunSemanticCase({"ZERO_RUN offset overflows",
                   [](Frames& f) { f[Find(f, FrameKind::kZeroRun, kMixedObject)].header.offset = ~uint64_t{0} - 5; },
                   Status::Code::kCorruption, "past the object size"});
  RunSemanticCase({"chunk in the empty object",
                   [](Frames& f) {
                     size_t end = Find(f, FrameKind::kObjectEnd, kEmptyObject);
                     f.insert(f.begin() + static_cast<ptrdiff_t>(end),
                              MakeFrame(FrameKind::kZeroRun, kEmptyObject, 0, 1));
                   },
                   Status::Code::kCorruption, "past the object size"});
}

TEST(SemanticCorruptionTest, ObjectLifetime) {
  RunSemanticCase({"DATA for an object never begun",
                   [](Frames& f) { f[Find(f, FrameKind::kData, kRawObject)].header.object_id = 99; },
                   Status::Code::kCorruption, "never begun"});
  RunSemanticCase({"DATA moved after its OBJECT_END",
                   [](Frames& f) {
                     size_t i = Find(f, FrameKind::kData, kRawObject, 1);
                     Frame d = f[i];
                     f.erase(f.begin() + static_cast<ptrdiff_t>(i));
                     f.insert(f.begin() + static_cast<ptrdiff_t>(Find(f, FrameKind::kObjectEnd, kRawObject)) + 1, d);
                   },
                   Status::Code::kCorruption, "missing"});  // OBJECT_END comes first and finds the hole
  RunSemanticCase({"zero run after its object ended",
                   [](Frames& f) { f.push_back(MakeFrame(FrameKind::kZeroRun, kEmptyObject, 0, 1)); },
                   Status::Code::kCorruption, "after its end"});
  RunSemanticCase({"object begun twice",
                   [](Frames& f) { f.push_back(f[Find(f, FrameKind::kObjectBegin, kRawObject)]); },
                   Status::Code::kCorruption, "begun twice"});
  RunSemanticCase(
      {"OBJECT_END dropped",
       [](Frames& f) { f.erase(f.begin() + static_cast<ptrdiff_t>(Find(f, FrameKind::kObjectEnd, kPlanarObject))); },
       Status::Code::kCorruption, "still open"});
  RunSemanticCase({"object digest",
                   [](Frames& f) { f[Find(f, FrameKind::kObjectEnd, kMixedObject)].header.raw_hash += 1; },
                   Status::Code::kCorruption, "digest mismatch"});
  RunSemanticCase({"OBJECT_END size",
                   [](Frames& f) { f[Find(f, FrameKind::kObjectEnd, kEmptyObject)].header.raw_size = 1; },
                   Status::Code::kCorruption, "OBJECT_END gives size 1"});
  RunSemanticCase({"object id 0",
                   [](Frames& f) {
                     for (Frame& x : f)
                       if (x.header.object_id == kEmptyObject) x.header.object_id = 0;
                   },
                   Status::Code::kCorruption, "object id 0"});
}

TEST(SemanticCorruptionTest, FrameFieldsThatMustBeZero) {
  RunSemanticCase({"ZERO_RUN with a payload",
                   [](Frames& f) {
                     f[Find(f, FrameKind::kZeroRun, kMixedObject)].payload = {0, 0, 0};
                   },
                   Status::Code::kCorruption, "ZERO_RUN with a payload"});
  RunSemanticCase({"ZERO_RUN with a hash",
                   [](Frames& f) { f[Find(f, FrameKind::kZeroRun, kMixedObject)].header.raw_hash = 5; },
                   Status::Code::kCorruption, "non-zero hash"});
  RunSemanticCase({"zero-length chunk",
                   [](Frames& f) {
                     size_t end = Find(f, FrameKind::kObjectEnd, kEmptyObject);
                     f.insert(f.begin() + static_cast<ptrdiff_t>(end),
                              MakeFrame(FrameKind::kZeroRun, kEmptyObject, 0, 0));
                   },
                   Status::Code::kCorruption, "zero length"});
  RunSemanticCase({"skippable flag on a known kind",
                   [](Frames& f) { f[Find(f, FrameKind::kData, kRawObject)].header.flags = kFlagSkippable; },
                   Status::Code::kCorruption, "flags"});
}

TEST(SemanticCorruptionTest, ObjectMetadata) {
  RunSemanticCase({"metadata hash",
                   [](Frames& f) { f[Find(f, FrameKind::kObjectBegin, kRawObject)].header.raw_hash ^= 1; },
                   Status::Code::kCorruption, "metadata hash mismatch"});
  RunSemanticCase({"metadata with trailing bytes",
                   [](Frames& f) {
                     Frame& b = f[Find(f, FrameKind::kObjectBegin, kRawObject)];
                     b.payload.push_back(0);
                     b.header.raw_hash = Hash64(b.payload.data(), b.payload.size());
                   },
                   Status::Code::kCorruption, "trailing"});
  RunSemanticCase({"empty metadata",
                   [](Frames& f) {
                     Frame& b = f[Find(f, FrameKind::kObjectBegin, kRawObject)];
                     b.payload.clear();
                     b.header.raw_hash = Hash64(nullptr, 0);
                   },
                   Status::Code::kCorruption, "metadata size 0"});
}

TEST(SemanticCorruptionTest, SequenceNumbers) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  Parsed p = Parse(good);
  // One frame numbered one too high (a gap), and one numbered one too low (a repeat).
  for (int64_t delta : {1, -1, 100}) {
    std::vector<uint8_t> bad = good;
    const Frame& f = p.body[5];
    RewriteHeader(bad, f.offset, [&](FrameHeader& h) { h.sequence += static_cast<uint64_t>(delta); });
    Status s = Read(bad);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_TRUE(Contains(s, "sequence number " + std::to_string(5 + delta) + ", expected 5")) << s.ToString();
  }
  // Two adjacent frames swapped as they are (their numbers travel with them).
  std::vector<uint8_t> bad(good.begin(), good.begin() + static_cast<ptrdiff_t>(p.body[2].offset));
  for (size_t i : {3, 2}) {
    const Frame& f = p.body[i];
    bad.insert(bad.end(), good.begin() + static_cast<ptrdiff_t>(f.offset),
               good.begin() + static_cast<ptrdiff_t>(f.offset + kFrameHeaderSize + f.payload.size()));
  }
  bad.insert(bad.end(), good.begin() + static_cast<ptrdiff_t>(p.body[4].offset), good.end());
  ASSERT_EQ(bad.size(), good.size());
  Status s = Read(bad);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "sequence")) << s.ToString();
  // A frame copied verbatim right after itself.
  const Frame& f = p.body[3];
  bad = good;
  bad.insert(bad.begin() + static_cast<ptrdiff_t>(p.body[4].offset), good.begin() + static_cast<ptrdiff_t>(f.offset),
             good.begin() + static_cast<ptrdiff_t>(p.body[4].offset));
  s = Read(bad);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "sequence")) << s.ToString();
}

TEST(SemanticCorruptionTest, TrailingBytesAfterStreamEnd) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  Parsed p = Parse(good);
  std::vector<std::vector<uint8_t>> extras = {{0}, std::vector<uint8_t>(100, 0xAB), std::vector<uint8_t>(10000, 0)};
  std::vector<uint8_t> end_frame(good.begin() + static_cast<ptrdiff_t>(p.end.offset), good.end());
  extras.push_back(end_frame);  // a second STREAM_END
  for (const std::vector<uint8_t>& extra : extras) {
    std::vector<uint8_t> bad = good;
    bad.insert(bad.end(), extra.begin(), extra.end());
    Status s = Read(bad);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_TRUE(Contains(s, "after STREAM_END")) << s.ToString();
    EXPECT_TRUE(Contains(s, std::to_string(extra.size()) + " unexpected bytes")) << s.ToString();
  }
}

TEST(SemanticCorruptionTest, StreamTotalsMustMatch) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  std::vector<std::function<void(StreamTotals&)>> changes = {
      [](StreamTotals& t) { t.object_count += 1; }, [](StreamTotals& t) { t.frame_count -= 1; },
      [](StreamTotals& t) { t.raw_bytes += 4096; }, [](StreamTotals& t) { t.stream_bytes += 64; }};
  for (const auto& change : changes) {
    std::vector<uint8_t> bad = good;
    RewriteTotals(bad, change);
    Status s = Read(bad);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_TRUE(Contains(s, "stream totals do not match")) << s.ToString();
  }
  // Unchanged totals rewritten the same way still read fine (the helper is sound).
  std::vector<uint8_t> same = good;
  RewriteTotals(same, [](StreamTotals&) {});
  EXPECT_TRUE(same == good);
}

TEST(SemanticCorruptionTest, StreamEndWithFieldsSet) {
  const std::vector<uint8_t>& good = ValidStream().stream;
  Parsed p = Parse(good);
  std::vector<uint8_t> bad = good;
  RewriteHeader(bad, p.end.offset, [](FrameHeader& h) { h.object_id = 1; });
  Status s = Read(bad);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "STREAM_END with object")) << s.ToString();
}

// SEEK_INDEX is defined, but only where the stream header announces it (the
// detailed index checks are in seek_index_test.cc).
TEST(FrameKindTest, SeekIndexWithoutTheIndexedFlagIsCorruption) {
  RunSemanticCase({"SEEK_INDEX",
                   [](Frames& f) {
                     f.insert(f.begin() + static_cast<ptrdiff_t>(Find(f, FrameKind::kData, kPlanarObject, 1)),
                              MakeFrame(FrameKind::kSeekIndex, 0, 0, 0, std::vector<uint8_t>(32, 1)));
                   },
                   Status::Code::kCorruption, "SEEK_INDEX in a stream whose header does not announce one"});
}

TEST(FrameKindTest, IndexBlockWithoutTheIndexBlocksFlagIsCorruption) {
  RunSemanticCase({"INDEX_BLOCK",
                   [](Frames& f) {
                     f.insert(f.begin() + static_cast<ptrdiff_t>(Find(f, FrameKind::kData, kPlanarObject, 1)),
                              MakeFrame(FrameKind::kIndexBlock, kPlanarObject, 0, 0, std::vector<uint8_t>(48, 1)));
                   },
                   Status::Code::kCorruption, "INDEX_BLOCK in a stream whose header does not announce index blocks"});
}

TEST(FrameKindTest, UnknownKindWithoutSkippableFlagIsCorruption) {
  for (uint8_t kind : {uint8_t{0}, uint8_t{13}, uint8_t{42}, uint8_t{255}}) {
    RunSemanticCase({"kind " + std::to_string(kind),
                     [kind](Frames& f) {
                       Frame x;
                       x.header.kind = kind;
                       x.payload = {1, 2, 3};
                       f.insert(f.begin() + 3, x);
                     },
                     Status::Code::kCorruption, "unknown frame kind " + std::to_string(kind)});
  }
}

// --- DEDUP_REF ---------------------------------------------------------------

// Rewrites the DEDUP_REF payload of the frame (payload layout: u32 source
// object, u32 checksum, u64 source offset, 128-bit content key).
void ChangeRef(Frame& f, const std::function<void(DedupRef&)>& change) {
  DedupRef ref;
  ASSERT_TRUE(DecodeDedupRef(f.payload.data(), &ref).ok());
  change(ref);
  EncodeDedupRef(ref, f.payload.data());
}

TEST(DedupRefTest, DedupStreamReadsBackWithTheReferencedBytes) {
  const Source& src = ValidStream();
  std::vector<TestObject> back;
  Status s = UnpackFromMemory(src.stream, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(back.size(), 5u);
  EXPECT_TRUE(back[4].bytes == src.objects[4].bytes);
}

TEST(DedupRefTest, DedupRefWithoutTheStreamFlagIsCorruption) {
  Parsed p = Parse(ValidStream().stream);
  StreamHeader h;
  ASSERT_TRUE(DecodeStreamHeader(p.stream_header.data(), &h).ok());
  h.flags = 0;
  EncodeStreamHeader(h, p.stream_header.data());
  Status s = Read(Reframe(p.stream_header, p.body));
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "does not announce dedup")) << s.ToString();
  // Without the DEDUP_REF frame (and its object) the same header is fine.
  std::vector<Frame> frames;
  for (const Frame& f : p.body)
    if (f.header.object_id != kDedupObject) frames.push_back(f);
  s = Read(Reframe(p.stream_header, frames));
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(DedupRefTest, ReferenceMustNameAnEarlierDataFrame) {
  RunSemanticCase(
      {"source offset with no DATA frame",
       [](Frames& f) { ChangeRef(f[Find(f, FrameKind::kDedupRef)], [](DedupRef& r) { r.source_offset = 1; }); },
       Status::Code::kCorruption, "no earlier DATA frame"});
  RunSemanticCase(
      {"source object that does not exist",
       [](Frames& f) { ChangeRef(f[Find(f, FrameKind::kDedupRef)], [](DedupRef& r) { r.source_object_id = 99; }); },
       Status::Code::kCorruption, "no earlier DATA frame"});
  RunSemanticCase({"source is a ZERO_RUN",
                   [](Frames& f) {
                     ChangeRef(f[Find(f, FrameKind::kDedupRef)], [](DedupRef& r) {
                       r.source_object_id = kMixedObject;
                       r.source_offset = 0;
                     });
                   },
                   Status::Code::kCorruption, "no earlier DATA frame"});
  RunSemanticCase({"source is a later DATA frame",
                   [](Frames& f) {
                     ChangeRef(f[Find(f, FrameKind::kDedupRef)], [](DedupRef& r) {
                       r.source_object_id = kDedupObject;
                       r.source_offset = kChunk;
                     });
                   },
                   Status::Code::kCorruption, "no earlier DATA frame"});
}

TEST(DedupRefTest, ReferenceMustMatchItsSource) {
  RunSemanticCase({"hash differs", [](Frames& f) { f[Find(f, FrameKind::kDedupRef)].header.raw_hash ^= 1; },
                   Status::Code::kCorruption, "differs from the DATA frame"});
  RunSemanticCase(
      {"points at a different chunk of the same size",
       [](Frames& f) { ChangeRef(f[Find(f, FrameKind::kDedupRef)], [](DedupRef& r) { r.source_offset = kChunk; }); },
       Status::Code::kCorruption, "differs from the DATA frame"});
  RunSemanticCase({"payload of 31 bytes", [](Frames& f) { f[Find(f, FrameKind::kDedupRef)].payload.pop_back(); },
                   Status::Code::kCorruption, "expected 32"});
  RunSemanticCase({"payload checksum", [](Frames& f) { f[Find(f, FrameKind::kDedupRef)].payload[20] ^= 1; },
                   Status::Code::kCorruption, "DEDUP_REF payload checksum mismatch"});
  RunSemanticCase({"range overlaps the next chunk",
                   [](Frames& f) { f[Find(f, FrameKind::kDedupRef)].header.offset = 1; }, Status::Code::kCorruption,
                   "overlaps"});
  RunSemanticCase({"DEDUP_REF dropped",
                   [](Frames& f) { f.erase(f.begin() + static_cast<ptrdiff_t>(Find(f, FrameKind::kDedupRef))); },
                   Status::Code::kCorruption, "[0, 4096) missing"});
}

Frame SkippableFrame(uint8_t kind, size_t payload_size) {
  Frame x;
  x.header.kind = kind;
  x.header.flags = kFlagSkippable;
  x.header.object_id = 77;  // means nothing to this reader
  x.header.offset = 12345;
  x.header.codec = 99;
  x.payload.resize(payload_size);
  std::mt19937_64 rng(payload_size);
  for (auto& b : x.payload) b = static_cast<uint8_t>(rng());
  return x;
}

// Counts frames and remembers the totals the reader proved.
class TotalsVisitor final : public StreamVisitor {
 public:
  Status OnStreamEnd(const StreamTotals& t) override {
    totals = t;
    ended = true;
    return Status::Ok();
  }
  StreamTotals totals;
  bool ended = false;
};

TEST(FrameKindTest, UnknownSkippableKindIsSkippedAndCounted) {
  const Source& src = ValidStream();
  Parsed p = Parse(src.stream);
  std::vector<Frame> frames = p.body;
  // At the start, between chunks of an object, with a payload larger than
  // the reader's skip buffer, and right before STREAM_END.
  frames.insert(frames.begin(), SkippableFrame(42, 0));
  frames.insert(frames.begin() + static_cast<ptrdiff_t>(Find(frames, FrameKind::kData, kPlanarObject, 2)),
                SkippableFrame(200, 100));
  frames.insert(frames.begin() + static_cast<ptrdiff_t>(Find(frames, FrameKind::kZeroRun, kMixedObject)),
                SkippableFrame(13, 150000));
  frames.push_back(SkippableFrame(255, 7));
  std::vector<uint8_t> stream = Reframe(p.stream_header, frames);

  MemorySource source(stream);
  TotalsVisitor visitor;
  Status s = ReadStream(source, visitor);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(visitor.ended);
  EXPECT_EQ(visitor.totals.frame_count, frames.size());
  EXPECT_EQ(visitor.totals.frame_count, p.body.size() + 4);
  EXPECT_EQ(visitor.totals.object_count, 5u);

  std::vector<TestObject> back;
  s = UnpackFromMemory(stream, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(back.size(), src.objects.size());
  for (size_t i = 0; i < back.size(); ++i) EXPECT_TRUE(back[i].bytes == src.objects[i].bytes) << i;

  // STREAM_END must count skipped frames: totals that leave one out fail.
  std::vector<uint8_t> undercounted = stream;
  RewriteTotals(undercounted, [](StreamTotals& t) { t.frame_count -= 1; });
  s = Read(undercounted);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "stream totals do not match")) << s.ToString();
}

TEST(FrameKindTest, TruncatedSkippableFrameIsTruncated) {
  Parsed p = Parse(ValidStream().stream);
  std::vector<Frame> frames = p.body;
  frames.push_back(SkippableFrame(50, 100000));
  std::vector<uint8_t> stream = Reframe(p.stream_header, frames);
  stream.resize(stream.size() - kFrameHeaderSize - kStreamEndPayloadSize - 1000);
  Status s = Read(stream);
  EXPECT_EQ(s.code(), Status::Code::kTruncated) << s.ToString();
  EXPECT_TRUE(Contains(s, "truncated")) << s.ToString();
}

}  // namespace
}  // namespace vramflow
