// SPDX-License-Identifier: MIT
// BaseStream: opening a stored stream as a base (index, id, chain), matching
// objects, and reading its chunks by reference with every hash checked.
#include "streamer/format/base_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "common/sha256.h"
#include "streamer/format/base_location.h"
#include "streamer/format/base_match.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/incremental_fixture.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using namespace vramflow::testing;

constexpr uint32_t kChunk = 16 << 10;

void Check(const Status& s) { ASSERT_TRUE(s.ok()) << s.ToString(); }

// The stream id as FORMAT.md 4.12 defines it, hashed from the whole file:
// the header, an incremental stream's base id (the first 32 bytes of its
// BASE payload), the SEEK_INDEX payload, every INDEX_BLOCK payload in the
// order the SEEK_INDEX names them, and the STREAM_END payload. The frames
// are found by walking the file's frame headers, not through ReadSeekIndex.
StreamId StreamIdFromTheBytes(const std::vector<uint8_t>& bytes) {
  std::map<uint64_t, std::span<const uint8_t>> index_blocks;  // by stream offset
  std::span<const uint8_t> seek_index, stream_end, base_id;
  for (uint64_t at = kStreamHeaderSize; at + kFrameHeaderSize <= bytes.size();) {
    FrameHeader h;
    EXPECT_TRUE(DecodeFrameHeader(bytes.data() + at, &h).ok()) << "stream offset " << at;
    std::span<const uint8_t> payload(bytes.data() + at + kFrameHeaderSize, h.payload_size);
    if (h.kind == static_cast<uint8_t>(FrameKind::kBase)) base_id = payload.first(32);
    if (h.kind == static_cast<uint8_t>(FrameKind::kIndexBlock)) index_blocks[at] = payload;
    if (h.kind == static_cast<uint8_t>(FrameKind::kSeekIndex)) seek_index = payload;
    if (h.kind == static_cast<uint8_t>(FrameKind::kStreamEnd)) stream_end = payload;
    at += kFrameHeaderSize + h.payload_size;
  }
  Result<SeekIndex> index = DecodeSeekIndex(seek_index);
  EXPECT_TRUE(index.ok()) << index.status().ToString();
  if (!index.ok()) return {};
  Sha256Hasher id;
  id.Update(bytes.data(), kStreamHeaderSize);
  id.Update(base_id);
  id.Update(seek_index);
  for (const SeekIndexObject& o : index->objects)
    for (const IndexBlockRef& b : o.blocks) id.Update(index_blocks.at(b.stream_offset));
  id.Update(stream_end);
  return id.Final();
}

// An empty object (no chunks, no INDEX_BLOCK), then six of 64 chunks of
// random bytes (chunk 3 of each a zero run), with DIGEST_BLOCKs: about 6 MiB,
// so that the INDEX_BLOCKs of the first five lie before the last 256 KiB,
// which ReadSeekIndex reads at once.
struct DigestedStream {
  std::vector<uint8_t> bytes;
  std::vector<std::vector<uint8_t>> objects;
};

DigestedStream WriteDigestedStream() {
  DigestedStream out;
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = kChunk;
  header.flags = kStreamFlagSeekIndex;
  StreamWriter writer(&sink, header);
  writer.SetChunkDigests(true);
  EXPECT_TRUE(writer.Start().ok());
  ChunkEncoder encoder(EncoderOptions{});
  uint32_t empty = *writer.BeginObject(ObjectMetadata{"empty", {}}, 0);
  EXPECT_TRUE(writer.EndObject(empty).ok());
  out.objects.emplace_back();
  for (uint32_t i = 0; i < 6; ++i) {
    std::vector<uint8_t> bytes = RandomBytes(64 * kChunk, 100 + i);
    std::fill(bytes.begin() + 3 * kChunk, bytes.begin() + 4 * kChunk, 0);
    uint32_t id = *writer.BeginObject(ObjectMetadata{"o" + std::to_string(i), {}}, bytes.size());
    for (uint64_t off = 0; off < bytes.size(); off += kChunk) {
      std::span<const uint8_t> raw(bytes.data() + off, kChunk);
      EncodedChunk chunk;
      EXPECT_TRUE(encoder.Encode(raw, &chunk).ok());
      Sha256Digest sha = Sha256(raw);
      EXPECT_TRUE(writer.AddChunk(id, off, kChunk, chunk, chunk.zero_run ? nullptr : &sha).ok());
    }
    EXPECT_TRUE(writer.EndObject(id).ok());
    out.objects.push_back(std::move(bytes));
  }
  EXPECT_TRUE(writer.Finish().ok());
  out.bytes = sink.bytes();
  return out;
}

