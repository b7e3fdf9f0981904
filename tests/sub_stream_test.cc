// SPDX-License-Identifier: MIT
// OpenSubStream (streamer/format/sub_stream.h) over a stream in memory: the
// selected objects come out as a valid stream of their own, read by the
// reference reader with every check, fetching only their frames; DEDUP_REFs
// naming a DATA frame outside the selection carry that frame instead, those
// within it stay; a damaged header or payload in the selection, and a seek
// index that does not match the frames, fail naming the object and frame.
#include "streamer/format/sub_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "streamer/format/seek_index.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using testing::ModelBytes;

constexpr uint32_t kChunk = 4096;

// Objects, interleaved, with every kind of chunk and reference:
//   a (id 1): four DATA chunks
//   b (id 2): a's chunk 2 (DEDUP_REF), own DATA, a's chunk 2 again (DEDUP_REF), its own chunk 1 again (DEDUP_REF)
//   c (id 3): a zero run, own DATA
//   d (id 4): a's chunk 0 (DEDUP_REF)
struct TestStream {
  std::vector<uint8_t> bytes;
  std::map<std::string, std::vector<uint8_t>> contents;  // by name
};

TestStream MakeStream() {
  TestStream t;
  std::vector<uint8_t> a = ModelBytes(DataKind::kBf16Weights, 4 * kChunk, 11);
  std::vector<uint8_t> own_b = ModelBytes(DataKind::kFp32Weights, kChunk, 12);
  std::vector<uint8_t> own_c = ModelBytes(DataKind::kAdamV, kChunk, 13);
  auto piece = [&](const std::vector<uint8_t>& v, size_t i) {
    return std::span<const uint8_t>(v).subspan(i * kChunk, kChunk);
  };
  std::vector<uint8_t> b;
  for (auto p : {piece(a, 2), std::span<const uint8_t>(own_b), piece(a, 2), std::span<const uint8_t>(own_b)})
    b.insert(b.end(), p.begin(), p.end());
  std::vector<uint8_t> c(kChunk, 0);
  c.insert(c.end(), own_c.begin(), own_c.end());
  std::vector<uint8_t> d(piece(a, 0).begin(), piece(a, 0).end());

  MemorySink sink;
  StreamHeader header;
  header.chunk_size = kChunk;
  header.flags = kStreamFlagDedup | kStreamFlagSeekIndex;
  header.producer = "sub_stream_test";
  StreamWriter writer(&sink, header);
  ChunkEncoder encoder(EncoderOptions{});
  auto check = [](const Status& s) { ASSERT_TRUE(s.ok()) << s.ToString(); };
  auto add = [&](uint32_t id, uint64_t offset, std::span<const uint8_t> raw) {
    EncodedChunk chunk;
    check(encoder.Encode(raw, &chunk));
    check(writer.AddChunk(id, offset, raw.size(), chunk));
  };
  auto ref = [&](uint32_t id, uint64_t offset, uint32_t source, uint64_t source_offset, std::span<const uint8_t> raw) {
    DedupRef r{source, source_offset, HashContent128(raw.data(), raw.size())};
    check(writer.AddDedupRef(id, offset, raw.size(), Hash64(raw.data(), raw.size()), r));
  };
  check(writer.Start());
  uint32_t ida = writer.BeginObject(ObjectMetadata{"a", {{"gpu", "0"}}}, a.size()).value();
  uint32_t idb = writer.BeginObject(ObjectMetadata{"b", {{"gpu", "1"}}}, b.size()).value();
  uint32_t idc = writer.BeginObject(ObjectMetadata{"c", {{"gpu", "1"}}}, c.size()).value();
  for (size_t i = 0; i < 3; ++i) add(ida, i * kChunk, piece(a, i));
  add(idc, 0, std::span<const uint8_t>(c).first(kChunk));  // zero run
  ref(idb, 0, ida, 2 * kChunk, piece(a, 2));
  add(idb, kChunk, own_b);
  add(ida, 3 * kChunk, piece(a, 3));
  check(writer.EndObject(ida));
  ref(idb, 2 * kChunk, ida, 2 * kChunk, piece(a, 2));
  add(idc, kChunk, own_c);
  ref(idb, 3 * kChunk, idb, kChunk, own_b);
  check(writer.EndObject(idb));
  check(writer.EndObject(idc));
  uint32_t idd = writer.BeginObject(ObjectMetadata{"d", {}}, d.size()).value();
  ref(idd, 0, ida, 0, piece(a, 0));
  check(writer.EndObject(idd));
  check(writer.Finish());
  t.bytes = sink.bytes();
  t.contents = {{"a", a}, {"b", b}, {"c", c}, {"d", d}};
  return t;
}

