// SPDX-License-Identifier: MIT
// Incremental streams on the reader side: ReadStream, the decode-ahead
// reader (unpack -o -), the restore graph (unpack), a one-object unpack
// through the seek index, and verify, each
// resolving BASE_REF and BASE_DELTA frames through a chain of bases, and
// refusing a missing, wrong or corrupt base with nothing written.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>

#include <nlohmann/json.hpp>

#include "streamer/decode_ahead.h"
#include "streamer/device/file_device.h"
#include "streamer/format/base_stream.h"
#include "streamer/format/stream_reader.h"
#include "streamer/machine/memory_budget.h"
#include "streamer/pipeline.h"
#include "tests/support/fake_base_stream.h"
#include "tests/support/incremental_fixture.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using namespace vramflow::testing;

constexpr uint32_t kChunk = 16 << 10;

// a (full), b on a, c on b: as in base_stream_test.cc, with a second object in c.
struct Chain {
  TempDir dir;
  std::vector<PlannedObject> a, b, c;
  std::string pa, pb, pc;
  Chain() {
    a.resize(3);
    a[0].metadata = ObjectMetadata{"weights", {}};
    a[0].bytes = TextBytes(4 * kChunk);
    a[1].metadata = ObjectMetadata{"gpu0/bo", {{"gpu-id", "0x1234"}, {"gpu-va", "0x7f0000"}}};
    a[1].bytes = ModelBytes(DataKind::kFp32Weights, 3 * kChunk, 5);
    std::fill(a[1].bytes.begin() + kChunk, a[1].bytes.begin() + 2 * kChunk, 0);
    a[2].metadata = ObjectMetadata{"copy", {}};
    a[2].bytes = ChunkOf(a, 1, 0, kChunk);
    a[2].chunks = {{Plan::kDedup, 1, 0}};
    b.resize(2);
    b[0].metadata = a[0].metadata;
    b[0].bytes = a[0].bytes;
    for (size_t i = kChunk; i < 2 * kChunk; i += 97) b[0].bytes[i] ^= 0x5a;
    for (size_t i = 2 * kChunk; i < b[0].bytes.size(); ++i) b[0].bytes[i] = static_cast<uint8_t>(i * 7);
    b[0].chunks = {{Plan::kRef, 1, 0}, {Plan::kDelta, 1, kChunk}};
    b[1].metadata = a[2].metadata;
    b[1].bytes = a[2].bytes;
    b[1].chunks = {{Plan::kRef, 3, 0}};
    c.resize(2);
    c[0].metadata = b[0].metadata;
    c[0].bytes = b[0].bytes;
    for (size_t i = 2 * kChunk; i < 3 * kChunk; i += 13) c[0].bytes[i] += 1;
    c[0].chunks = {{Plan::kRef, 1, 0}, {Plan::kRef, 1, kChunk}, {Plan::kDelta, 1, 2 * kChunk}};
    c[1].metadata = ObjectMetadata{"copy", {}};
    c[1].bytes = b[1].bytes;
    c[1].chunks = {{Plan::kRef, 2, 0}};
    pa = dir.File("a.vfs");
    pb = dir.File("b.vfs");
    pc = dir.File("c.vfs");
    WriteFileBytes(pa, BuildStream(a, kChunk));
    BaseDescriptor da = DescriptorOf(pa, "a.vfs");
    WriteFileBytes(pb, BuildStream(b, kChunk, &da, &a));
    BaseDescriptor db = DescriptorOf(pb, "b.vfs");
    WriteFileBytes(pc, BuildStream(c, kChunk, &db, &b));
  }
};

// Collects every object's bytes as the reader hands them over.
class Collect final : public StreamVisitor {
 public:
  Status OnObjectBegin(const ObjectState& o) override {
    names_[o.id] = o.metadata.name;
    objects[o.metadata.name].assign(o.size, 0);
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& e) override {
    std::vector<uint8_t>& bytes = objects[names_[e.header.object_id]];
    if (e.header.kind == static_cast<uint8_t>(FrameKind::kDedupRef)) {
      const std::vector<uint8_t>& from = objects[names_[e.dedup->source_object_id]];
      std::copy_n(from.begin() + e.dedup->source_offset, e.header.raw_size, bytes.begin() + e.header.offset);
    } else {
      std::copy(e.data.begin(), e.data.end(), bytes.begin() + e.header.offset);
    }
    if (e.base_ref) ++base_chunks;
    return Status::Ok();
  }
  std::map<std::string, std::vector<uint8_t>> objects;
  int base_chunks = 0;