// A stored stream in memory that counts reads, and the most at once, and
// asks for `concurrent_reads` in flight, as an S3 object does. A read that
// starts in [hold_from, hold_to) goes through only once another is in
// progress beside it, or after `wait`: reads that overlap there show that
// their reader keeps several in flight.
class OverlapProbe final : public RandomAccessSource {
 public:
  OverlapProbe(std::vector<uint8_t> bytes, unsigned concurrent_reads, std::chrono::milliseconds wait = {},
               uint64_t hold_from = 0, uint64_t hold_to = 0)
      : inner_(std::move(bytes)),
        concurrent_reads_(concurrent_reads),
        wait_(wait),
        hold_from_(hold_from),
        hold_to_(hold_to) {}
  uint64_t Size() const override { return inner_.Size(); }
  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> data) override {
    {
      std::unique_lock lock(mutex_);
      ++reads_;
      ++in_flight_;
      most_in_flight_ = std::max(most_in_flight_, in_flight_);
      changed_.notify_all();
      if (offset >= hold_from_ && offset < hold_to_)
        changed_.wait_for(lock, wait_, [&] { return most_in_flight_ > 1; });
    }
    Result<size_t> n = inner_.ReadAt(offset, data);
    std::lock_guard lock(mutex_);
    --in_flight_;
    return n;
  }
  std::string Describe() const override { return "probe"; }
  unsigned ConcurrentReads() const override { return concurrent_reads_; }
  unsigned reads() const {
    std::lock_guard lock(mutex_);
    return reads_;
  }
  unsigned most_in_flight() const {
    std::lock_guard lock(mutex_);
    return most_in_flight_;
  }

 private:
  MemoryRandomAccess inner_;
  const unsigned concurrent_reads_;
  const std::chrono::milliseconds wait_;
  const uint64_t hold_from_, hold_to_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  unsigned reads_ = 0, in_flight_ = 0, most_in_flight_ = 0;
};

Result<std::shared_ptr<const BaseStream>> OpenFromMemory(std::shared_ptr<RandomAccessSource> source) {
  BaseOpenOptions options;
  options.open = [source](const std::string&) -> Result<std::shared_ptr<RandomAccessSource>> { return source; };
  return OpenBaseStream("mem.vfs", options);
}

// A: a full base. Object 1 "weights" (4 chunks of text), object 2 a GPU
// buffer (fp32, one chunk zeros), object 3 "copy" whose chunk repeats
// weights@0 as a DEDUP_REF.
std::vector<PlannedObject> BaseObjects() {
  std::vector<PlannedObject> a(3);
  a[0].metadata = ObjectMetadata{"weights", {}};
  a[0].bytes = TextBytes(4 * kChunk);
  a[1].metadata = ObjectMetadata{"gpu0/bo", {{"gpu-id", "0x1234"}, {"gpu-va", "0x7f0000"}}};
  a[1].bytes = ModelBytes(DataKind::kFp32Weights, 3 * kChunk, 5);
  std::fill(a[1].bytes.begin() + kChunk, a[1].bytes.begin() + 2 * kChunk, 0);
  a[2].metadata = ObjectMetadata{"copy", {}};
  a[2].bytes = ChunkOf(a, 1, 0, kChunk);
  a[2].chunks = {{Plan::kDedup, 1, 0}};
  return a;
}

// B on A: weights chunk 0 the same (BASE_REF), chunk 1 changed a little
// (BASE_DELTA), the rest new; copy as a BASE_REF to A's DEDUP_REF.
std::vector<PlannedObject> SecondObjects(const std::vector<PlannedObject>& a) {
  std::vector<PlannedObject> b(2);
  b[0].metadata = a[0].metadata;
  b[0].bytes = a[0].bytes;
  for (size_t i = kChunk; i < 2 * kChunk; i += 97) b[0].bytes[i] ^= 0x5a;
  for (size_t i = 2 * kChunk; i < b[0].bytes.size(); ++i) b[0].bytes[i] = static_cast<uint8_t>(i * 7);
  b[0].chunks = {{Plan::kRef, 1, 0}, {Plan::kDelta, 1, kChunk}};
  b[1].metadata = a[2].metadata;
  b[1].bytes = a[2].bytes;
  b[1].chunks = {{Plan::kRef, 3, 0}};
  return b;
}