// Rebuilds the objects of a stream as the reference reader delivers them,
// copying DEDUP_REF bytes from the chunk they name; counts frame kinds.
class RestoreVisitor final : public StreamVisitor {
 public:
  Status OnStreamHeader(const StreamHeader& h) override {
    flags = h.flags;
    return Status::Ok();
  }
  Status OnObjectBegin(const ObjectState& o) override {
    names[o.id] = o.metadata.name;
    if (o.size == kUnknownObjectSize && !unknown_sizes) return Status::Internal("unexpected unknown size");
    bytes[o.id].assign(o.size == kUnknownObjectSize ? 0 : o.size, 0);
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& e) override {
    ++kinds[static_cast<FrameKind>(e.header.kind)];
    std::vector<uint8_t>& out = bytes[e.header.object_id];
    if (out.size() < e.header.offset + e.header.raw_size) out.resize(e.header.offset + e.header.raw_size);
    if (e.dedup) {
      const std::vector<uint8_t>& from = bytes.at(e.dedup->source_object_id);
      std::copy_n(from.begin() + static_cast<ptrdiff_t>(e.dedup->source_offset), e.header.raw_size,
                  out.begin() + static_cast<ptrdiff_t>(e.header.offset));
    } else {
      std::copy(e.data.begin(), e.data.end(), out.begin() + static_cast<ptrdiff_t>(e.header.offset));
    }
    return Status::Ok();
  }
  Status OnStreamEnd(const StreamTotals& t) override {
    totals = t;
    complete = true;
    return Status::Ok();
  }

  std::map<std::string, std::vector<uint8_t>> ByName() const {
    std::map<std::string, std::vector<uint8_t>> out;
    for (const auto& [id, b] : bytes) out[names.at(id)] = b;
    return out;
  }

  bool unknown_sizes = false;  // objects may begin without a size (grown as chunks come)
  uint32_t flags = 0;
  std::map<uint32_t, std::string> names;
  std::map<uint32_t, std::vector<uint8_t>> bytes;
  std::map<FrameKind, int> kinds;
  StreamTotals totals;
  bool complete = false;
};

class SubStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(stream_ = MakeStream());
    Open(stream_.bytes);
  }

  void Open(std::vector<uint8_t> bytes) {
    source_ = std::make_shared<CountingRandomAccess>(std::make_shared<MemoryRandomAccess>(std::move(bytes)));
    Result<StoredStreamIndex> stored = ReadSeekIndex(*source_);
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    stored_ = *stored;
  }

  uint32_t Id(const std::string& name) const {
    for (const SeekIndexObject& o : stored_.index.objects)
      if (o.metadata.name == name) return o.id;
    ADD_FAILURE() << "no object " << name;
    return 0;
  }

  SeekIndexObject& Object(const std::string& name) {
    for (SeekIndexObject& o : stored_.index.objects)
      if (o.metadata.name == name) return o;
    ADD_FAILURE() << "no object " << name;
    return stored_.index.objects.front();
  }

  uint64_t FrameBytes(const std::string& name) const {
    const SeekIndexObject* o = stored_.index.Find(Id(name));
    uint64_t n = 2 * kFrameHeaderSize + o->begin_payload_size;
    for (const SeekIndexChunk& c : o->chunks) n += c.frame_bytes();
    return n;
  }

  // Reads the selection through the reference reader (decoding every payload).
  Status ReadSelection(const std::set<std::string>& names, RestoreVisitor* visitor, SubStreamPlan* plan = nullptr,
                       const SubStreamOptions& options = {}) {
    std::set<uint32_t> ids;
    for (const std::string& n : names) ids.insert(Id(n));
    VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> sub, OpenSubStream(source_, stored_, ids, options, plan));
    return ReadStream(*sub, *visitor);
  }

  TestStream stream_;
  std::shared_ptr<CountingRandomAccess> source_;  // counts what a sub-stream fetched
  StoredStreamIndex stored_;
};