 private:
  std::map<uint32_t, std::string> names_;
};

Status ReadFile(const std::string& path, StreamVisitor& visitor, ReadOptions options) {
  std::vector<uint8_t> bytes = ReadFileBytes(path);
  MemorySource source(bytes);
  return ReadStream(source, visitor, options);
}

ReadOptions WithBase(const std::string& location, std::vector<std::string> more = {}) {
  ReadOptions options;
  options.open_base = [location, more](const BaseDescriptor& d) {
    return OpenBaseStream(location, FileBaseOptions(more), &d);
  };
  return options;
}

TEST(Incremental, ReadStreamResolvesReferencesThroughAChain) {
  Chain chain;
  Collect collect;
  Status s = ReadFile(chain.pc, collect, WithBase(chain.pb));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(collect.objects["weights"], chain.c[0].bytes);
  EXPECT_EQ(collect.objects["copy"], chain.c[1].bytes);
  EXPECT_EQ(collect.base_chunks, 4);
}

TEST(Incremental, ReadStreamWithoutTheBaseChecksFramingButRefusesToDecode) {
  Chain chain;
  Collect collect;
  Status s = ReadFile(chain.pc, collect, ReadOptions{});
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("this stream is incremental: it needs its base"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("give it with --base"), std::string::npos) << s.ToString();
  Collect framing;
  s = ReadFile(chain.pc, framing, ReadOptions{.decode = false});
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(Incremental, ReadStreamRefusesTheWrongBase) {
  Chain chain;
  Collect collect;
  Status s = ReadFile(chain.pc, collect, WithBase(chain.pa));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("wrong base"), std::string::npos) << s.ToString();
}

// unpack -o - reads incremental streams this way: BASE_REF and BASE_DELTA
// frames are resolved on the decode-ahead threads, several at once, into
// the bytes ReadStream gives, within the budget, which gets everything back.
TEST(Incremental, DecodeAheadResolvesBaseFramesOnSeveralThreads) {
  Chain chain;
  const std::vector<uint8_t> bytes = ReadFileBytes(chain.pc);
  for (unsigned threads : {2u, 4u}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    std::shared_ptr<ConcurrencyProbe> probe;
    ReadOptions options = WithBase(chain.pb);
    options.check_digests = false;  // as unpack reads (digests are left to verify)
    MemoryBudget budget(64 << 20);
    options.budget = &budget;
    options.open_base =
        [&, open = options.open_base](const BaseDescriptor& d) -> Result<std::shared_ptr<const BaseStream>> {
      Result<std::shared_ptr<const BaseStream>> base = open(d);
      if (!base.ok()) return base.status();
      probe = std::make_shared<ConcurrencyProbe>(*base, std::chrono::seconds(2));
      return std::shared_ptr<const BaseStream>(probe);
    };
    MemorySource source(bytes);
    Collect collect;
    Status s = ReadStreamDecodingAhead(source, collect, DecodeAheadOptions{threads, options, {}});
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(collect.objects["weights"], chain.c[0].bytes);
    EXPECT_EQ(collect.objects["copy"], chain.c[1].bytes);
    EXPECT_EQ(collect.base_chunks, 4);
    ASSERT_NE(probe, nullptr);
    EXPECT_GE(probe->most(), 2) << "the base frames were resolved one at a time";
    EXPECT_EQ(budget.in_use(), 0u);
  }
}

