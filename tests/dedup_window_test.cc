// SPDX-License-Identifier: MIT
// The dedup window (FORMAT.md 4.6): DedupWindow itself; a reader that meets a
// DEDUP_REF naming a DATA frame outside the stream's window, in order
// (the validator) and from the index (ReadSeekIndex); and a sub-stream,
// whose moved DATA frames can push a kept reference's frame out of the window.
#include "streamer/format/dedup_window.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "streamer/format/seek_index.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_writer.h"
#include "streamer/format/sub_stream.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using testing::ModelBytes;

struct IntHash {
  size_t operator()(int v) const { return std::hash<int>()(v); }
};
using Window = DedupWindow<int, std::string, IntHash>;

TEST(DedupWindowTest, HoldsTheLatestFramesOnly) {
  Window w(3);
  w.Add(1, "a");
  w.Add(2, "b");
  w.Add(3, "c");
  ASSERT_NE(w.Find(1), nullptr);
  EXPECT_EQ(*w.Find(1), "a");
  w.Add(4, "d");  // 1 leaves
  EXPECT_EQ(w.Find(1), nullptr);
  EXPECT_EQ(*w.Find(2), "b");
  EXPECT_EQ(*w.Find(4), "d");
  EXPECT_EQ(w.size(), 3u);
  for (int i = 5; i < 1000; ++i) w.Add(i, "x");
  EXPECT_EQ(w.size(), 3u);
  EXPECT_EQ(w.Find(996), nullptr);
  EXPECT_NE(w.Find(997), nullptr);
}

TEST(DedupWindowTest, AKeyAddedAgainNamesTheNewFrameAndStays) {
  Window w(2);
  w.Add(7, "first");
  w.Add(8, "other");
  w.Add(7, "second");  // the first 7 leaves the window; the second is in it
  ASSERT_NE(w.Find(7), nullptr);
  EXPECT_EQ(*w.Find(7), "second");
  EXPECT_NE(w.Find(8), nullptr);
  w.Add(9, "x");  // 8 leaves, the second 7 stays
  EXPECT_EQ(w.Find(8), nullptr);
  ASSERT_NE(w.Find(7), nullptr);
  EXPECT_EQ(*w.Find(7), "second");
  w.Add(10, "y");
  EXPECT_EQ(w.Find(7), nullptr);
  EXPECT_EQ(w.size(), 2u);
}

TEST(DedupWindowTest, CapacityZeroHoldsEveryFrame) {
  Window w(0);
  for (int i = 0; i < 5000; ++i) w.Add(i, "v");
  EXPECT_EQ(w.size(), 5000u);
  EXPECT_NE(w.Find(0), nullptr);
}

constexpr uint32_t kChunk = 4096;

// Two objects in this order of DATA frames (numbers count DATA frames):
//   "left" (id 1):  DATA l0 (#0), DATA l1 (#1)
//   "kept" (id 2):  DATA k0 (#2), REF -> l0 (3 back), REF -> l1 (2 back),
//                   DATA k1 (#3), REF -> k0 (2 back)
struct WindowStream {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> kept;  // the bytes of object "kept"
};

WindowStream MakeWindowStream(uint32_t dedup_window) {
  WindowStream t;
  std::vector<std::vector<uint8_t>> piece;
  for (uint64_t seed = 1; seed <= 4; ++seed) piece.push_back(ModelBytes(DataKind::kFp32Weights, kChunk, seed));
  const std::vector<uint8_t>& l0 = piece[0];
  const std::vector<uint8_t>& l1 = piece[1];
  const std::vector<uint8_t>& k0 = piece[2];
  const std::vector<uint8_t>& k1 = piece[3];
  for (const std::vector<uint8_t>* p : {&k0, &l0, &l1, &k1, &k0}) t.kept.insert(t.kept.end(), p->begin(), p->end());

  MemorySink sink;
  StreamHeader header;
  header.chunk_size = kChunk;
  header.flags = kStreamFlagDedup | kStreamFlagSeekIndex;
  header.dedup_window = dedup_window;
  StreamWriter writer(&sink, header);
  ChunkEncoder encoder(EncoderOptions{});
  auto check = [](const Status& s) { ASSERT_TRUE(s.ok()) << s.ToString(); };
  auto add = [&](uint32_t id, uint64_t offset, const std::vector<uint8_t>& raw) {
    EncodedChunk chunk;
    check(encoder.Encode(raw, &chunk));
    check(writer.AddChunk(id, offset, raw.size(), chunk));
  };
  auto ref = [&](uint32_t id, uint64_t offset, uint32_t source, uint64_t source_offset,
                 const std::vector<uint8_t>& raw) {
    DedupRef r{source, source_offset, HashContent128(raw.data(), raw.size())};
    check(writer.AddDedupRef(id, offset, raw.size(), Hash64(raw.data(), raw.size()), r));
  };
  check(writer.Start());
  uint32_t left = writer.BeginObject(ObjectMetadata{"left", {}}, 2 * kChunk).value();
  add(left, 0, l0);
  add(left, kChunk, l1);
  check(writer.EndObject(left));
  uint32_t kept = writer.BeginObject(ObjectMetadata{"kept", {}}, t.kept.size()).value();
  add(kept, 0, k0);
  ref(kept, kChunk, left, 0, l0);
  ref(kept, 2 * kChunk, left, kChunk, l1);
  add(kept, 3 * kChunk, k1);
  ref(kept, 4 * kChunk, kept, 0, k0);
  check(writer.EndObject(kept));
  check(writer.Finish());
  t.bytes = sink.bytes();
  return t;
}

