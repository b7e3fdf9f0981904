// SPDX-License-Identifier: MIT
// The plugin's incremental checkpoints (VRAMFLOW_BASE; plugin/vram_base.h)
// without the hooks: two dumps of a process on the simulated KFD, the second
// against the first, and restores of the second with its base, a wrong one
// and none. The hooks and CRIU's processes: criu_host_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "datagen/model_data.h"
#include "plugin/criu_dump.h"
#include "plugin/criu_restore.h"
#include "plugin/image_store.h"
#include "plugin/kfd_image.h"
#include "plugin/vram_base.h"
#include "tests/support/plugin_machine.h"
#include "tests/support/test_util.h"
#include "transport/core/file_random_access.h"

namespace vramflow {
namespace {

constexpr pid_t kCheckpointed = 4170101;
constexpr int kFileId = 7;

// Per GPU: a 3 MiB VRAM BO of bf16 weights, a GTT BO of random bytes, a doorbell.
void AddProcess(SimKfd& kfd) {
  std::vector<SimKfdBoSpec> bos;
  uint64_t va = 0x200000000ull;
  for (uint32_t gpu : kfd.GpuIds()) {
    bos.push_back({va, 3 << 20, kKfdBoVram, gpu});
    bos.push_back({va + (4 << 20), 16 * 4096, kKfdBoGtt, gpu});
    bos.push_back({va + (5 << 20), 4096, kKfdBoDoorbell, gpu});
    va += 64 << 20;
  }
  ASSERT_TRUE(kfd.AddProcess(kCheckpointed, bos).ok());
  for (size_t i = 0; i < bos.size(); ++i) {
    if (!KfdBoHasContents(bos[i].alloc_flags)) continue;
    const DataKind kind = bos[i].alloc_flags & kKfdBoGtt ? DataKind::kRandom : DataKind::kBf16Weights;
    GenerateModelData(kind, 50 + i, 0, kfd.BoBytes(kCheckpointed, i).value());
  }
}

// A training step: the low bits of every eighth bf16 word in the first MiB
// of each VRAM BO, and each GTT BO rewritten.
void Change(SimKfd& kfd) {
  std::vector<SimKfdBoInfo> bos = kfd.Bos(kCheckpointed).value();
  for (size_t i = 0; i < bos.size(); ++i) {
    if (!KfdBoHasContents(bos[i].alloc_flags)) continue;
    std::span<uint8_t> bytes = kfd.BoBytes(kCheckpointed, i).value();
    if (bos[i].alloc_flags & kKfdBoGtt) {
      GenerateModelData(DataKind::kRandom, 900 + i, 0, bytes);
    } else {
      for (size_t b = 0; b < (1u << 20); b += 16) bytes[b] ^= 0x3;
    }
  }
}

uint64_t StreamBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().starts_with("amdgpu-vram-")) bytes += entry.file_size();
  return bytes;
}

// A full dump into m.dir, a change, and a dump with VRAMFLOW_BASE=m.dir into
// `incremental`, which m.ctx then reads and writes.
struct TwoDumps {
  TwoDumps() {
    AddProcess(m.kfd);
    UniqueFd kfd_file = m.kfd.OpenKfd(kCheckpointed).value();
    Result<KfdDumpResult> full = DumpKfdFile(m.ctx, kfd_file.get(), kFileId, /*unpause_now=*/true);
    EXPECT_TRUE(full.ok()) << full.status().ToString();
    Change(m.kfd);
    m.options.base = m.dir.path();
    m.ctx.images = m.ctx.vram = incremental.get();
    Result<KfdDumpResult> second = DumpKfdFile(m.ctx, kfd_file.get(), kFileId, true);
    EXPECT_TRUE(second.ok()) << second.status().ToString();
    if (second.ok()) stats = second->stats;
  }