// Decoding ahead (unpack -o -) likewise: with one thread asked for, a base
// that asks for 4 reads in flight has 4 of an object's 8 referenced chunks
// read at once; one that asks for 1 (a file) is read by the one thread.
TEST(Incremental, DecodeAheadKeepsAsManyBaseReadsInFlightAsTheBaseAsks) {
  TempDir dir;
  std::vector<PlannedObject> base(1), next(1);
  base[0].metadata = ObjectMetadata{"weights", {}};
  base[0].bytes = ModelBytes(DataKind::kFp32Weights, 8 * kChunk, 3);
  next[0] = base[0];
  for (uint64_t i = 0; i < 8; ++i) next[0].chunks.push_back({Plan::kRef, 1, i * kChunk});
  const std::string base_path = dir.File("base.vfs");
  WriteFileBytes(base_path, BuildStream(base, kChunk));
  const BaseDescriptor descriptor = DescriptorOf(base_path, "base.vfs");
  const std::vector<uint8_t> bytes = BuildStream(next, kChunk, &descriptor, &base);
  for (unsigned asked : {1u, 4u}) {
    SCOPED_TRACE("the base asks for " + std::to_string(asked) + " reads in flight");
    std::shared_ptr<ConcurrencyProbe> probe;
    ReadOptions options = WithBase(base_path);
    options.check_digests = false;
    MemoryBudget budget(64 << 20);
    options.budget = &budget;
    options.open_base =
        [&, open = options.open_base](const BaseDescriptor& d) -> Result<std::shared_ptr<const BaseStream>> {
      Result<std::shared_ptr<const BaseStream>> opened = open(d);
      if (!opened.ok()) return opened.status();
      probe = std::make_shared<ConcurrencyProbe>(*opened, std::chrono::milliseconds(asked > 1 ? 2000 : 20), asked,
                                                 static_cast<int>(asked));
      return std::shared_ptr<const BaseStream>(probe);
    };
    MemorySource source(bytes);
    Collect collect;
    Status s = ReadStreamDecodingAhead(source, collect, DecodeAheadOptions{1, options, {}});
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(collect.objects["weights"], base[0].bytes);
    EXPECT_EQ(collect.base_chunks, 8);
    ASSERT_NE(probe, nullptr);
    EXPECT_EQ(probe->most(), static_cast<int>(asked));
    EXPECT_EQ(budget.in_use(), 0u);
  }
}