// C on B: weights chunks 0 and 1 taken from B (a BASE_REF and a BASE_DELTA
// there), chunk 2 a delta against B's own DATA.
std::vector<PlannedObject> ThirdObjects(const std::vector<PlannedObject>& b) {
  std::vector<PlannedObject> c(1);
  c[0].metadata = b[0].metadata;
  c[0].bytes = b[0].bytes;
  for (size_t i = 2 * kChunk; i < 3 * kChunk; i += 13) c[0].bytes[i] += 1;
  c[0].chunks = {{Plan::kRef, 1, 0}, {Plan::kRef, 1, kChunk}, {Plan::kDelta, 1, 2 * kChunk}};
  return c;
}

struct Chain {
  TempDir dir;
  std::vector<PlannedObject> a, b, c;
  std::string pa, pb, pc;
  Chain() {
    a = BaseObjects();
    b = SecondObjects(a);
    c = ThirdObjects(b);
    pa = dir.File("a.vfs");
    pb = dir.File("b.vfs");
    pc = dir.File("c.vfs");
    WriteFileBytes(pa, BuildStream(a, kChunk));
    BaseDescriptor da = DescriptorOf(pa, "a.vfs");  // relative: next to b.vfs
    WriteFileBytes(pb, BuildStream(b, kChunk, &da, &a));
    BaseDescriptor db = DescriptorOf(pb, pb);
    WriteFileBytes(pc, BuildStream(c, kChunk, &db, &b));
  }
};

TEST(BaseStream, OpensAChainOfThreeAndReadsEveryChunk) {
  Chain chain;
  Result<std::shared_ptr<const BaseStream>> opened = OpenBaseStream(chain.pc, FileBaseOptions());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const BaseStream& c = **opened;
  BaseDescriptor d = c.DescriptorForDependent();
  EXPECT_EQ(d.chain_length, 3u);
  EXPECT_EQ(d.location, chain.pc);
  EXPECT_EQ(d.base_bytes, std::filesystem::file_size(chain.pc));
  EXPECT_EQ(d.base_raw_bytes, chain.c[0].bytes.size());
  EXPECT_FALSE(c.has_digests());
  EXPECT_GT(c.memory_bytes(), 0u);

  // The id is the stream's own (FORMAT.md 4.12, hashed here from the
  // file's bytes), and differs per stream.
  EXPECT_EQ(StreamIdFromTheBytes(ReadFileBytes(chain.pc)), c.id());
  EXPECT_NE(DescriptorOf(chain.pb, "").base_id, c.id());

  BaseScratch scratch;
  std::vector<uint8_t> out(kChunk);
  for (uint64_t off = 0; off < chain.c[0].bytes.size(); off += kChunk) {
    ASSERT_NE(c.ChunkAt(1, off, kChunk), nullptr);
    Sha256Digest sha = Sha256(ChunkOf(chain.c, 1, off, kChunk));
    Check(c.ReadChunk(1, off, out, scratch, &sha));
    EXPECT_EQ(out, ChunkOf(chain.c, 1, off, kChunk)) << "offset " << off;
  }
  // B directly: its BASE_REF to A's DEDUP_REF, and A's zero run is no chunk.
  Result<std::shared_ptr<const BaseStream>> b = OpenBaseStream(chain.pb, FileBaseOptions());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Check((*b)->ReadChunk(2, 0, out, scratch));
  EXPECT_EQ(out, ChunkOf(chain.a, 1, 0, kChunk));
  Result<std::shared_ptr<const BaseStream>> a = OpenBaseStream(chain.pa, FileBaseOptions());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->ChunkAt(2, kChunk, kChunk), nullptr);  // the ZERO_RUN
  EXPECT_EQ((*a)->ChunkAt(1, 1, kChunk), nullptr);       // not a chunk's start
  EXPECT_EQ((*a)->ChunkAt(1, 0, kChunk - 1), nullptr);   // another size
  EXPECT_EQ((*a)->DescriptorForDependent().chain_length, 1u);
  EXPECT_FALSE((*a)->StoredDigest(1, 0).has_value());
  // A wrong size or a ZERO_RUN named by a reader is corruption, not a crash.
  Status s = (*a)->ReadChunk(2, kChunk, out, scratch);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
}