  // Every BO's bytes, checkpointed process against this one (the restored task).
  void ExpectRestored() {
    std::vector<SimKfdBoInfo> before = m.kfd.Bos(kCheckpointed).value(), after = m.kfd.Bos(::getpid()).value();
    ASSERT_EQ(before.size(), after.size());
    for (size_t i = 0; i < before.size(); ++i) {
      if (!KfdBoHasContents(before[i].alloc_flags)) continue;
      std::span<uint8_t> a = m.kfd.BoBytes(kCheckpointed, i).value(), b = m.kfd.BoBytes(::getpid(), i).value();
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << "BO " << i;
    }
  }

  PluginMachine m;
  testing::TempDir second_dir;
  std::unique_ptr<ImageStore> incremental = DirectoryStore(second_dir.path());
  PipelineStats stats;
};

TEST(PluginBase, IncrementalDumpRestoresEveryByteWithItsBase) {
  TwoDumps d;
  // Unchanged chunks are references, the changed bf16 chunks deltas, the GTT BOs new.
  const uint64_t gpus = d.m.kfd.GpuIds().size();
  EXPECT_EQ(d.stats.base_ref_bytes, gpus * (2u << 20));
  EXPECT_EQ(d.stats.base_delta_bytes, gpus * (1u << 20));
  EXPECT_EQ(d.stats.raw_bytes, gpus * ((3u << 20) + 16 * 4096));
  EXPECT_LT(3 * StreamBytes(d.second_dir.path()), StreamBytes(d.m.dir.path()));

  TaskRestoreState task;
  Result<RestoreFileResult> restored = RestoreFile(d.m.ctx, kFileId, &task, "");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  ASSERT_EQ(restored->outcome, RestoreFileResult::Outcome::kRestored);
  d.ExpectRestored();
}

// Without VRAMFLOW_BASE the restore finds the base where the dump found it.
TEST(PluginBase, RestoreFindsTheBaseWhereTheDumpDid) {
  TwoDumps d;
  d.m.options.base.clear();
  TaskRestoreState task;
  Result<RestoreFileResult> restored = RestoreFile(d.m.ctx, kFileId, &task, "");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  d.ExpectRestored();
}

TEST(PluginBase, RestoreWithAWrongBaseFailsNamingIt) {
  TwoDumps d;
  d.m.options.base = d.second_dir.path();  // a real stream of the same name, but not the base
  TaskRestoreState task;
  Result<RestoreFileResult> restored = RestoreFile(d.m.ctx, kFileId, &task, "");
  ASSERT_FALSE(restored.ok());
  const std::string message = restored.status().ToString();
  EXPECT_NE(message.find("wrong base"), std::string::npos) << message;
  EXPECT_NE(message.find("VRAMFLOW_BASE=" + d.second_dir.path()), std::string::npos) << message;
}

TEST(PluginBase, RestoreWithoutItsBaseFailsNamingIt) {
  TwoDumps d;
  std::filesystem::remove_all(d.m.dir.File(VramStreamName(kFileId, d.m.kfd.GpuIds()[0])));
  TaskRestoreState task;
  Result<RestoreFileResult> restored = RestoreFile(d.m.ctx, kFileId, &task, "");
  ASSERT_FALSE(restored.ok());
  const std::string message = restored.status().ToString();
  EXPECT_NE(message.find("VRAMFLOW_BASE=" + d.m.dir.path()), std::string::npos) << message;
  EXPECT_NE(message.find(VramStreamName(kFileId, d.m.kfd.GpuIds()[0])), std::string::npos) << message;
}

// A base that cannot be opened fails the dump: the process runs on, and no
// metadata image claims a checkpoint.
TEST(PluginBase, DumpWithoutItsBaseFailsAndLeavesNoImage) {
  PluginMachine m;
  AddProcess(m.kfd);
  m.options.base = m.dir.File("no-such-checkpoint");
  UniqueFd kfd_file = m.kfd.OpenKfd(kCheckpointed).value();
  Result<KfdDumpResult> dumped = DumpKfdFile(m.ctx, kfd_file.get(), kFileId, true);
  ASSERT_FALSE(dumped.ok());
  EXPECT_NE(dumped.status().message().find("VRAMFLOW_BASE=" + m.options.base), std::string::npos)
      << dumped.status().ToString();
  EXPECT_EQ(m.kfd.ProcessState(kCheckpointed).value(), SimKfdProcessState::kRunning);
  EXPECT_EQ(*m.images->Open(KfdImageName(kFileId)), nullptr);
}

