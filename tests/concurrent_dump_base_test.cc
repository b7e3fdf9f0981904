// SPDX-License-Identifier: MIT
// ConcurrentDump with a base (`vramflow streamer capture --base`): each input
// matched by name to the base's object, each chunk to the base's chunk at
// the same offset and size (streamer/base_chunk_coding.h); read back with
// the base.
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "streamer/concurrent_dump.h"
#include "streamer/format/base_stream.h"
#include "streamer/format/stream_reader.h"
#include "tests/support/test_util.h"
#include "transport/core/fd_stream.h"
#include "transport/core/file_random_access.h"
#include "transport/open_uri.h"

namespace vramflow {
namespace {

constexpr size_t kChunk = 64 << 10;

struct Input {
  std::string name;
  std::vector<uint8_t> bytes;
  bool raw = false;  // stored as it is (CRIU's small images)
};

PipelineOptions Options() {
  PipelineOptions options;
  options.chunk_size = kChunk;
  options.max_memory = 32ull << 20;
  options.threads = 2;
  return options;
}

// Dumps `inputs` into the file `path` with `options`.
Status DumpFile(const std::string& path, const std::vector<Input>& inputs, const PipelineOptions& options,
                PipelineStats* stats) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenFileSink(path, FileSinkOptions{}));
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ConcurrentDump> dump, ConcurrentDump::Start(sink.get(), options));
  for (const Input& in : inputs) {
    ConcurrentInput input;
    input.metadata.name = in.name;
    input.content = in.bytes;
    if (in.raw) input.choose_storage = [](std::span<const uint8_t>, bool) { return ChunkStorage::kRaw; };
    VF_RETURN_IF_ERROR(dump->Add(std::move(input)));
  }
  std::vector<ConcurrentObject> objects;
  VF_RETURN_IF_ERROR(dump->Drain(&objects));
  VF_RETURN_IF_ERROR(dump->Finish(stats));
  return sink->Commit();
}

BaseOpenOptions FileOpener() {
  BaseOpenOptions options;
  options.open = [](const std::string& location) -> Result<std::shared_ptr<RandomAccessSource>> {
    const TransportOptions transport;  // a named object: GCC 12 warns of a temporary's uninitialized strings
    VF_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessSource> source, OpenRandomAccess(location, transport));
    return std::shared_ptr<RandomAccessSource>(std::move(source));
  };
  return options;
}

// Every object's bytes and the kinds of its chunk frames.
class Contents : public StreamVisitor {
 public:
  Status OnChunk(const ChunkEvent& e) override {
    std::vector<uint8_t>& bytes = objects[e.object.metadata.name];
    if (bytes.size() < e.header.offset + e.header.raw_size) bytes.resize(e.header.offset + e.header.raw_size);
    if (!e.data.empty()) std::memcpy(bytes.data() + e.header.offset, e.data.data(), e.data.size());
    kinds[e.object.metadata.name].push_back(static_cast<FrameKind>(e.header.kind));
    return Status::Ok();
  }
  Status OnObjectEnd(const ObjectState& o) override {
    objects[o.metadata.name].resize(o.size);
    return Status::Ok();
  }
  std::map<std::string, std::vector<uint8_t>> objects;
  std::map<std::string, std::vector<FrameKind>> kinds;
};

Status ReadBack(const std::string& path, const std::string& base, Contents* contents) {
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenFileSource(path));
  ReadOptions read;
  if (!base.empty())
    read.open_base = [base](const BaseDescriptor& d) { return OpenBaseStream(base, FileOpener(), &d); };
  return ReadStream(*source, *contents, read);
}

// Every object of the stored stream at `path` read chunk by chunk through
// BaseStream::ReadChunk, with `path` opened as a base itself: its BASE_REFs
// and BASE_DELTAs resolved from its own base, the next link of the chain.
Result<std::map<std::string, std::vector<uint8_t>>> ReadThroughChain(const std::string& path) {
  VF_ASSIGN_OR_RETURN(std::shared_ptr<const BaseStream> stream, OpenBaseStream(path, FileOpener()));
  std::map<std::string, std::vector<uint8_t>> objects;
  BaseScratch scratch;
  for (const SeekIndexObject& o : stream->index().index.objects) {
    std::vector<uint8_t>& bytes = objects[o.metadata.name];
    bytes.assign(o.size, 0);
    for (const SeekIndexChunk& c : o.chunks) {
      if (c.kind == FrameKind::kZeroRun) continue;
      VF_RETURN_IF_ERROR(stream->ReadChunk(o.id, c.object_offset,
                                           std::span<uint8_t>(bytes.data() + c.object_offset, c.raw_size), scratch));
    }
  }
  return objects;
}

