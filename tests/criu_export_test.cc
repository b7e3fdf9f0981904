// SPDX-License-Identifier: MIT
// `vramflow criu export-upstream` (tools/criu_export.h): vramflow's images
// directory -> upstream's amdgpu-pages layout, and its failures.
//
// The directories are built as the plugin builds them: the KFD image with
// the plugin's own writer, each GPU's stream with DumpVram (the plugin's
// data path) from files standing in for BOs. The restore side of upstream's
// layout, against upstream's own schema under a real CRIU, is in
// real_criu_upstream_test.cc.
#include "tools/criu_export.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "common/owner_tag.h"
#include "criu_amdgpu.pb.h"
#include "plugin/kfd/kfd_devinfo.h"
#include "plugin/kfd/kfd_ops.h"
#include "plugin/kfd_image.h"
#include "plugin/vram_io.h"
#include "sim/kfd/sim_kfd.h"
#include "streamer/device/file_device.h"
#include "tests/support/shell.h"
#include "tests/support/test_util.h"
#include "transport/core/fd_stream.h"

namespace vramflow {
namespace {

using testing::ReadFileBytes;
using testing::TempDir;
using testing::WriteFileBytes;

constexpr int kId = 17;

struct TestBo {
  uint32_t gpu_id;
  uint32_t alloc_flags;
  uint64_t size;
};

// A CRIU images directory as vramflow's plugin leaves it: amdgpu-kfd-17.img
// and a stream per GPU, for 2 simulated GPUs (0x1000, 0x1111).
class ExportDir {
 public:
  explicit ExportDir(const TempDir& tmp) : dir_(tmp.File("images")) {
    std::filesystem::create_directories(dir_);
    SimKfd kfd(SimKfdOptions{});
    gpus_ = kfd.GpuIds();
    // GPU 1: VRAM, a doorbell (no contents), GTT, VRAM. GPU 2: VRAM only.
    bos_ = {{gpus_[0], kKfdBoVram, 3u << 20},  {gpus_[0], kKfdBoDoorbell, 8u << 10},
            {gpus_[1], kKfdBoVram, 1u << 20},  {gpus_[0], kKfdBoGtt, 256u << 10},
            {gpus_[0], kKfdBoVram, 64u << 10}, {gpus_[1], kKfdBoVram, (2u << 20) + 4096}};
    for (size_t i = 0; i < bos_.size(); ++i)
      contents_.push_back(KfdBoHasContents(bos_[i].alloc_flags)
                              ? testing::ModelBytes(DataKind::kBf16Weights, bos_[i].size, 50 + i)
                              : std::vector<uint8_t>());

    Result<Topology> topology = kfd.MachineTopology();
    EXPECT_TRUE(topology.ok()) << topology.status().ToString();
    criu::CriuKfd image;
    image.set_pid(1234);
    TopologyToImage(*topology, {}, &image);
    image.set_num_of_bos(bos_.size());
    for (size_t i = 0; i < bos_.size(); ++i) {
      criu::KfdBoEntry* e = image.add_bo_entries();
      e->set_addr(0x7f0000000000ull + (i << 24));
      e->set_size(bos_[i].size);
      e->set_offset(i << 12);
      e->set_alloc_flags(bos_[i].alloc_flags);
      e->set_gpu_id(bos_[i].gpu_id);
      e->set_handle(i + 1);
    }
    image.set_num_of_objects(0);
    image.set_priv_data("opaque");
    image.set_shared_mem_size(0);
    image.set_shared_mem_magic(0);
    Result<std::vector<uint8_t>> encoded = EncodeImage(image, KfdImageName(kId));
    EXPECT_TRUE(encoded.ok()) << encoded.status().ToString();
    WriteFileBytes(Path(KfdImageName(kId)), *encoded);
    for (uint32_t gpu : gpus_) WriteStream(tmp, gpu);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }
  const std::vector<uint32_t>& gpus() const { return gpus_; }

