// SPDX-License-Identifier: MIT
// BOs the plugin cannot save must stop the dump, never vanish from it:
// BOs shared between processes through dma-bufs (recognised by their GEM
// handles, which the image records as upstream's does) and BOs a render
// node holds through DRM.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "criu_amdgpu.pb.h"
#include "plugin/criu_dump.h"
#include "plugin/kfd_image.h"
#include "sim/kfd/sim_kfd.h"
#include "sim/kfd/sim_kfd_service.h"
#include "tests/support/plugin_machine.h"
#include "tests/support/test_util.h"
#include "transport/core/fd_stream.h"

namespace vramflow {
namespace {

constexpr pid_t kExporter = 4180001;
constexpr pid_t kImporter = 4180002;

// The simulated machine, with one record of dumped BOs across its dumps
// (as the plugin keeps for a CRIU run).
struct Machine : PluginMachine {
  explicit Machine(SimKfdOptions kfd_options = {}) : PluginMachine(kfd_options) { ctx.dumped_bos = &dumped; }
  const KfdNode& Gpu(uint32_t gpu_id) { return *topology.FindGpu(gpu_id); }

  DumpedBos dumped;
  Topology topology = kfd.MachineTopology().value();
};

// VRAM, GTT and a doorbell on each GPU.
std::vector<SimKfdBoSpec> Bos(const SimKfd& kfd, uint64_t va) {
  std::vector<SimKfdBoSpec> bos;
  for (uint32_t gpu : kfd.GpuIds()) {
    bos.push_back({va, 1 << 20, kKfdBoVram, gpu});
    bos.push_back({va + (2 << 20), 8 * 4096, kKfdBoGtt, gpu});
    bos.push_back({va + (3 << 20), 4096, kKfdBoDoorbell, gpu});
    va += 64 << 20;
  }
  return bos;
}

Result<KfdDumpResult> Dump(Machine& m, pid_t pid, int id) {
  UniqueFd file = m.kfd.OpenKfd(pid).value();
  return DumpKfdFile(m.ctx, file.get(), id, /*unpause_now=*/true);
}

criu::CriuKfd ReadKfdImage(Machine& m, int id) {
  criu::CriuKfd image;
  std::unique_ptr<ByteSource> source = OpenFileSource(m.dir.File(KfdImageName(id))).value();
  Status s = ReadImage(*source, &image, KfdImageName(id));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return image;
}

// Upstream stores each BO's GEM handle (get_gem_handle: the dumper's DRM
// file imports the BO's dma-buf), and -1 for a BO without one.
TEST(SharedBos, ImageCarriesGemHandlesAsUpstream) {
  Machine m;
  ASSERT_TRUE(m.kfd.AddProcess(kExporter, Bos(m.kfd, 0x100000000ull)).ok());
  ASSERT_TRUE(Dump(m, kExporter, 5).ok());
  const criu::CriuKfd image = ReadKfdImage(m, 5);
  const std::vector<SimKfdBoInfo> bos = m.kfd.Bos(kExporter).value();
  ASSERT_EQ(image.bo_entries_size(), static_cast<int>(bos.size()));
  for (size_t i = 0; i < bos.size(); ++i) {
    const uint32_t handle = image.bo_entries(static_cast<int>(i)).handle();
    if (bos[i].fd < 0) {
      EXPECT_EQ(handle, 0xffffffffu) << "BO " << i << " has no dma-buf: upstream writes -1";
      continue;
    }
    // The same BO imported again into the same DRM file gives the same handle.
    Result<uint32_t> again = m.backend->GemHandle(m.Gpu(bos[i].gpu_id), bos[i].fd);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(handle, *again) << "BO " << i;
    EXPECT_NE(handle, 0u);
  }
}

// Two processes map one buffer (one exported it, the other imported it):
// restored, each would get its own copy. The second dump says so and the
// process runs on; the first process's images stay as they were.
TEST(SharedBos, ABoSharedBetweenProcessesRefusesTheDump) {
  Machine m;
  ASSERT_TRUE(m.kfd.AddProcess(kExporter, Bos(m.kfd, 0x100000000ull)).ok());
  ASSERT_TRUE(m.kfd.AddProcess(kImporter, {}).ok());
  ASSERT_TRUE(m.kfd.ShareBo(kExporter, 3, kImporter, 0x500000000ull).ok());
  ASSERT_TRUE(Dump(m, kExporter, 5).ok());
  Result<KfdDumpResult> second = Dump(m, kImporter, 6);
  ASSERT_FALSE(second.ok());
  const std::string message = second.status().ToString();
  EXPECT_NE(message.find("BO 0 of process " + std::to_string(kImporter)), std::string::npos) << message;
  EXPECT_NE(message.find("BO 3 of process " + std::to_string(kExporter)), std::string::npos) << message;
  EXPECT_NE(message.find("shared through a dma-buf"), std::string::npos) << message;
  EXPECT_EQ(m.kfd.ProcessState(kImporter).value(), SimKfdProcessState::kRunning);
  EXPECT_FALSE(std::filesystem::exists(m.dir.File(KfdImageName(6))));
  EXPECT_TRUE(std::filesystem::exists(m.dir.File(KfdImageName(5))));
}

// Unshared processes in one dump: nothing is refused.
TEST(SharedBos, SeparateProcessesDumpTogether) {
  Machine m;
  ASSERT_TRUE(m.kfd.AddProcess(kExporter, Bos(m.kfd, 0x100000000ull)).ok());
  ASSERT_TRUE(m.kfd.AddProcess(kImporter, Bos(m.kfd, 0x100000000ull)).ok());
  ASSERT_TRUE(Dump(m, kExporter, 5).ok());
  Result<KfdDumpResult> second = Dump(m, kImporter, 6);
  EXPECT_TRUE(second.ok()) << second.status().ToString();
}

// A render node holding BOs of its own (GEM_CREATE) refuses the dump with
// what it holds; one without any, or a kernel that cannot list them (as
// upstream), dumps.
TEST(SharedBos, DrmBosOnARenderNodeRefuseTheDump) {
  Machine m;
  const uint32_t gpu = m.kfd.GpuIds()[0];
  UniqueFd render = m.kfd.OpenRenderNode(gpu).value();
  EXPECT_TRUE(DumpRenderNodeFile(m.ctx, render.get(), 9, gpu, {}).ok());
  ASSERT_TRUE(m.kfd.AddDrmBo(render.get(), 2 << 20, /*imported=*/false).ok());
  ASSERT_TRUE(m.kfd.AddDrmBo(render.get(), 1 << 20, /*imported=*/true).ok());
  Status s = DumpRenderNodeFile(m.ctx, render.get(), 10, gpu, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kNotSupported);
  EXPECT_NE(s.ToString().find("renderD128 (file 10) holds 2 BOs allocated through DRM, not KFD (1 imported"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.ToString().find("3145728 bytes"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(m.dir.File(RenderImageName(10))));

  SimKfdOptions old_kernel;
  old_kernel.gem_list_handles = false;
  Machine old(old_kernel);
  UniqueFd old_render = old.kfd.OpenRenderNode(gpu).value();
  ASSERT_TRUE(old.kfd.AddDrmBo(old_render.get(), 2 << 20, false).ok());
  Status unseen = DumpRenderNodeFile(old.ctx, old_render.get(), 10, gpu, {});
  EXPECT_TRUE(unseen.ok()) << unseen.ToString();
}

}  // namespace
}  // namespace vramflow