TEST(BaseStream, ReadsFromSeveralThreadsWithTheirOwnScratch) {
  Chain chain;
  auto c = OpenBaseStream(chain.pc, FileBaseOptions());
  ASSERT_TRUE(c.ok());
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      BaseScratch scratch;
      std::vector<uint8_t> out(kChunk);
      for (int round = 0; round < 20; ++round) {
        uint64_t off = uint64_t((t + round) % 3) * kChunk;
        if (!(*c)->ReadChunk(1, off, out, scratch).ok() || out != ChunkOf(chain.c, 1, off, kChunk)) ++bad;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(BaseStream, ACorruptBaseChunkFailsItsHashNamingTheBase) {
  Chain chain;
  auto a = OpenBaseStream(chain.pa, FileBaseOptions());
  ASSERT_TRUE(a.ok());
  const SeekIndexChunk* chunk = (*a)->ChunkAt(1, kChunk, kChunk);  // weights@16K: B's delta base
  ASSERT_NE(chunk, nullptr);
  ASSERT_EQ(chunk->kind, FrameKind::kData);
  std::vector<uint8_t> bytes = ReadFileBytes(chain.pa);
  bytes[chunk->stream_offset + kFrameHeaderSize + chunk->payload_size / 2] ^= 0x01;
  WriteFileBytes(chain.pa, bytes);

  auto c = OpenBaseStream(chain.pc, FileBaseOptions());  // the index is intact: opening works
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  BaseScratch scratch;
  std::vector<uint8_t> out(kChunk);
  Status s = (*c)->ReadChunk(1, kChunk, out, scratch);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("base " + chain.pa + ", object 1 'weights', offset 16384"), std::string::npos)
      << s.ToString();
  // Chunks that do not lean on it still read.
  Check((*c)->ReadChunk(1, 0, out, scratch));
}

TEST(BaseStream, BytesThatDoNotHashToTheReferencesSha256AreRefused) {
  Chain chain;
  auto a = OpenBaseStream(chain.pa, FileBaseOptions());
  ASSERT_TRUE(a.ok());
  BaseScratch scratch;
  std::vector<uint8_t> out(kChunk);
  Sha256Digest wrong = Sha256(ChunkOf(chain.a, 1, kChunk, kChunk));
  Status s = (*a)->ReadChunk(1, 0, out, scratch, &wrong);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("SHA-256"), std::string::npos) << s.ToString();
  Sha256Digest right = Sha256(ChunkOf(chain.a, 1, 0, kChunk));
  Check((*a)->ReadChunk(1, 0, out, scratch, &right));
}

// Opening a base reads its index, id and digests in one pass: the stream
// header twice (once to see it has index blocks), the last 256 KiB, and
// each INDEX_BLOCK before that with its DIGEST_BLOCK, in one read each.
// Before, the id and digests read the header, the index and every block
// again: two reads per object.
TEST(BaseStream, OpeningReadsEachIndexBlockOnceWithItsDigests) {
  DigestedStream stream = WriteDigestedStream();
  auto probe = std::make_shared<OverlapProbe>(stream.bytes, 8);
  Result<std::shared_ptr<const BaseStream>> base = OpenFromMemory(probe);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  const StoredStreamIndex& stored = (*base)->index();
  const uint64_t tail_offset = stream.bytes.size() - (256u << 10);
  unsigned before_tail = 0;
  for (const SeekIndexObject& o : stored.index.objects)
    for (const IndexBlockRef& b : o.blocks) before_tail += b.stream_offset < tail_offset;
  ASSERT_EQ(before_tail, 5u);
  EXPECT_EQ(probe->reads(), 3 + before_tail);

  ASSERT_TRUE((*base)->has_digests());
  ASSERT_EQ(stored.index.objects.size(), stream.objects.size());
  for (size_t i = 0; i < stream.objects.size(); ++i) {
    const SeekIndexObject& o = stored.index.objects[i];
    ASSERT_EQ(o.chunks.size(), stream.objects[i].size() / kChunk);
    for (const SeekIndexChunk& c : o.chunks) {
      std::span<const uint8_t> raw(stream.objects[i].data() + c.object_offset, c.raw_size);
      const Sha256Digest want = c.kind == FrameKind::kZeroRun ? Sha256Digest{} : Sha256(raw);
      EXPECT_EQ((*base)->StoredDigest(o.id, c.object_offset), want) << o.metadata.name << " at " << c.object_offset;
    }
  }
  EXPECT_EQ((*base)->id(), StreamIdFromTheBytes(stream.bytes));
}