bool Contains(const Status& s, const std::string& needle) { return s.ToString().find(needle) != std::string::npos; }

//! The farthest reference reaches 3 DATA frames back: a window of 3 (or none,
//! as in earlier writers' streams) reads; a window of 2 is rejected by an
//! in-order reader and by the index reader, naming the reference.
TEST(DedupWindowStreamTest, ReadersRejectAReferenceOutsideTheWindow) {
  for (uint32_t window : {0u, 3u, 4u}) {
    WindowStream t;
    ASSERT_NO_FATAL_FAILURE(t = MakeWindowStream(window));
    std::vector<testing::TestObject> objects;
    Status s = testing::UnpackFromMemory(t.bytes, &objects);
    ASSERT_TRUE(s.ok()) << window << ": " << s.ToString();
    ASSERT_EQ(objects.size(), 2u);
    EXPECT_EQ(objects[1].bytes, t.kept);
    MemoryRandomAccess stored(t.bytes);
    EXPECT_TRUE(ReadSeekIndex(stored).ok()) << window;
  }

  WindowStream t;
  ASSERT_NO_FATAL_FAILURE(t = MakeWindowStream(2));
  std::vector<testing::TestObject> objects;
  Status s = testing::UnpackFromMemory(t.bytes, &objects);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(Contains(s, "DEDUP_REF names object 1 offset 0, which is not one of the last 2 DATA frames"))
      << s.ToString();
  EXPECT_TRUE(Contains(s, "object 2 'kept', offset 4096")) << s.ToString();

  MemoryRandomAccess stored(t.bytes);
  Result<StoredStreamIndex> index = ReadSeekIndex(stored);
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), Status::Code::kCorruption);
  EXPECT_TRUE(Contains(index.status(), "3 DATA frames back, outside the stream's dedup window of 2"))
      << index.status().ToString();
}

// The objects a sub-stream of `t` holds, read with every check.
Status ReadSubStream(const WindowStream& t, const std::string& name, SubStreamPlan* plan,
                     std::vector<testing::TestObject>* objects, StreamHeader* header) {
  auto source = std::make_shared<MemoryRandomAccess>(t.bytes);
  VF_ASSIGN_OR_RETURN(StoredStreamIndex stored, ReadSeekIndex(*source));
  std::set<uint32_t> ids;
  for (const SeekIndexObject& o : stored.index.objects)
    if (o.metadata.name == name) ids.insert(o.id);
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> sub, OpenSubStream(source, stored, ids, {}, plan));
  std::vector<uint8_t> bytes(plan->stream_bytes + 1);  // one more, to see that it ends there
  VF_ASSIGN_OR_RETURN(size_t size, ReadFully(*sub, bytes));
  if (size != plan->stream_bytes || size < kStreamHeaderSize)
    return Status::Internal("the sub-stream has " + std::to_string(size) + " bytes, its plan " +
                            std::to_string(plan->stream_bytes));
  bytes.resize(size);
  VF_RETURN_IF_ERROR(DecodeStreamHeader(bytes.data(), header));
  return testing::UnpackFromMemory(bytes, objects);
}

//! Selecting "kept" alone moves l0 and l1 in as DATA frames, so k0 is then
//! 4 DATA frames behind the last reference: with a window of 3 that
//! reference becomes k0's DATA frame too, and the sub-stream stays valid.
//! Without a window (earlier writers) it stays a reference.
TEST(DedupWindowStreamTest, SubStreamMovesAReferencePushedOutOfTheWindow) {
  WindowStream t;
  ASSERT_NO_FATAL_FAILURE(t = MakeWindowStream(3));
  SubStreamPlan plan;
  std::vector<testing::TestObject> objects;
  StreamHeader header;
  Status s = ReadSubStream(t, "kept", &plan, &objects, &header);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0].bytes, t.kept);
  EXPECT_EQ(plan.moved_refs, 3u);
  EXPECT_EQ(plan.kept_refs, 0u);
  EXPECT_EQ(header.flags & kStreamFlagDedup, 0u) << "no reference is left";
  EXPECT_EQ(header.dedup_window, 0u);

  ASSERT_NO_FATAL_FAILURE(t = MakeWindowStream(0));
  s = ReadSubStream(t, "kept", &plan, &objects, &header);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(objects[0].bytes, t.kept);
  EXPECT_EQ(plan.moved_refs, 2u);
  EXPECT_EQ(plan.kept_refs, 1u);
  EXPECT_NE(header.flags & kStreamFlagDedup, 0u);

  ASSERT_NO_FATAL_FAILURE(t = MakeWindowStream(4));  // 4 back is still inside
  s = ReadSubStream(t, "kept", &plan, &objects, &header);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(objects[0].bytes, t.kept);
  EXPECT_EQ(plan.moved_refs, 2u);
  EXPECT_EQ(plan.kept_refs, 1u);
  EXPECT_EQ(header.dedup_window, 4u);
}

}  // namespace
}  // namespace vramflow
