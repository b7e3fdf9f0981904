// SPDX-License-Identifier: MIT
// BaseStream: opening a stored stream as a base (index, id, chain), matching
// objects, and reading its chunks by reference with every hash checked.
#include "streamer/base_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "common/hash.h"
#include "streamer/base_location.h"
#include "streamer/base_match.h"
#include "tests/incremental_fixture.h"
#include "tests/test_util.h"
#include "transport/memory_stream.h"

namespace vramflow {
namespace {

using namespace vramflow::testing;

constexpr uint32_t kChunk = 16 << 10;

void Check(const Status& s) { ASSERT_TRUE(s.ok()) << s.ToString(); }

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

  // The id is the stream's own (ComputeStreamId), and differs per stream.
  auto file = OpenFileRandomAccess(chain.pc);
  ASSERT_TRUE(file.ok());
  Result<StoredStreamIndex> stored = ReadSeekIndex(**file);
  ASSERT_TRUE(stored.ok());
  Result<StreamId> id = ComputeStreamId(**file, *stored);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, c.id());
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

TEST(BaseStream, ALoopOfBasesIsRefused) {
  // The stream id does not cover the BASE frame's payload, so two streams can
  // be made to name each other: x on y and y on x.
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
    on_x.base_id = *ComputeStreamId(**file, *stored);
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
    on_y.base_id = *ComputeStreamId(**file, *stored);
    on_y.base_bytes = stored->stream_size;
    on_y.base_raw_bytes = stored->totals.raw_bytes;
    on_y.location = "y.vfs";
  }
  WriteFileBytes(px, BuildStream(objects, kChunk, &on_y, &objects));  // same length: x keeps its id
  auto x = OpenBaseStream(px, FileBaseOptions());
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().code(), Status::Code::kInvalidArgument) << x.status().ToString();
  EXPECT_NE(x.status().message().find("loops"), std::string::npos) << x.status().ToString();
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