// The INDEX_BLOCKs before the tail are read several at once where the
// source asks for it (on S3, GETs in flight), and one after another where
// it does not (a file). The base then asks its readers for as many.
TEST(BaseStream, IndexBlocksBeforeTheTailAreReadSeveralAtOnceWhereTheSourceAsks) {
  std::vector<uint8_t> bytes = WriteDigestedStream().bytes;
  const uint64_t tail_offset = bytes.size() - (256u << 10);
  auto remote = std::make_shared<OverlapProbe>(bytes, 8, std::chrono::seconds(2), kStreamHeaderSize, tail_offset);
  Result<std::shared_ptr<const BaseStream>> base = OpenFromMemory(remote);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_GE(remote->most_in_flight(), 2u) << "the index blocks were read one at a time";
  EXPECT_EQ((*base)->concurrent_reads(), 8u);

  auto local = std::make_shared<OverlapProbe>(bytes, 1, std::chrono::milliseconds(20), kStreamHeaderSize, tail_offset);
  base = OpenFromMemory(local);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_EQ(local->most_in_flight(), 1u);
  EXPECT_EQ((*base)->concurrent_reads(), 1u);
}

// A DIGEST_BLOCK read with its INDEX_BLOCK is checked as the validator
// checks it in a stream read in order (FORMAT.md 4.12).
TEST(BaseStream, BrokenDigestBlocksAreCorruption) {
  const DigestedStream stream = WriteDigestedStream();
  MemoryRandomAccess at(stream.bytes);
  Result<StoredStreamIndex> stored = ReadSeekIndex(at);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  // The DIGEST_BLOCK after the (only) INDEX_BLOCK of object `i` (1 is o0).
  auto digest_offset = [&](size_t i) {
    return stored->index.objects[i].blocks.at(0).stream_offset + stored->index.objects[i].blocks.at(0).frame_bytes();
  };
  auto expect = [](std::vector<uint8_t> bytes, const std::string& needle) {
    Result<std::shared_ptr<const BaseStream>> base = OpenFromMemory(std::make_shared<MemoryRandomAccess>(bytes));
    ASSERT_FALSE(base.ok()) << needle;
    EXPECT_EQ(base.status().code(), Status::Code::kCorruption) << base.status().ToString();
    EXPECT_NE(base.status().message().find(needle), std::string::npos) << base.status().ToString();
  };
  auto rewrite = [](std::vector<uint8_t>& bytes, uint64_t offset, const std::function<void(FrameHeader&)>& edit) {
    FrameHeader h;
    ASSERT_TRUE(DecodeFrameHeader(bytes.data() + offset, &h).ok());
    edit(h);
    EncodeFrameHeader(h, bytes.data() + offset);
  };
  {  // an entry changed: its hash no longer matches (object 1, before the tail)
    std::vector<uint8_t> bytes = stream.bytes;
    bytes[digest_offset(2) + kFrameHeaderSize + 5] ^= 1;
    expect(bytes, "DIGEST_BLOCK payload hash mismatch");
  }
  {  // a ZERO_RUN's entry that is not zero, hashed right
    std::vector<uint8_t> bytes = stream.bytes;
    const uint64_t entry = digest_offset(3) + kFrameHeaderSize + 3 * kDigestEntrySize;
    bytes[entry] = 1;
    ASSERT_NO_FATAL_FAILURE(rewrite(bytes, digest_offset(3), [&](FrameHeader& h) {
      h.raw_hash = Hash64(bytes.data() + digest_offset(3) + kFrameHeaderSize, h.payload_size);
    }));
    expect(bytes, "entry 3 is for a ZERO_RUN and must be zero");
  }
  {  // not skippable
    std::vector<uint8_t> bytes = stream.bytes;
    ASSERT_NO_FATAL_FAILURE(rewrite(bytes, digest_offset(1), [](FrameHeader& h) { h.flags = 0; }));
    expect(bytes, "does not match it");
  }
  {  // o3's block has none where the first has one (the frame is another kind)
    std::vector<uint8_t> bytes = stream.bytes;
    ASSERT_NO_FATAL_FAILURE(
        rewrite(bytes, digest_offset(4), [](FrameHeader& h) { h.kind = static_cast<uint8_t>(FrameKind::kObjectEnd); }));
    expect(bytes, "no DIGEST_BLOCK follows the INDEX_BLOCK of object 5 'o3', though the first one has one");
  }
}