size_t Count(const std::vector<FrameKind>& kinds, FrameKind kind) {
  size_t n = 0;
  for (FrameKind k : kinds) n += k == kind ? 1 : 0;
  return n;
}

class ConcurrentDumpBase : public ::testing::Test {
 protected:
  void SetUp() override {
    // pages-1.img: 8 chunks of fp32 weights; core-1.img: a small image stored raw.
    pages = testing::ModelBytes(DataKind::kFp32Weights, 8 * kChunk, 3);
    core = testing::TextBytes(3000);
    PipelineStats stats;
    ASSERT_TRUE(
        DumpFile(base_path, {{"pages-1.img", pages}, {"core-1.img", core, true}, {"gone.img", core}}, Options(), &stats)
            .ok());
    // The next checkpoint: chunk 2 changed in the low bits of some words (a
    // delta pays), chunk 5 rewritten (nothing to gain), the rest as it was;
    // core-1.img the same; new.img not in the base.
    changed = pages;
    for (size_t i = 2 * kChunk; i < 3 * kChunk; i += 16) changed[i] ^= 0x5;
    const std::vector<uint8_t> fresh = testing::ModelBytes(DataKind::kRandom, kChunk, 9);
    std::memcpy(changed.data() + 5 * kChunk, fresh.data(), kChunk);
    fresh_file = testing::ModelBytes(DataKind::kFp32Weights, 2 * kChunk, 11);
  }

  testing::TempDir dir;
  const std::string base_path = dir.File("base.vfs");
  const std::string path = dir.File("next.vfs");
  std::vector<uint8_t> pages, core, changed, fresh_file;
};

TEST_F(ConcurrentDumpBase, UnchangedChunksAreReferencesChangedOnesDeltasAndAllReadBack) {
  Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(base_path, FileOpener());
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  PipelineOptions options = Options();
  options.base = *base;
  PipelineStats stats;
  Status dumped =
      DumpFile(path, {{"pages-1.img", changed}, {"core-1.img", core, true}, {"new.img", fresh_file}}, options, &stats);
  ASSERT_TRUE(dumped.ok()) << dumped.ToString();
  EXPECT_EQ(stats.base_ref_bytes, 6 * kChunk + core.size());
  EXPECT_EQ(stats.base_delta_bytes, kChunk);
  // Every byte comes back through the chain (the stream, then its base).
  Result<std::map<std::string, std::vector<uint8_t>>> chained = ReadThroughChain(path);
  ASSERT_TRUE(chained.ok()) << chained.status().ToString();
  EXPECT_EQ((*chained)["pages-1.img"], changed);
  EXPECT_EQ((*chained)["core-1.img"], core);
  EXPECT_EQ((*chained)["new.img"], fresh_file);

  Contents contents;
  Status read = ReadBack(path, base_path, &contents);
  ASSERT_TRUE(read.ok()) << read.ToString();
  EXPECT_EQ(contents.objects["pages-1.img"], changed);
  EXPECT_EQ(contents.objects["core-1.img"], core);
  EXPECT_EQ(contents.objects["new.img"], fresh_file);
  const std::vector<FrameKind>& kinds = contents.kinds["pages-1.img"];
  ASSERT_EQ(kinds.size(), 8u);
  EXPECT_EQ(kinds[2], FrameKind::kBaseDelta);
  EXPECT_EQ(kinds[5], FrameKind::kData);
  EXPECT_EQ(Count(kinds, FrameKind::kBaseRef), 6u);
  EXPECT_EQ(Count(contents.kinds["new.img"], FrameKind::kBaseRef), 0u);
  EXPECT_EQ(contents.kinds["core-1.img"], std::vector<FrameKind>{FrameKind::kBaseRef});

  // Without the base nothing is restored; with another stream as the base, neither.
  Contents without;
  EXPECT_FALSE(ReadBack(path, "", &without).ok());
  Contents wrong;
  Status wrong_base = ReadBack(path, path, &wrong);
  ASSERT_FALSE(wrong_base.ok());
  EXPECT_NE(wrong_base.message().find("wrong base"), std::string::npos) << wrong_base.ToString();
  EXPECT_TRUE(wrong.objects.empty());
}