  // Upstream's pages file of `gpu`: a native size_t, then the bytes of its
  // VRAM/GTT BOs in image order.
  std::vector<uint8_t> ExpectedPages(uint32_t gpu) const {
    std::vector<uint8_t> out(sizeof(size_t));
    for (size_t i = 0; i < bos_.size(); ++i)
      if (bos_[i].gpu_id == gpu) out.insert(out.end(), contents_[i].begin(), contents_[i].end());
    const size_t size = out.size() - sizeof(size_t);
    std::memcpy(out.data(), &size, sizeof size);
    return out;
  }

  // Every name in the directory.
  std::set<std::string> Names() const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) names.insert(e.path().filename());
    return names;
  }

 private:
  // The GPU's stream, written by the plugin's DumpVram from BO files.
  void WriteStream(const TempDir& tmp, uint32_t gpu) {
    FileDevice device("bo files");
    std::vector<VramBo> bos;
    std::vector<UniqueFd> fds;
    for (size_t i = 0; i < bos_.size(); ++i) {
      if (bos_[i].gpu_id != gpu || contents_[i].empty()) continue;
      const std::string path = tmp.File("bo-" + std::to_string(i));
      WriteFileBytes(path, contents_[i]);
      fds.emplace_back(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      bos.push_back(VramBo{static_cast<uint32_t>(i), bos_[i].size, 0, fds.back().get()});
    }
    Result<std::unique_ptr<ByteSink>> sink = OpenFileSink(Path(VramStreamName(kId, gpu)), FileSinkOptions{});
    ASSERT_TRUE(sink.ok()) << sink.status().ToString();
    PipelineOptions options;
    options.chunk_size = 256 << 10;  // several chunks per BO
    PipelineStats stats;
    Status s = DumpVram(device, gpu, bos, **sink, options, &stats);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::string dir_;
  std::vector<uint32_t> gpus_;
  std::vector<TestBo> bos_;
  std::vector<std::vector<uint8_t>> contents_;
};

ExportUpstreamOptions Options(const ExportDir& images) {
  ExportUpstreamOptions options;
  options.dir = images.dir();
  options.pipeline.max_memory = 32 << 20;
  return options;
}

TEST(CriuExportTest, WritesUpstreamPagesLayoutAndKeepsStreams) {
  TempDir tmp;
  ExportDir images(tmp);
  ExportUpstreamReport report;
  Status s = RunExportUpstream(Options(images), &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(report.gpus.size(), 2u);
  for (const ExportedGpu& gpu : report.gpus) {
    EXPECT_TRUE(gpu.written);
    EXPECT_EQ(ReadFileBytes(images.Path(gpu.pages)), images.ExpectedPages(gpu.gpu_id)) << gpu.pages;
  }
  EXPECT_EQ(report.gpus[0].bos, 3u);  // the doorbell has no contents, so no bytes in the file
  EXPECT_EQ(report.gpus[0].bytes, (3u << 20) + (256u << 10) + (64u << 10));
  EXPECT_EQ(report.gpus[1].bos, 2u);
  EXPECT_TRUE(report.removed.empty());
  EXPECT_EQ(images.Names(),
            (std::set<std::string>{KfdImageName(kId), VramStreamName(kId, images.gpus()[0]),
                                   VramStreamName(kId, images.gpus()[1]), PagesImageName(kId, images.gpus()[0]),
                                   PagesImageName(kId, images.gpus()[1])}));
}

TEST(CriuExportTest, RemoveStreamsLeavesOnlyUpstreamsLayout) {
  TempDir tmp;
  ExportDir images(tmp);
  ExportUpstreamOptions options = Options(images);
  options.remove_streams = true;
  ExportUpstreamReport report;
  Status s = RunExportUpstream(options, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(report.removed.size(), 2u);
  EXPECT_EQ(images.Names(), (std::set<std::string>{KfdImageName(kId), PagesImageName(kId, images.gpus()[0]),
                                                   PagesImageName(kId, images.gpus()[1])}));
  EXPECT_EQ(ReadFileBytes(images.Path(PagesImageName(kId, images.gpus()[1]))), images.ExpectedPages(images.gpus()[1]));
}

//! A byte flipped inside GPU 2's stream: the export fails naming the
//! stream, and neither pages file (GPU 1's was complete) nor a temporary
//! file is left; the streams are untouched.
TEST(CriuExportTest, CorruptStreamLeavesNoPagesFile) {
  TempDir tmp;
  ExportDir images(tmp);
  const std::string stream = images.Path(VramStreamName(kId, images.gpus()[1]));
  std::vector<uint8_t> bytes = ReadFileBytes(stream);
  bytes[bytes.size() / 2] ^= 0x40;
  WriteFileBytes(stream, bytes);
  const std::set<std::string> before = images.Names();
  ExportUpstreamReport report;
  Status s = RunExportUpstream(Options(images), &report);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(VramStreamName(kId, images.gpus()[1])), std::string::npos) << s.ToString();
  EXPECT_EQ(images.Names(), before);
  EXPECT_TRUE(report.gpus.empty());
}

//! A truncated stream (the dump's writer died) fails too.
TEST(CriuExportTest, TruncatedStreamFails) {
  TempDir tmp;
  ExportDir images(tmp);
  const std::string stream = images.Path(VramStreamName(kId, images.gpus()[0]));
  std::vector<uint8_t> bytes = ReadFileBytes(stream);
  bytes.resize(bytes.size() - 100);
  WriteFileBytes(stream, bytes);
  const std::set<std::string> before = images.Names();
  ExportUpstreamReport report;
  Status s = RunExportUpstream(Options(images), &report);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(VramStreamName(kId, images.gpus()[0])), std::string::npos) << s.ToString();
  EXPECT_EQ(images.Names(), before);
}

//! An existing pages file is refused before anything is written, and kept
//! as it was; --force replaces it.
TEST(CriuExportTest, ExistingPagesFileNeedsForce) {
  TempDir tmp;
  ExportDir images(tmp);
  const std::string pages = images.Path(PagesImageName(kId, images.gpus()[1]));
  WriteFileBytes(pages, {1, 2, 3});
  ExportUpstreamOptions options = Options(images);
  ExportUpstreamReport report;
  Status s = RunExportUpstream(options, &report);
  ASSERT_EQ(s.code(), Status::Code::kAlreadyExists) << s.ToString();
  EXPECT_NE(s.message().find("--force"), std::string::npos) << s.ToString();
  EXPECT_EQ(ReadFileBytes(pages), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_FALSE(std::filesystem::exists(images.Path(PagesImageName(kId, images.gpus()[0]))));

  options.force = true;
  s = RunExportUpstream(options, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadFileBytes(pages), images.ExpectedPages(images.gpus()[1]));
}

//! A GPU whose stream is gone but whose pages file is there (a checkpoint
//! already in upstream's layout) is left alone and reported as kept.
TEST(CriuExportTest, KeepsPagesFileWithoutStream) {
  TempDir tmp;
  ExportDir images(tmp);
  ExportUpstreamOptions options = Options(images);
  options.remove_streams = true;
  ExportUpstreamReport report;
  ASSERT_TRUE(RunExportUpstream(options, &report).ok());
  const std::string pages = images.Path(PagesImageName(kId, images.gpus()[0]));
  WriteFileBytes(pages, {9, 9});  // not checked: the export has no stream to check it against
  Status s = RunExportUpstream(options, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(report.gpus.size(), 2u);
  EXPECT_FALSE(report.gpus[0].written);
  EXPECT_FALSE(report.gpus[1].written);
  EXPECT_TRUE(report.removed.empty());
  EXPECT_EQ(ReadFileBytes(pages), (std::vector<uint8_t>{9, 9}));
}

//! A GPU with neither a stream nor a pages file: an error that names both
//! files and says where streams sent elsewhere must go.
TEST(CriuExportTest, MissingStreamNamesTheGpu) {
  TempDir tmp;
  ExportDir images(tmp);
  std::filesystem::remove(images.Path(VramStreamName(kId, images.gpus()[0])));
  ExportUpstreamReport report;
  Status s = RunExportUpstream(Options(images), &report);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(VramStreamName(kId, images.gpus()[0])), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(PagesImageName(kId, images.gpus()[0])), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("VRAMFLOW_TARGET"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(images.Path(PagesImageName(kId, images.gpus()[1]))));
}

TEST(CriuExportTest, DirectoryWithoutKfdImageFails) {
  TempDir tmp;
  ExportUpstreamOptions options;
  options.dir = tmp.path();
  ExportUpstreamReport report;
  Status s = RunExportUpstream(options, &report);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no amdgpu-kfd-<id>.img"), std::string::npos) << s.ToString();
}

//! The command line: exit status 3 (corrupt data) and one error line on a corrupt stream,
//! 0 and one line per pages file on success.
TEST(CriuExportTest, CommandLineExitStatus) {
  TempDir tmp;
  ExportDir images(tmp);
  const std::string stream = images.Path(VramStreamName(kId, images.gpus()[0]));
  const std::vector<uint8_t> good = ReadFileBytes(stream);
  std::vector<uint8_t> bad = good;
  bad[bad.size() / 3] ^= 0x01;
  WriteFileBytes(stream, bad);
  const std::string command =
      std::string(VRAMFLOW_BINARY) + " criu export-upstream " + testing::ShellQuote(images.dir());
  testing::CommandResult r = testing::RunShell(command);
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("vramflow criu export-upstream: error: "), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(images.Path(PagesImageName(kId, images.gpus()[0]))));

  WriteFileBytes(stream, good);
  r = testing::RunShell(command);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + PagesImageName(kId, images.gpus()[0])), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("wrote " + PagesImageName(kId, images.gpus()[1])), std::string::npos) << r.output;
  r = testing::RunShell(command);
  EXPECT_EQ(r.code, 1) << "a second run must not overwrite without --force\n" << r.output;
}

//! Temporary pages files carry their writer's owner tag: the next export in
//! the directory removes those of a writer that is gone (SIGKILL), never a
//! live one's. An interrupt before a temporary file is registered leaves
//! none either.
TEST(CriuExportTest, SweepsADeadExportsTemporaryFilesAndHonoursInterrupts) {
  TempDir tmp;
  ExportDir images(tmp);
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status;
  ::waitpid(child, &status, 0);
  const std::string dead =
      "." + PagesImageName(kId, images.gpus()[0]) + ".vf-export-" + std::to_string(child) + ".42-AbC123";
  const std::string live = "." + PagesImageName(kId, images.gpus()[1]) + ".vf-export-" + OwnerTag() + "-AbC123";
  WriteFileBytes(images.Path(dead), {1, 2, 3});
  WriteFileBytes(images.Path(live), {4, 5, 6});

  CleanupRegistry interrupted;
  interrupted.Run("interrupted by SIGTERM");
  ExportUpstreamOptions options = Options(images);
  options.cleanup = &interrupted;
  ExportUpstreamReport report;
  Status s = RunExportUpstream(options, &report);
  EXPECT_EQ(s.code(), Status::Code::kCancelled) << s.ToString();
  EXPECT_EQ(images.Names(), (std::set<std::string>{KfdImageName(kId), VramStreamName(kId, images.gpus()[0]),
                                                   VramStreamName(kId, images.gpus()[1]), live}));

  s = RunExportUpstream(Options(images), &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(images.Names().count(live));
  EXPECT_FALSE(images.Names().count(dead));
}

}  // namespace
}  // namespace vramflow