TEST(BaseStream, AnotherStreamThanTheExpectedIsTheWrongBase) {
  Chain chain;
  BaseDescriptor expected = DescriptorOf(chain.pa, "a.vfs");
  auto b = OpenBaseStream(chain.pb, FileBaseOptions(), &expected);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Status::Code::kInvalidArgument);
  const std::string& m = b.status().message();
  EXPECT_NE(m.find("wrong base: the stream was built on " + HexDigest(expected.base_id) + ", " + chain.pb + " is "),
            std::string::npos)
      << m;
  // Same id, another size: refused too.
  expected.base_bytes += 1;
  auto a = OpenBaseStream(chain.pa, FileBaseOptions(), &expected);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Status::Code::kInvalidArgument) << a.status().ToString();
}

TEST(BaseStream, AMissingLinkIsNotFoundUnlessNamed) {
  Chain chain;
  const std::string moved = chain.dir.File("elsewhere.vfs");
  std::filesystem::rename(chain.pa, moved);
  auto c = OpenBaseStream(chain.pc, FileBaseOptions());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kNotFound) << c.status().ToString();
  EXPECT_NE(c.status().message().find(chain.pa), std::string::npos) << c.status().ToString();
  // Named by the user (matched by id), the chain opens.
  auto named = OpenBaseStream(chain.pc, FileBaseOptions({moved}));
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  BaseScratch scratch;
  std::vector<uint8_t> out(kChunk);
  Check((*named)->ReadChunk(1, 0, out, scratch));
  EXPECT_EQ(out, ChunkOf(chain.c, 1, 0, kChunk));
}

TEST(BaseStream, ALoopOfBasesCannotBeMade) {
  // The stream id covers the base's id, so two streams cannot name each
  // other: x on y, y on x. Rewriting x on y gives x a new id, which y's BASE
  // frame does not name: the chain is refused as built on the wrong base.
  TempDir dir;
  std::vector<PlannedObject> objects = BaseObjects();
  objects.resize(1);
  const std::string px = dir.File("x.vfs"), py = dir.File("y.vfs");
  BaseDescriptor placeholder;
  placeholder.location = "y.vfs";
  WriteFileBytes(px, BuildStream(objects, kChunk, &placeholder, &objects));
  BaseDescriptor on_x;
  {
    auto file = OpenFileRandomAccess(px);
    ASSERT_TRUE(file.ok());
    auto stored = ReadSeekIndex(**file);
    ASSERT_TRUE(stored.ok());
    on_x.base_id = stored->id;
    on_x.base_bytes = stored->stream_size;
    on_x.base_raw_bytes = stored->totals.raw_bytes;
    on_x.chain_length = 2;
    on_x.location = "x.vfs";
  }
  WriteFileBytes(py, BuildStream(objects, kChunk, &on_x, &objects));
  BaseDescriptor on_y = on_x;
  {
    auto file = OpenFileRandomAccess(py);
    auto stored = ReadSeekIndex(**file);
    ASSERT_TRUE(stored.ok());
    on_y.base_id = stored->id;
    on_y.base_bytes = stored->stream_size;
    on_y.base_raw_bytes = stored->totals.raw_bytes;
    on_y.location = "y.vfs";
  }
  WriteFileBytes(px, BuildStream(objects, kChunk, &on_y, &objects));  // same length, another base
  auto x = OpenBaseStream(px, FileBaseOptions());
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().code(), Status::Code::kInvalidArgument) << x.status().ToString();
  EXPECT_NE(x.status().message().find("wrong base: the stream was built on " + HexDigest(on_x.base_id)),
            std::string::npos)
      << x.status().ToString();
}