//! One object of several: a complete, valid stream of that object alone,
//! fetched as its own frames and nothing else.
TEST_F(SubStreamTest, OneObjectOfSeveral) {
  const uint64_t index_cost = source_->bytes();
  EXPECT_EQ(index_cost, stored_.bytes_read);
  RestoreVisitor v;
  SubStreamPlan plan;
  Status s = ReadSelection({"c"}, &v, &plan);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(v.complete);
  EXPECT_EQ(v.ByName(), (std::map<std::string, std::vector<uint8_t>>{{"c", stream_.contents["c"]}}));
  EXPECT_EQ(v.flags, 0u) << "no seek index and no references in the sub-stream";
  EXPECT_EQ(v.totals.object_count, 1u);
  EXPECT_EQ(v.totals.raw_bytes, 2 * kChunk);
  EXPECT_EQ(plan.fetch_bytes, FrameBytes("c"));
  EXPECT_EQ(source_->bytes() - index_cost, FrameBytes("c")) << "fetched more than the object's frames";
  EXPECT_EQ(plan.moved_refs + plan.redirected_refs + plan.kept_refs, 0u);
}

//! A DEDUP_REF whose DATA frame is in an object left out carries that frame
//! instead (the first one; a second reference to it names the moved frame);
//! a reference within the selection stays, and so does the dedup flag.
TEST_F(SubStreamTest, ReferenceAcrossObjectsBecomesTheDataFrame) {
  RestoreVisitor v;
  SubStreamPlan plan;
  Status s = ReadSelection({"b"}, &v, &plan);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(v.ByName(), (std::map<std::string, std::vector<uint8_t>>{{"b", stream_.contents["b"]}}));
  EXPECT_EQ(plan.moved_refs, 1u);
  EXPECT_EQ(plan.redirected_refs, 1u);
  EXPECT_EQ(plan.kept_refs, 1u);
  EXPECT_EQ(v.kinds[FrameKind::kData], 2);
  EXPECT_EQ(v.kinds[FrameKind::kDedupRef], 2);
  EXPECT_EQ(v.flags, kStreamFlagDedup);
  const SeekIndexChunk* a2 = stored_.index.FindData(Id("a"), 2 * kChunk);
  ASSERT_NE(a2, nullptr);
  EXPECT_EQ(plan.fetch_bytes, FrameBytes("b") - kFrameHeaderSize - kDedupRefPayloadSize + a2->frame_bytes());

  // An object made of references only: no reference is left, nor the flag.
  RestoreVisitor only;
  s = ReadSelection({"d"}, &only, &plan);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(only.ByName(), (std::map<std::string, std::vector<uint8_t>>{{"d", stream_.contents["d"]}}));
  EXPECT_EQ(only.flags, 0u);
  EXPECT_EQ(only.kinds[FrameKind::kDedupRef], 0);
}

//! References whose DATA frame is selected too stay references.
TEST_F(SubStreamTest, ReferencesWithinTheSelectionStay) {
  RestoreVisitor v;
  SubStreamPlan plan;
  Status s = ReadSelection({"a", "b", "d"}, &v, &plan);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(v.ByName(), (std::map<std::string, std::vector<uint8_t>>{
                            {"a", stream_.contents["a"]}, {"b", stream_.contents["b"]}, {"d", stream_.contents["d"]}}));
  EXPECT_EQ(plan.moved_refs, 0u);
  EXPECT_EQ(plan.kept_refs, 4u);
  EXPECT_EQ(v.kinds[FrameKind::kDedupRef], 4);
  EXPECT_EQ(v.flags, kStreamFlagDedup);
}

// The frames of a stored stream before its SEEK_INDEX, without the
// INDEX_BLOCK frames, renumbered; *runs counts the stretches of frames
// between index blocks.
std::vector<uint8_t> FramesWithoutIndex(const std::vector<uint8_t>& stream, uint64_t index_offset, uint64_t* runs) {
  std::vector<uint8_t> out;
  uint64_t sequence = 0;
  bool in_run = false;
  *runs = 0;
  for (uint64_t at = kStreamHeaderSize; at < index_offset;) {
    FrameHeader h;
    EXPECT_TRUE(DecodeFrameHeader(stream.data() + at, &h).ok());
    const uint64_t next = at + kFrameHeaderSize + h.payload_size;
    if (h.kind == static_cast<uint8_t>(FrameKind::kIndexBlock)) {
      in_run = false;
    } else {
      if (!in_run) ++*runs;
      in_run = true;
      h.sequence = sequence++;
      uint8_t header[kFrameHeaderSize];
      EncodeFrameHeader(h, header);
      out.insert(out.end(), header, header + kFrameHeaderSize);
      out.insert(out.end(), stream.begin() + static_cast<ptrdiff_t>(at + kFrameHeaderSize),
                 stream.begin() + static_cast<ptrdiff_t>(next));
    }
    at = next;
  }
  return out;
}