// One stream named for a process with two GPUs: refused rather than code
// every GPU against the same base.
TEST(PluginBase, OneBaseStreamForTwoGpusIsRefused) {
  PluginMachine m;
  ASSERT_GE(m.kfd.GpuIds().size(), 2u);
  AddProcess(m.kfd);
  m.options.base = "s3://bucket/one.vfs";  // checked before anything is opened
  UniqueFd kfd_file = m.kfd.OpenKfd(kCheckpointed).value();
  Result<KfdDumpResult> dumped = DumpKfdFile(m.ctx, kfd_file.get(), kFileId, true);
  ASSERT_FALSE(dumped.ok());
  EXPECT_NE(dumped.status().message().find("{name}"), std::string::npos) << dumped.status().ToString();
}

// A restore that listens (VRAMFLOW_TARGET tcp:// or unix:) takes its stream
// from a network sender: without VRAMFLOW_BASE it opens no base where the
// sender's BASE frame says (a path on this machine it chose; issue 55), and
// says which base the stream wanted.
TEST(PluginBase, RestoreFromTheNetworkOpensNoBaseTheSenderNames) {
  TwoDumps d;
  const std::string stream_name = VramStreamName(kFileId, d.m.kfd.GpuIds()[0]);
  Result<std::unique_ptr<RandomAccessSource>> stream = OpenFileRandomAccess(d.second_dir.File(stream_name));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  Result<BaseDescriptor> wanted = ReadBaseFrame(**stream, stream_name);
  ASSERT_TRUE(wanted.ok()) << wanted.status().ToString();
  ASSERT_EQ(wanted->location, d.m.dir.File(stream_name)) << "the dump recorded where its base is, on this machine";
  d.m.options.base.clear();
  for (const std::string& target : {"unix:" + d.m.dir.File("{name}.sock"), std::string("tcp://127.0.0.1:7070")}) {
    SCOPED_TRACE(target);
    d.m.options.target = target;
    Result<std::shared_ptr<const BaseStream>> base = VramBaseOpener(d.m.options, stream_name)(*wanted);
    ASSERT_FALSE(base.ok()) << "opened " << wanted->location << ", which the sender named";
    EXPECT_NE(base.status().message().find("never offered"), std::string::npos) << base.status().ToString();
    EXPECT_NE(base.status().message().find(HexDigest(wanted->base_id)), std::string::npos) << base.status().ToString();
  }
  d.m.options.target = d.second_dir.path();  // from a directory, the BASE frame's location is the operator's
  EXPECT_TRUE(VramBaseOpener(d.m.options, stream_name)(*wanted).ok());
}

TEST(PluginBase, ImageLocationExpandsAsTheTargetDoes) {
  EXPECT_EQ(ImageLocation("/ckpt/1", "amdgpu-vram-7-4096.img").value(), "/ckpt/1/amdgpu-vram-7-4096.img");
  EXPECT_EQ(ImageLocation("s3://bucket/ckpt1/{name}", "a.img").value(), "s3://bucket/ckpt1/a.img");
  EXPECT_EQ(ImageLocation("/b/{name}.{name}", "x").value(), "/b/x.x");
  EXPECT_EQ(ImageLocation("/b/{name}", "{name}").value(), "/b/{name}");  // substituted once, not again
  EXPECT_EQ(ImageLocation("s3://bucket/one.vfs", "a.img").value(), "s3://bucket/one.vfs");
  EXPECT_FALSE(NamesOneImage("/ckpt/1"));
  EXPECT_FALSE(NamesOneImage("s3://bucket/{name}"));
  EXPECT_TRUE(NamesOneImage("s3://bucket/one.vfs"));
}

}  // namespace
}  // namespace vramflow