// The restore graph (unpack) resolves base frames on its threads. A base on
// S3 waits on a request per chunk, so with one asking for reads in flight
// the graph runs at least that many threads, whatever -j says.
TEST(Incremental, RestoreGraphKeepsAsManyBaseReadsInFlightAsTheBaseAsks) {
  Chain chain;
  const std::vector<uint8_t> bytes = ReadFileBytes(chain.pc);
  for (unsigned asked : {1u, 4u}) {
    SCOPED_TRACE("the base asks for " + std::to_string(asked) + " reads in flight");
    std::shared_ptr<ConcurrencyProbe> probe;
    PipelineOptions options;
    options.threads = 1;
    options.chunk_size = kChunk;
    options.max_memory = 64 << 20;
    options.open_base =
        [&, open = WithBase(chain.pb).open_base](const BaseDescriptor& d) -> Result<std::shared_ptr<const BaseStream>> {
      Result<std::shared_ptr<const BaseStream>> base = open(d);
      if (!base.ok()) return base.status();
      probe = std::make_shared<ConcurrencyProbe>(*base, std::chrono::milliseconds(asked > 1 ? 2000 : 20), asked);
      return std::shared_ptr<const BaseStream>(probe);
    };
    TempDir out;
    FileDevice device("restore");
    std::map<std::string, UniqueFd> files;
    auto resolve = [&](const ObjectState& o) -> Result<RestoreTarget> {
      UniqueFd fd(::open(out.File(o.metadata.name).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
      if (!fd.valid()) return Status::FromErrno("creating " + o.metadata.name, errno);
      VF_ASSIGN_OR_RETURN(uint32_t bo, device.ImportFileRange(fd.get(), 0, o.size, o.metadata.name));
      files[o.metadata.name] = std::move(fd);
      return RestoreTarget{&device, bo, /*zero_filled=*/true};
    };
    MemorySource source(bytes);
    PipelineStats stats;
    Status s = RunRestore(&source, {&device}, resolve, options, &stats);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(ReadFileBytes(out.File("weights")), chain.c[0].bytes);
    EXPECT_EQ(ReadFileBytes(out.File("copy")), chain.c[1].bytes);
    ASSERT_NE(probe, nullptr);
    EXPECT_EQ(stats.threads, asked);
    if (asked > 1) {
      EXPECT_GE(probe->most(), 2) << "the base frames were resolved one at a time";
    } else {
      EXPECT_EQ(probe->most(), 1);
    }
  }
}

// A base chunk that does not check out, and a missing base, fail decoding
// ahead as they fail ReadStream: the same error, naming the same frame (as
// "frame N at stream offset X", after the frame the reader had reached).
TEST(Incremental, DecodeAheadFailsAsReadStreamDoes) {
  Chain chain;
  const std::vector<uint8_t> bytes = ReadFileBytes(chain.pc);
  auto compare = [&](const ReadOptions& options) {
    MemorySource serial_source(bytes), ahead_source(bytes);
    Collect serial_collect, ahead_collect;
    Status serial = ReadStream(serial_source, serial_collect, options);
    Status ahead = ReadStreamDecodingAhead(ahead_source, ahead_collect, DecodeAheadOptions{2, options, {}});
    EXPECT_FALSE(serial.ok());
    EXPECT_EQ(ahead.code(), serial.code()) << ahead.ToString() << "\n" << serial.ToString();
    std::smatch frame;  // ReadStream's "frame N (KIND, ...) at stream offset X: why"
    const std::string message = serial.message();
    if (std::regex_match(message, frame, std::regex(R"(frame (\d+) \(.*?\) at stream offset (\d+): (.*))"))) {
      const std::string expected =
          "frame " + frame[1].str() + " at stream offset " + frame[2].str() + ": " + frame[3].str();
      EXPECT_TRUE(ahead.message().ends_with(expected)) << ahead.message() << "\nshould end with\n" << expected;
    } else {
      EXPECT_EQ(ahead.message(), message);
    }
  };
  ReadOptions no_base;
  no_base.check_digests = false;
  compare(no_base);  // "this stream is incremental: it needs its base"
  // A byte of the chunk of a that c takes (through b) flipped.
  std::vector<uint8_t> bad = ReadFileBytes(chain.pa);
  {
    auto a = OpenBaseStream(chain.pa, FileBaseOptions());
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    const SeekIndexChunk* chunk = (*a)->ChunkAt(1, kChunk, kChunk);
    ASSERT_NE(chunk, nullptr);
    bad[chunk->stream_offset + kFrameHeaderSize + chunk->payload_size / 2] ^= 0x10;
  }
  WriteFileBytes(chain.pa, bad);
  ReadOptions options = WithBase(chain.pb);
  options.check_digests = false;
  compare(options);
}

TEST(Incremental, TheValidatorRefusesBaseFramesWithoutTheFlag) {
  Chain chain;
  std::vector<uint8_t> bytes = ReadFileBytes(chain.pc);
  StreamHeader header;
  ASSERT_TRUE(DecodeStreamHeader(bytes.data(), &header).ok());
  header.flags &= ~kStreamFlagBase;
  EncodeStreamHeader(header, bytes.data());
  MemorySource source(bytes);
  Collect collect;
  Status s = ReadStream(source, collect, ReadOptions{.decode = false});
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("BASE frame in a stream whose header does not announce a base"), std::string::npos)
      << s.ToString();
}

TEST(Incremental, AReaderThatDoesNotKnowTheBaseFlagRefusesTheStream) {
  // An older reader knows only the flags below kStreamFlagBase: the flag is
  // then reserved, and DecodeStreamHeader refuses reserved flags as not
  // supported. The same holds for this reader and the next unknown bit.
  Chain chain;
  std::vector<uint8_t> bytes = ReadFileBytes(chain.pc);
  StreamHeader header;
  ASSERT_TRUE(DecodeStreamHeader(bytes.data(), &header).ok());
  EXPECT_TRUE(header.flags & kStreamFlagBase);
  header.flags |= kStreamFlagBase << 1;
  EncodeStreamHeader(header, bytes.data());
  StreamHeader decoded;
  Status s = DecodeStreamHeader(bytes.data(), &decoded);
  EXPECT_EQ(s.code(), Status::Code::kNotSupported) << s.ToString();
}

std::string Cli(const std::string& args, int* rc) {
  std::string output;
  *rc = RunCommand(VramflowBinary() + " " + args + " 2>&1", &output);
  return output;
}

TEST(Incremental, UnpackRestoresAChainByteExact) {
  Chain chain;
  int rc = 0;
  // The recorded locations (relative to each stream) find the chain.
  std::string out = Cli("unpack " + chain.pc + " -o " + chain.dir.File("out/"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(ReadFileBytes(chain.dir.File("out/weights")), chain.c[0].bytes);
  EXPECT_EQ(ReadFileBytes(chain.dir.File("out/copy")), chain.c[1].bytes);
  // Named explicitly, from elsewhere.
  const std::string moved = chain.dir.File("moved");
  std::filesystem::create_directory(moved);
  std::filesystem::rename(chain.pa, moved + "/a.vfs");
  std::filesystem::rename(chain.pb, moved + "/b.vfs");
  out =
      Cli("unpack " + chain.pc + " --base " + moved + "/b.vfs --base " + moved + "/a.vfs -o " + chain.dir.File("out2/"),
          &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(ReadFileBytes(chain.dir.File("out2/weights")), chain.c[0].bytes);
  // One object through the seek index (the BASE frame goes along).
  out = Cli("unpack " + chain.pc + " --object weights --base " + moved + "/b.vfs --base " + moved + "/a.vfs -o " +
                chain.dir.File("one/"),
            &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(ReadFileBytes(chain.dir.File("one/weights")), chain.c[0].bytes);
  EXPECT_FALSE(std::filesystem::exists(chain.dir.File("one/copy")));
  // One object to a file.
  out = Cli("unpack " + chain.pc + " --object weights --base " + moved + "/b.vfs --base " + moved + "/a.vfs -o " +
                chain.dir.File("w.bin"),
            &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(ReadFileBytes(chain.dir.File("w.bin")), chain.c[0].bytes);
}

TEST(Incremental, IdenticalDataAgainstItselfIsOnlyReferences) {
  TempDir dir;
  std::vector<PlannedObject> a(1);
  a[0].metadata = ObjectMetadata{"w", {}};
  a[0].bytes = ModelBytes(DataKind::kFp32Weights, 5 * kChunk + 100, 9);
  WriteFileBytes(dir.File("a.vfs"), BuildStream(a, kChunk));
  BaseDescriptor d = DescriptorOf(dir.File("a.vfs"), "a.vfs");
  std::vector<PlannedObject> same = a;
  for (uint64_t i = 0; i < 6; ++i) same[0].chunks.push_back({Plan::kRef, 1, i * kChunk});
  std::vector<uint8_t> stream = BuildStream(same, kChunk, &d, &a);
  WriteFileBytes(dir.File("same.vfs"), stream);
  EXPECT_LT(stream.size(), 2048u);  // no chunk bytes at all
  int rc = 0;
  std::string out = Cli("unpack " + dir.File("same.vfs") + " -o " + dir.File("out/"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(ReadFileBytes(dir.File("out/w")), a[0].bytes);
}

TEST(Incremental, UnpackRefusesAMissingWrongOrCorruptBaseWritingNothing) {
  Chain chain;
  int rc = 0;
  // Wrong: a is not c's base.
  std::string out = Cli("unpack " + chain.pc + " --base " + chain.pa + " -o " + chain.dir.File("out/"), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("wrong base: the stream was built on"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(chain.dir.File("out")));
  // Corrupt: a byte of a chunk of a that c needs (through b).
  std::vector<uint8_t> good_a = ReadFileBytes(chain.pa);
  {
    auto a = OpenBaseStream(chain.pa, FileBaseOptions());
    ASSERT_TRUE(a.ok());
    const SeekIndexChunk* chunk = (*a)->ChunkAt(1, kChunk, kChunk);
    ASSERT_NE(chunk, nullptr);
    std::vector<uint8_t> bad = good_a;
    bad[chunk->stream_offset + kFrameHeaderSize + chunk->payload_size / 2] ^= 0x10;
    WriteFileBytes(chain.pa, bad);
  }
  out = Cli("unpack " + chain.pc + " -o " + chain.dir.File("out/"), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("base " + chain.dir.File("a.vfs") + ", object 1 'weights', offset 16384"), std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(chain.dir.File("out")));
  out = Cli("verify " + chain.pc, &rc);
  EXPECT_NE(rc, 0) << out;
  WriteFileBytes(chain.pa, good_a);
  // Missing: a link of the chain is gone.
  std::filesystem::rename(chain.pa, chain.dir.File("gone.vfs"));
  out = Cli("unpack " + chain.pc + " -o " + chain.dir.File("out/"), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("give it with --base"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(chain.dir.File("out")));
  // Named, it works again.
  out = Cli("verify " + chain.pc + " --base " + chain.pb + " --base " + chain.dir.File("gone.vfs"), &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("OK: "), std::string::npos) << out;
}

TEST(Incremental, FlattenWritesASelfContainedStreamEqualToTheUnpack) {
  Chain chain;
  int rc = 0;
  std::string out = Cli("flatten " + chain.pc + " -o " + chain.dir.File("flat.vfs"), &rc);
  ASSERT_EQ(rc, 0) << out;
  std::vector<uint8_t> flat = ReadFileBytes(chain.dir.File("flat.vfs"));
  StreamHeader header;
  ASSERT_TRUE(DecodeStreamHeader(flat.data(), &header).ok());
  EXPECT_FALSE(header.flags & kStreamFlagBase);
  // No base needed any more: the bases are moved away.
  std::filesystem::rename(chain.pa, chain.dir.File("away-a"));
  std::filesystem::rename(chain.pb, chain.dir.File("away-b"));
  out = Cli("verify " + chain.dir.File("flat.vfs"), &rc);
  ASSERT_EQ(rc, 0) << out;
  out = Cli("unpack " + chain.dir.File("flat.vfs") + " -o " + chain.dir.File("out/"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(ReadFileBytes(chain.dir.File("out/weights")), chain.c[0].bytes);
  EXPECT_EQ(ReadFileBytes(chain.dir.File("out/copy")), chain.c[1].bytes);
  // Without its base, flatten fails and leaves no output.
  out = Cli("flatten " + chain.pc + " -o " + chain.dir.File("flat2.vfs"), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("give it with --base"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(chain.dir.File("flat2.vfs")));
  for (const auto& entry : std::filesystem::directory_iterator(chain.dir.path()))
    EXPECT_EQ(entry.path().filename().string().find(".vf-tmp-"), std::string::npos) << entry.path();
}

// A flat stream is a base like the incremental stream it came from: every
// chunk's SHA-256 is in its DIGEST_BLOCKs (a DEDUP_REF's is that of the DATA
// frame it names), so a dump against it may match by digests alone.
TEST(Incremental, FlattenKeepsEveryChunksDigestForDumpsMatchingByDigests) {
  TempDir dir;
  std::vector<PlannedObject> base(1), next(2);
  base[0].metadata = ObjectMetadata{"w", {}};
  base[0].bytes = ModelBytes(DataKind::kFp32Weights, 4 * kChunk, 7);
  next[0].metadata = base[0].metadata;
  next[0].bytes = base[0].bytes;
  next[0].bytes[kChunk + 5] ^= 1;                                              // chunk 1: a delta
  for (size_t i = 2 * kChunk; i < 3 * kChunk; i += 13) next[0].bytes[i] ^= 1;  // chunk 2: new
  std::fill(next[0].bytes.begin() + 3 * kChunk, next[0].bytes.end(), 0);       // chunk 3: zeros
  next[0].chunks = {{Plan::kRef, 1, 0}, {Plan::kDelta, 1, kChunk}};
  next[1].metadata = ObjectMetadata{"dup", {}};
  next[1].bytes = ChunkOf(next, 1, 2 * kChunk, kChunk);
  next[1].chunks = {{Plan::kDedup, 1, 2 * kChunk}};
  WriteFileBytes(dir.File("base.vfs"), BuildStream(base, kChunk));
  const BaseDescriptor descriptor = DescriptorOf(dir.File("base.vfs"), "base.vfs");
  WriteFileBytes(dir.File("inc.vfs"), BuildStream(next, kChunk, &descriptor, &base));

  int rc = 0;
  std::string out = Cli("flatten " + dir.File("inc.vfs") + " -o " + dir.File("flat.vfs"), &rc);
  ASSERT_EQ(rc, 0) << out;
  Result<std::shared_ptr<const BaseStream>> flat = OpenBaseStream(dir.File("flat.vfs"), FileBaseOptions());
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  ASSERT_TRUE((*flat)->has_digests());
  for (uint64_t offset : {uint64_t{0}, uint64_t{kChunk}, uint64_t{2 * kChunk}})
    EXPECT_EQ((*flat)->StoredDigest(1, offset), Sha256(ChunkOf(next, 1, offset, kChunk))) << "offset " << offset;
  EXPECT_EQ((*flat)->StoredDigest(2, 0), Sha256(next[1].bytes));
  out = Cli("verify " + dir.File("flat.vfs"), &rc);  // checks every digest against the bytes
  ASSERT_EQ(rc, 0) << out;

  // The same objects packed against the flat stream, matched by digests:
  // all but the zeros referenced, and they unpack byte-exact.
  std::filesystem::create_directories(dir.File("objects"));
  WriteFileBytes(dir.File("objects/w"), next[0].bytes);
  WriteFileBytes(dir.File("objects/dup"), next[1].bytes);
  out = Cli("pack " + dir.File("objects/w") + " " + dir.File("objects/dup") + " --base " + dir.File("flat.vfs") +
                " --base-refs-only --chunk-size " + std::to_string(kChunk) + " -o " + dir.File("again.vfs"),
            &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("0 B new"), std::string::npos) << out;
  out = Cli("unpack " + dir.File("again.vfs") + " -o " + dir.File("again/"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(ReadFileBytes(dir.File("again/w")), next[0].bytes);
  EXPECT_EQ(ReadFileBytes(dir.File("again/dup")), next[1].bytes);

  // With a dedup window of 2 DATA frames, only the last two keep their
  // digests: a DEDUP_REF to the older of them still gets one.
  std::vector<PlannedObject> windowed = next;
  windowed[0].bytes = ModelBytes(DataKind::kFp32Weights, 4 * kChunk, 8);
  std::copy_n(base[0].bytes.begin(), kChunk, windowed[0].bytes.begin());
  windowed[0].chunks = {{Plan::kRef, 1, 0}};  // then three DATA frames
  windowed[1].bytes = ChunkOf(windowed, 1, 2 * kChunk, kChunk);
  windowed[1].chunks = {{Plan::kDedup, 1, 2 * kChunk}};
  WriteFileBytes(dir.File("windowed.vfs"), BuildStream(windowed, kChunk, &descriptor, &base, /*dedup_window=*/2));
  out = Cli("flatten " + dir.File("windowed.vfs") + " -o " + dir.File("windowed-flat.vfs"), &rc);
  ASSERT_EQ(rc, 0) << out;
  out = Cli("verify " + dir.File("windowed-flat.vfs"), &rc);
  ASSERT_EQ(rc, 0) << out;
  flat = OpenBaseStream(dir.File("windowed-flat.vfs"), FileBaseOptions());
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ((*flat)->StoredDigest(2, 0), Sha256(windowed[1].bytes));
}

TEST(Incremental, InspectShowsTheBaseTheIdAndWhereTheBytesComeFrom) {
  Chain chain;
  // Without the base at hand: inspect reads only the stream's index, or
  // with --full every frame; both reports say where the bytes come from.
  std::filesystem::rename(chain.pa, chain.dir.File("away-a"));
  auto b = OpenBaseStream(chain.pb, FileBaseOptions({chain.dir.File("away-a")}));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  for (const std::string mode : {"", "--full "}) {
    SCOPED_TRACE("inspect " + mode);
    int rc = 0;
    std::string out = Cli("inspect " + mode + "--json " + chain.pc, &rc);
    ASSERT_EQ(rc, 0) << out;
    nlohmann::json j = nlohmann::json::parse(out);
    // weights: two chunks referenced, one delta, one new; copy: referenced.
    EXPECT_EQ(j["objects"][0]["base_ref_bytes"], 2 * kChunk);
    EXPECT_EQ(j["objects"][0]["base_delta_bytes"], kChunk);
    EXPECT_EQ(j["objects"][0]["new_bytes"], kChunk);
    EXPECT_EQ(j["objects"][1]["base_ref_bytes"], kChunk);
    EXPECT_EQ(j["base_ref_bytes"], 3 * kChunk);
    EXPECT_EQ(j["base_delta_bytes"], kChunk);
    EXPECT_EQ(j["new_bytes"], kChunk);
    if (mode.empty()) {
      EXPECT_EQ(j["base"]["id"], HexDigest((*b)->id()));
      EXPECT_EQ(j["base"]["location"], "b.vfs");
      EXPECT_EQ(j["base"]["chain_length"], 2);
      ASSERT_EQ(j["stream_id"].get<std::string>().size(), 64u);
    } else {
      EXPECT_EQ(j["objects"][0]["base_refs"], 2);
      EXPECT_EQ(j["objects"][0]["base_deltas"], 1);
    }
    out = Cli("inspect " + mode + chain.pc, &rc);
    ASSERT_EQ(rc, 0) << out;
    if (mode.empty()) {
      EXPECT_NE(out.find("base:     " + HexDigest((*b)->id()) + " (b.vfs), chain of 2 bases"), std::string::npos)
          << out;
    }
    EXPECT_NE(out.find("from the base: 32.00 KiB referenced, 16.00 KiB as deltas, 16.00 KiB new"), std::string::npos)
        << out;
  }
}

}  // namespace
}  // namespace vramflow