//! Every object: the stored frames byte for byte (same order), without the
//! index frames and renumbered; adjacent frames come in one range.
TEST_F(SubStreamTest, AllObjectsAreTheStreamWithoutItsIndex) {
  std::set<uint32_t> all;
  for (const SeekIndexObject& o : stored_.index.objects) all.insert(o.id);
  SubStreamPlan plan;
  Result<std::unique_ptr<ByteSource>> sub = OpenSubStream(source_, stored_, all, {}, &plan);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  std::vector<uint8_t> out(stream_.bytes.size() + 1);
  Result<size_t> n = ReadFully(**sub, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  out.resize(*n);
  EXPECT_EQ(out.size(), plan.stream_bytes);
  uint64_t runs = 0;
  const std::vector<uint8_t> frames = FramesWithoutIndex(stream_.bytes, stored_.index_offset, &runs);
  EXPECT_GT(runs, 1u);  // the stream has INDEX_BLOCK frames between its objects' frames
  EXPECT_EQ(plan.ranges, runs);
  ASSERT_GT(out.size(), kStreamHeaderSize + frames.size());
  EXPECT_TRUE(std::equal(frames.begin(), frames.end(), out.begin() + kStreamHeaderSize));
  MemorySource again(out);
  RestoreVisitor v;
  Status s = ReadStream(again, v);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(v.ByName(), stream_.contents);

  // With ranges capped at one frame header, frames are fetched one by one, in parallel.
  SubStreamOptions small;
  small.max_range = kFrameHeaderSize;
  small.fetch.concurrency = 3;
  small.fetch.request_size = 1000;
  small.fetch.memory_budget = 4000;
  RestoreVisitor w;
  s = ReadSelection({"a", "b", "c", "d"}, &w, &plan, small);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(plan.ranges, plan.frames);
  EXPECT_EQ(w.ByName(), stream_.contents);
}

//! A damaged header among the selected frames: the sub-stream refuses it,
//! naming the object, the frame and its offset in the stored stream.
TEST_F(SubStreamTest, DamagedHeaderIsNamed) {
  const SeekIndexChunk& chunk = stored_.index.Find(Id("c"))->chunks[1];
  std::vector<uint8_t> bytes = stream_.bytes;
  bytes[chunk.stream_offset + 40] ^= 0x10;  // raw_hash: the checksum no longer matches
  ASSERT_NO_FATAL_FAILURE(Open(bytes));
  RestoreVisitor v;
  Status s = ReadSelection({"c"}, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  for (const std::string& m :
       std::vector<std::string>{"object 3 'c'", "DATA frame at stream offset " + std::to_string(chunk.stream_offset),
                                "object offset 4096", "checksum"})
    EXPECT_NE(s.message().find(m), std::string::npos) << m << "\n" << s.ToString();
  EXPECT_FALSE(v.complete);
}

//! A damaged payload passes through and the reader's hash check catches it,
//! naming the object and the chunk.
TEST_F(SubStreamTest, DamagedPayloadIsCaughtByTheReader) {
  const SeekIndexChunk& chunk = stored_.index.Find(Id("c"))->chunks[1];
  ASSERT_GT(chunk.payload_size, 100u);
  std::vector<uint8_t> bytes = stream_.bytes;
  bytes[chunk.stream_offset + kFrameHeaderSize + 50] ^= 0x01;
  ASSERT_NO_FATAL_FAILURE(Open(bytes));
  RestoreVisitor v;
  Status s = ReadSelection({"c"}, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("object 3 'c', offset 4096"), std::string::npos) << s.ToString();
  EXPECT_FALSE(v.complete);

  // The DATA frame a moved reference carries is checked the same way.
  const SeekIndexChunk* a2 = stored_.index.FindData(Id("a"), 2 * kChunk);
  bytes = stream_.bytes;
  bytes[a2->stream_offset + kFrameHeaderSize + 7] ^= 0x01;
  ASSERT_NO_FATAL_FAILURE(Open(bytes));
  RestoreVisitor w;
  s = ReadSelection({"b"}, &w);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("object 2 'b', offset 0"), std::string::npos) << s.ToString();
}

//! An index entry that does not describe the frame at its offset is refused
//! before anything of that frame is handed on.
TEST_F(SubStreamTest, IndexEntryThatDoesNotMatchTheFrame) {
  SeekIndexObject& c = Object("c");
  const uint64_t at = c.chunks[1].stream_offset;
  c.chunks[1].raw_size -= 1;
  RestoreVisitor v;
  Status s = ReadSelection({"c"}, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  for (const std::string& m : std::vector<std::string>{"object 3 'c'", "stream offset " + std::to_string(at),
                                                       "raw size", "seek index says " + std::to_string(kChunk - 1)})
    EXPECT_NE(s.message().find(m), std::string::npos) << m << "\n" << s.ToString();

  // An entry pointing at another object's frame.
  ASSERT_NO_FATAL_FAILURE(Open(stream_.bytes));
  SeekIndexObject& c2 = Object("c");
  const SeekIndexChunk* a1 = stored_.index.FindData(Id("a"), kChunk);
  c2.chunks[1].stream_offset = a1->stream_offset;
  c2.chunks[1].payload_size = a1->payload_size;
  s = ReadSelection({"c"}, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("object id: the seek index says 3, the frame says 1"), std::string::npos) << s.ToString();

  // An index naming the object otherwise than its OBJECT_BEGIN: what was
  // chosen by name is not what would be restored.
  ASSERT_NO_FATAL_FAILURE(Open(stream_.bytes));
  Object("c").metadata.name = "evil";
  s = ReadSelection({"evil"}, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("metadata: the seek index says 'evil', the frame says 'c'"), std::string::npos)
      << s.ToString();
}

//! An object whose size was unknown at its OBJECT_BEGIN (packed from a
//! pipe) keeps that header; the reader learns the size at OBJECT_END.
TEST(SubStreamUnknownSizeTest, ObjectOfUnknownSize) {
  std::vector<uint8_t> first = ModelBytes(DataKind::kFp16Weights, 3 * kChunk + 100, 5);
  std::vector<uint8_t> second = ModelBytes(DataKind::kAdamM, 2 * kChunk, 6);
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = kChunk;
  header.flags = kStreamFlagSeekIndex;
  StreamWriter writer(&sink, header);
  ChunkEncoder encoder(EncoderOptions{});
  ASSERT_TRUE(writer.Start().ok());
  for (const auto& [name, bytes] : {std::pair{"first", &first}, std::pair{"second", &second}}) {
    uint32_t id = writer.BeginObject(ObjectMetadata{name, {}}, kUnknownObjectSize).value();
    for (size_t off = 0; off < bytes->size(); off += kChunk) {
      std::span<const uint8_t> raw =
          std::span<const uint8_t>(*bytes).subspan(off, std::min<size_t>(kChunk, bytes->size() - off));
      EncodedChunk chunk;
      ASSERT_TRUE(encoder.Encode(raw, &chunk).ok());
      ASSERT_TRUE(writer.AddChunk(id, off, raw.size(), chunk).ok());
    }
    ASSERT_TRUE(writer.EndObject(id).ok());
  }
  ASSERT_TRUE(writer.Finish().ok());
  auto source = std::make_shared<MemoryRandomAccess>(sink.bytes());
  Result<StoredStreamIndex> stored = ReadSeekIndex(*source);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  Result<std::unique_ptr<ByteSource>> sub = OpenSubStream(source, *stored, {2}, {});
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  RestoreVisitor v;
  v.unknown_sizes = true;
  Status s = ReadStream(**sub, v);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(v.ByName(), (std::map<std::string, std::vector<uint8_t>>{{"second", second}}));
}

//! Selecting nothing, or an object the index does not list, is an error.
TEST_F(SubStreamTest, UnknownOrNoObject) {
  Result<std::unique_ptr<ByteSource>> none = OpenSubStream(source_, stored_, {}, {});
  EXPECT_EQ(none.status().code(), Status::Code::kInvalidArgument);
  Result<std::unique_ptr<ByteSource>> missing = OpenSubStream(source_, stored_, {99}, {});
  EXPECT_EQ(missing.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("no object 99"), std::string::npos);
}

}  // namespace
}  // namespace vramflow