// Bytes that equal the base's elsewhere (another offset, another file) are
// not references: only the same place of the same-named object counts.
TEST_F(ConcurrentDumpBase, OnlyTheSamePlaceOfTheSameNamedFileIsMatched) {
  Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(base_path, FileOpener());
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  PipelineOptions options = Options();
  options.base = *base;
  std::vector<uint8_t> shifted(pages.begin() + kChunk, pages.end());  // every chunk one place earlier
  PipelineStats stats;
  ASSERT_TRUE(DumpFile(path, {{"pages-1.img", shifted}, {"pages-2.img", pages}}, options, &stats).ok());
  EXPECT_EQ(stats.base_ref_bytes, 0u);
  EXPECT_EQ(stats.base_delta_bytes, 0u);
  Contents contents;
  ASSERT_TRUE(ReadBack(path, base_path, &contents).ok());
  EXPECT_EQ(contents.objects["pages-1.img"], shifted);
  EXPECT_EQ(contents.objects["pages-2.img"], pages);
}

// The BASE frame records the location the options give (capture's, from
// the stream's directory), else the one the base was opened from.
TEST_F(ConcurrentDumpBase, BaseFrameRecordsTheGivenLocation) {
  Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(base_path, FileOpener());
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  auto recorded = [&](const std::string& location) -> std::string {
    PipelineOptions options = Options();
    options.base = *base;
    options.base_location = location;
    PipelineStats stats;
    std::filesystem::remove(path);
    Status dumped = DumpFile(path, {{"pages-1.img", changed}}, options, &stats);
    if (!dumped.ok()) return dumped.ToString();
    Result<std::unique_ptr<RandomAccessSource>> source = OpenFileRandomAccess(path);
    if (!source.ok()) return source.status().ToString();
    Result<BaseDescriptor> frame = ReadBaseFrame(**source, path);
    return frame.ok() ? frame->location : frame.status().ToString();
  };
  EXPECT_EQ(recorded("base.vfs"), "base.vfs");
  EXPECT_EQ(recorded(""), base_path);
}

// Refs only: matched by the base's stored digests (a capture with
// --digests has them), no base chunk read, so no deltas; unchanged chunks
// are still references. Against a base without digests it is refused.
TEST_F(ConcurrentDumpBase, RefsOnlyCodesNoDeltasAndNeedsDigests) {
  PipelineOptions options = Options();
  options.base_refs_only = true;
  options.base = OpenBaseStream(base_path, FileOpener()).value();
  ASSERT_FALSE(options.base->has_digests());
  PipelineStats stats;
  Status refused = DumpFile(path, {{"pages-1.img", changed}}, options, &stats);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("digests"), std::string::npos) << refused.ToString();

  const std::string digested = dir.File("digested.vfs");
  PipelineOptions with_digests = Options();
  with_digests.chunk_digests = true;
  ASSERT_TRUE(DumpFile(digested, {{"pages-1.img", pages}}, with_digests, &stats).ok());
  options.base = OpenBaseStream(digested, FileOpener()).value();
  ASSERT_TRUE(options.base->has_digests());
  Status dumped = DumpFile(path, {{"pages-1.img", changed}}, options, &stats);
  ASSERT_TRUE(dumped.ok()) << dumped.ToString();
  EXPECT_EQ(stats.base_ref_bytes, 6 * kChunk);
  EXPECT_EQ(stats.base_delta_bytes, 0u);
  Contents contents;
  Status read = ReadBack(path, digested, &contents);
  ASSERT_TRUE(read.ok()) << read.ToString();
  EXPECT_EQ(contents.objects["pages-1.img"], changed);
}

}  // namespace
}  // namespace vramflow