TEST(BaseStream, AChainLongerThanTheLimitIsRefused) {
  TempDir dir;
  std::vector<PlannedObject> objects = BaseObjects();
  objects.resize(1);
  std::string previous = dir.File("s0.vfs");
  WriteFileBytes(previous, BuildStream(objects, kChunk));
  for (uint32_t i = 1; i <= kMaxBaseChain; ++i) {
    objects[0].bytes[0] = static_cast<uint8_t>(i);  // each stream its own id
    BaseDescriptor d = DescriptorOf(previous, previous);
    const std::string path = dir.File("s" + std::to_string(i) + ".vfs");
    WriteFileBytes(path, BuildStream(objects, kChunk, &d, &objects));
    previous = path;
  }
  // s7 is on a chain of 7 bases: 8 streams, the most a reader follows.
  auto ok = OpenBaseStream(dir.File("s7.vfs"), FileBaseOptions());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->DescriptorForDependent().chain_length, kMaxBaseChain);
  auto too_long = OpenBaseStream(dir.File("s8.vfs"), FileBaseOptions());
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), Status::Code::kInvalidArgument) << too_long.status().ToString();
  EXPECT_NE(too_long.status().message().find("longer than 8"), std::string::npos) << too_long.status().ToString();
}

TEST(BaseStream, AStreamWithoutIndexBlocksCannotBeABase) {
  TempDir dir;
  std::vector<uint8_t> plain = PackToMemory({{"x", TextBytes(1000)}}, EncoderOptions{}, kChunk);
  WriteFileBytes(dir.File("plain.vfs"), plain);
  auto base = OpenBaseStream(dir.File("plain.vfs"), FileBaseOptions());
  ASSERT_FALSE(base.ok());
  EXPECT_EQ(base.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(base.status().message().find("no index blocks"), std::string::npos) << base.status().ToString();
}

TEST(BaseStream, MatchesGpuBuffersByOrdinalAddressAndSizeAndOthersByName) {
  Chain chain;
  auto a = OpenBaseStream(chain.pa, FileBaseOptions());
  ASSERT_TRUE(a.ok());
  const BaseStream& base = **a;
  // Another GPU id (a new machine), same place, address and size: a match.
  ObjectMetadata bo{"gpu7/bo-at-another-index", {{"gpu-id", "0xbeef"}, {"gpu-va", "0x7f0000"}}};
  GpuOrdinals ordinals;
  std::optional<uint32_t> ordinal = ordinals.Of(bo);
  ASSERT_EQ(ordinal, 0u);
  const SeekIndexObject* m = base.Match(bo, 3 * kChunk, ordinal);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->id, 2u);
  EXPECT_EQ(base.Match(bo, 2 * kChunk, ordinal), nullptr);  // another size
  EXPECT_EQ(base.Match(bo, 3 * kChunk, 1u), nullptr);       // another GPU
  ObjectMetadata other_va = bo;
  other_va.attributes[1].second = "0x800000";
  EXPECT_EQ(base.Match(other_va, 3 * kChunk, ordinal), nullptr);
  // Others by name, whatever their size.
  const SeekIndexObject* w = base.Match(ObjectMetadata{"weights", {}}, 1, std::nullopt);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->id, 1u);
  EXPECT_EQ(base.Match(ObjectMetadata{"gpu0/bo", {}}, 3 * kChunk, std::nullopt), nullptr);
  EXPECT_EQ(base.Match(ObjectMetadata{"new", {}}, 1, std::nullopt), nullptr);
  // Ordinals follow first appearance.
  EXPECT_EQ(ordinals.Of(ObjectMetadata{"x", {{"gpu-id", "0x1"}, {"gpu-va", "0x0"}}}), 1u);
  EXPECT_EQ(ordinals.Of(bo), 0u);
  EXPECT_EQ(ordinals.Of(ObjectMetadata{"x", {{"gpu-id", "0x1"}}}), std::nullopt);
}

TEST(BaseStream, RelativeLocationsAreRelativeToTheNamingStream) {
  EXPECT_EQ(ResolveBaseLocation("a.vfs", "/ckpt/b.vfs"), "/ckpt/a.vfs");
  EXPECT_EQ(ResolveBaseLocation("../old/a.vfs", "ckpt/b.vfs"), "ckpt/../old/a.vfs");
  EXPECT_EQ(ResolveBaseLocation("a.vfs", "b.vfs"), "a.vfs");
  EXPECT_EQ(ResolveBaseLocation("/abs/a.vfs", "/ckpt/b.vfs"), "/abs/a.vfs");
  EXPECT_EQ(ResolveBaseLocation("s3://bucket/a.vfs", "/ckpt/b.vfs"), "s3://bucket/a.vfs");
  EXPECT_EQ(ResolveBaseLocation("a.vfs", "s3://bucket/run/b.vfs"), "s3://bucket/run/a.vfs");
}

}  // namespace
}  // namespace vramflow
