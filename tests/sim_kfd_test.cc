// SPDX-License-Identifier: MIT
// The simulated KFD (sim/kfd/sim_kfd.h): KFD's CRIU op sequence, its order rules
// and errors, dma-buf fds on the BOs' memory, restore onto other gpu_ids,
// private-data checks, the sysfs topology it writes, fault injection.
#include "sim/kfd/sim_kfd.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "datagen/model_data.h"
#include "plugin/kfd/topology.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

constexpr uint32_t kWritable = 1u << 31;  // KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE: high bits ride along
constexpr uint64_t kVa = 0x7f0000000000;
constexpr pid_t kPid = 4242;
constexpr pid_t kRestoredPid = 5555;

// Two GPUs, every kind of BO; VRAM/GTT BOs get model data (FillLayout).
std::vector<SimKfdBoSpec> TwoGpuLayout(const std::vector<uint32_t>& gpus) {
  return {
      {kVa, 1 << 20, kKfdBoVram | kWritable, gpus[0]},    {kVa + 0x200000, 64 << 10, kKfdBoGtt, gpus[0]},
      {kVa + 0x400000, 8 << 10, kKfdBoUserptr, gpus[0]},  {kVa + 0x600000, 8 << 10, kKfdBoDoorbell, gpus[0]},
      {kVa, (256 << 10) + 100, kKfdBoVram, gpus[1]},  // same VA on another GPU; unaligned size
      {kVa + 0x600000, 8 << 10, kKfdBoDoorbell, gpus[1]}, {kVa + 0x800000, 4096, kKfdBoMmioRemap, gpus[1]},
  };
}
constexpr size_t kBoCount = 7;
constexpr uint32_t kQueues = 2;  // one per doorbell BO

void FillLayout(SimKfd& kfd, pid_t pid) {
  const std::pair<size_t, DataKind> fills[] = {
      {0, DataKind::kBf16Weights}, {1, DataKind::kFp32Weights}, {4, DataKind::kAdamV}};
  for (auto [index, kind] : fills) {
    Result<std::span<uint8_t>> bytes = kfd.BoBytes(pid, index);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    GenerateModelData(kind, index + 1, 0, *bytes);
  }
}

std::vector<uint8_t> ReadAll(int fd, uint64_t size) {
  std::vector<uint8_t> out(size);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, out.data() + done, size - done, static_cast<off_t>(done));
    if (n <= 0) break;
    done += static_cast<uint64_t>(n);
  }
  out.resize(done);
  return out;
}

bool WriteAll(int fd, std::span<const uint8_t> bytes) {
  uint64_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n <= 0) return false;
    done += static_cast<uint64_t>(n);
  }
  return true;
}

size_t OpenFdCount() {
  size_t n = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

void CloseDmabufs(KfdCheckpoint& state) {
  for (KfdBo& bo : state.bos) {
    if (bo.dmabuf_fd != kKfdNoFd) ::close(bo.dmabuf_fd);
    bo.dmabuf_fd = kKfdNoFd;
  }
}

std::vector<uint8_t> Copy(std::span<const uint8_t> s) { return {s.begin(), s.end()}; }

// A source machine with the two-GPU process, dumped (ProcessInfo, Checkpoint, Unpause).
struct Dumped {
  SimKfd kfd;
  KfdProcessInfo info;
  KfdCheckpoint state;
};

void Dump(Dumped* d) {
  ASSERT_TRUE(d->kfd.AddProcess(kPid, TwoGpuLayout(d->kfd.GpuIds())).ok());
  FillLayout(d->kfd, kPid);
  Result<UniqueFd> fd = d->kfd.OpenKfd(kPid);
  ASSERT_TRUE(fd.ok());
  std::unique_ptr<KfdOps> ops = d->kfd.Ops();
  Result<KfdProcessInfo> info = ops->ProcessInfo(fd->get(), kPid);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  d->info = *info;
  Result<KfdCheckpoint> state = ops->Checkpoint(fd->get(), *info);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  d->state = std::move(state).value();
  CloseDmabufs(d->state);
  ASSERT_TRUE(ops->Unpause(fd->get()).ok());
}

TEST(SimKfdTest, DumpSequenceOnTwoGpus) {
  SimKfd kfd;
  const std::vector<uint32_t> gpus = kfd.GpuIds();
  ASSERT_EQ(gpus, (std::vector<uint32_t>{0x1000, 0x1111}));
  ASSERT_TRUE(kfd.AddProcess(kPid, TwoGpuLayout(gpus)).ok());
  FillLayout(kfd, kPid);
  Result<UniqueFd> fd = kfd.OpenKfd(kPid);
  ASSERT_TRUE(fd.ok());
  std::unique_ptr<KfdOps> ops = kfd.Ops();

  uint32_t major = 0, minor = 0;
  ASSERT_TRUE(ops->GetVersion(&major, &minor).ok());
  EXPECT_EQ(major, 1u);
  EXPECT_EQ(minor, 16u);
  EXPECT_TRUE(CheckKfdVersion(major, minor).ok());

  Result<KfdProcessInfo> info = ops->ProcessInfo(fd->get(), kPid);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->num_devices, 2u);
  EXPECT_EQ(info->num_bos, kBoCount);
  EXPECT_EQ(info->num_objects, kQueues + 1);
  EXPECT_GT(info->priv_data_size, 0u);
  EXPECT_EQ(*kfd.ProcessState(kPid), SimKfdProcessState::kPaused);

  const size_t fds_before = OpenFdCount();
  Result<KfdCheckpoint> state = ops->Checkpoint(fd->get(), *info);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(OpenFdCount(), fds_before + 3);  // one dma-buf per VRAM/GTT BO, now ours
  ASSERT_EQ(state->devices.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(state->devices[i].user_gpu_id, gpus[i]);
    EXPECT_EQ(state->devices[i].actual_gpu_id, gpus[i]);
  }
  EXPECT_EQ(state->priv_data.size(), info->priv_data_size);
  EXPECT_EQ(state->num_objects, info->num_objects);

  const std::vector<SimKfdBoSpec> specs = TwoGpuLayout(gpus);
  Result<std::vector<SimKfdBoInfo>> held = kfd.Bos(kPid);
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(state->bos.size(), kBoCount);
  for (size_t i = 0; i < kBoCount; ++i) {
    const KfdBo& bo = state->bos[i];
    SCOPED_TRACE("BO " + std::to_string(i));
    EXPECT_EQ(bo.addr, specs[i].addr);
    EXPECT_EQ(bo.size, specs[i].size);
    EXPECT_EQ(bo.gpu_id, specs[i].gpu_id);
    EXPECT_EQ(bo.alloc_flags, specs[i].alloc_flags);
    EXPECT_EQ(bo.offset, (*held)[i].offset);
    if (!KfdBoHasContents(bo.alloc_flags)) {
      EXPECT_EQ(bo.dmabuf_fd, kKfdNoFd);
      continue;
    }
    ASSERT_NE(bo.dmabuf_fd, kKfdNoFd);
    EXPECT_NE(bo.dmabuf_fd, (*held)[i].fd);  // a new fd ...
    std::span<uint8_t> bytes = *kfd.BoBytes(kPid, i);
    EXPECT_EQ(ReadAll(bo.dmabuf_fd, bo.size), Copy(bytes));  // ... on the BO's memory
    const uint8_t poke[] = {0xde, 0xad};
    ASSERT_TRUE(WriteAll(bo.dmabuf_fd, poke));
    EXPECT_EQ(bytes[0], 0xde);
    EXPECT_EQ(bytes[1], 0xad);
  }
  // mmap offsets as KFD encodes them: GEM offsets above 4 GiB, doorbells by gpu_id.
  EXPECT_GE(state->bos[0].offset, uint64_t{1} << 32);
  EXPECT_NE(state->bos[0].offset, state->bos[1].offset);
  EXPECT_EQ(state->bos[2].offset, specs[2].addr);
  EXPECT_NE(state->bos[3].offset, state->bos[5].offset);
  CloseDmabufs(*state);

  ASSERT_TRUE(ops->Unpause(fd->get()).ok());
  EXPECT_EQ(*kfd.ProcessState(kPid), SimKfdProcessState::kRunning);
  EXPECT_EQ(kfd.CallLog(), (std::vector<std::string>{"GetVersion", "ProcessInfo", "Checkpoint", "Unpause"}));
}

TEST(SimKfdTest, RestoreOntoOtherGpuIds) {
  Dumped src;
  Dump(&src);
  const std::vector<uint32_t> src_gpus = src.kfd.GpuIds();

  SimKfdOptions options;
  options.first_gpu_id = 0x2000;
  options.gpu_id_stride = 0x222;
  options.first_render_minor = 130;
  SimKfd dst(options);
  const std::vector<uint32_t> dst_gpus = dst.GpuIds();
  ASSERT_EQ(dst_gpus, (std::vector<uint32_t>{0x2000, 0x2222}));

  // Cross the GPUs over, so the mapping matters: src GPU i -> dst GPU 1 - i.
  KfdCheckpoint state = src.state;
  std::vector<UniqueFd> render;
  for (size_t i = 0; i < 2; ++i) {
    state.devices[i].actual_gpu_id = dst_gpus[1 - i];
    Result<UniqueFd> r = dst.OpenRenderNode(dst_gpus[1 - i]);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*dst.RenderNodeGpu(r->get()), dst_gpus[1 - i]);
    state.devices[i].drm_fd = r->get();
    render.push_back(std::move(r).value());
  }
  Result<UniqueFd> fd = dst.OpenKfd(kRestoredPid);
  ASSERT_TRUE(fd.ok());
  std::unique_ptr<KfdOps> ops = dst.Ops();
  Status s = ops->Restore(fd->get(), &state);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(*dst.ProcessState(kRestoredPid), SimKfdProcessState::kRestored);

  // Each device keeps the DRM file it was restored with, as KFD does; a new
  // open of the same render node is another file.
  for (size_t i = 0; i < 2; ++i) {
    struct stat st {};
    ASSERT_EQ(::fstat(render[i].get(), &st), 0);
    Result<SimKfdFile> kept = dst.RestoreDrmFile(kRestoredPid, dst_gpus[1 - i]);
    ASSERT_TRUE(kept.ok()) << kept.status().ToString();
    EXPECT_EQ(*kept, (SimKfdFile{st.st_dev, st.st_ino}));
    Result<UniqueFd> reopened = dst.OpenRenderNode(dst_gpus[1 - i]);
    ASSERT_TRUE(reopened.ok());
    ASSERT_EQ(::fstat(reopened->get(), &st), 0);
    EXPECT_NE(*kept, (SimKfdFile{st.st_dev, st.st_ino}));
  }
  EXPECT_FALSE(dst.RestoreDrmFile(kRestoredPid, 0x9999).ok());
  EXPECT_FALSE(dst.RestoreDrmFile(kPid, dst_gpus[0]).ok());

  Result<std::vector<SimKfdBoInfo>> restored = dst.Bos(kRestoredPid);
  ASSERT_TRUE(restored.ok());
  ASSERT_EQ(restored->size(), kBoCount);
  for (size_t i = 0; i < kBoCount; ++i) {
    SCOPED_TRACE("BO " + std::to_string(i));
    const KfdBo& bo = state.bos[i];
    const SimKfdBoInfo& r = (*restored)[i];
    const size_t src_device = bo.gpu_id == src_gpus[0] ? 0 : 1;
    EXPECT_EQ(bo.gpu_id, src.state.bos[i].gpu_id);  // buckets keep user ids
    EXPECT_EQ(r.gpu_id, dst_gpus[1 - src_device]);  // the BO is on the mapped GPU
    EXPECT_EQ(r.user_gpu_id, bo.gpu_id);
    EXPECT_EQ(r.addr, bo.addr);
    EXPECT_EQ(r.size, bo.size);
    EXPECT_EQ(r.offset, bo.restored_offset);
    if (bo.alloc_flags & kKfdBoUserptr) {
      EXPECT_EQ(bo.restored_offset, bo.offset);  // a user address: it does not move
    } else {
      EXPECT_NE(bo.restored_offset, bo.offset);
    }
    if (!KfdBoHasContents(bo.alloc_flags)) {
      EXPECT_EQ(bo.dmabuf_fd, kKfdNoFd);
      continue;
    }
    ASSERT_NE(bo.dmabuf_fd, kKfdNoFd);
    std::span<uint8_t> dst_bytes = *dst.BoBytes(kRestoredPid, i);
    EXPECT_EQ(dst_bytes.size(), bo.size);
    EXPECT_TRUE(std::all_of(dst_bytes.begin(), dst_bytes.end(), [](uint8_t b) { return b == 0; }));
    // Contents written through the dma-buf land in the restored BO.
    std::span<uint8_t> src_bytes = *src.kfd.BoBytes(kPid, i);
    ASSERT_TRUE(WriteAll(bo.dmabuf_fd, src_bytes));
    EXPECT_EQ(Copy(dst_bytes), Copy(src_bytes));
  }
  CloseDmabufs(state);

  // Resume comes from another KFD file (CRIU's main process).
  Result<UniqueFd> main_fd = dst.OpenKfd(0);
  ASSERT_TRUE(main_fd.ok());
  s = ops->Resume(main_fd->get(), kRestoredPid);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(*dst.ProcessState(kRestoredPid), SimKfdProcessState::kRunning);
  EXPECT_EQ(dst.CallLog(), (std::vector<std::string>{"Restore", "Resume"}));

  // The restored process checkpoints under its user gpu_ids, with the same
  // private data: a second migration works.
  Result<KfdProcessInfo> info = ops->ProcessInfo(fd->get(), kRestoredPid);
  ASSERT_TRUE(info.ok());
  Result<KfdCheckpoint> again = ops->Checkpoint(fd->get(), *info);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(again->devices.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(again->devices[i].user_gpu_id, src_gpus[i]);
    EXPECT_EQ(again->devices[i].actual_gpu_id, dst_gpus[1 - i]);
  }
  EXPECT_EQ(again->priv_data, src.state.priv_data);
  for (size_t i = 0; i < kBoCount; ++i) EXPECT_EQ(again->bos[i].gpu_id, src.state.bos[i].gpu_id);
  CloseDmabufs(*again);
  EXPECT_TRUE(ops->Unpause(fd->get()).ok());
}

TEST(SimKfdTest, OpsOutOfOrderFail) {
  SimKfd kfd;
  ASSERT_TRUE(kfd.AddProcess(kPid, TwoGpuLayout(kfd.GpuIds())).ok());
  Result<UniqueFd> fd = kfd.OpenKfd(kPid);
  ASSERT_TRUE(fd.ok());
  std::unique_ptr<KfdOps> ops = kfd.Ops();

  // Checkpoint before ProcessInfo: the process is not paused.
  KfdProcessInfo guess{2, kBoCount, kQueues + 1, 0};
  Result<KfdCheckpoint> early = ops->Checkpoint(fd->get(), guess);
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), Status::Code::kIoError);
  EXPECT_NE(early.status().message().find("not paused"), std::string::npos) << early.status().ToString();
  EXPECT_FALSE(ops->Unpause(fd->get()).ok());

  // Resume of a process that was never restored, and of no process.
  Status s = ops->Resume(fd->get(), kPid);
  EXPECT_FALSE(s.ok());
  s = ops->Resume(fd->get(), 999999);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("No such process"), std::string::npos) << s.ToString();

  // Counts that are not ProcessInfo's.
  Result<KfdProcessInfo> info = ops->ProcessInfo(fd->get(), kPid);
  ASSERT_TRUE(info.ok());
  KfdProcessInfo wrong = *info;
  wrong.num_bos -= 1;
  Result<KfdCheckpoint> bad = ops->Checkpoint(fd->get(), wrong);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Invalid argument"), std::string::npos) << bad.status().ToString();
  wrong = *info;
  wrong.priv_data_size += 8;
  EXPECT_FALSE(ops->Checkpoint(fd->get(), wrong).ok());

  // Unpause twice.
  EXPECT_TRUE(ops->Unpause(fd->get()).ok());
  s = ops->Unpause(fd->get());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not paused"), std::string::npos) << s.ToString();

  // Restore onto a pid that already has KFD state.
  ASSERT_TRUE(ops->ProcessInfo(fd->get(), kPid).ok());
  Result<KfdCheckpoint> state = ops->Checkpoint(fd->get(), *info);
  ASSERT_TRUE(state.ok());
  CloseDmabufs(*state);
  ASSERT_TRUE(ops->Unpause(fd->get()).ok());
  EXPECT_FALSE(ops->Restore(fd->get(), &*state).ok());

  // Files and pids that are not the process's.
  Result<UniqueFd> render = kfd.OpenRenderNode(kfd.GpuIds()[0]);
  ASSERT_TRUE(render.ok());
  EXPECT_FALSE(ops->ProcessInfo(render->get(), kPid).ok());
  EXPECT_FALSE(ops->ProcessInfo(-1, kPid).ok());
  Result<KfdProcessInfo> other = ops->ProcessInfo(fd->get(), kPid + 1);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("No such process"), std::string::npos);
  Result<UniqueFd> stray = kfd.OpenKfd(kPid + 1);
  ASSERT_TRUE(stray.ok());
  other = ops->ProcessInfo(stray->get(), kPid + 1);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("No such process"), std::string::npos);
  // The KFD file is known by its inode: a dup works too.
  UniqueFd dup(::dup(fd->get()));
  EXPECT_TRUE(ops->ProcessInfo(dup.get(), 0).ok());
  EXPECT_TRUE(ops->Unpause(dup.get()).ok());
  // The process exits.
  ASSERT_TRUE(kfd.RemoveProcess(kPid).ok());
  other = ops->ProcessInfo(fd->get(), kPid);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("No such process"), std::string::npos);
}

// A restore target with render nodes open for a 1:1 mapping.
struct Target {
  SimKfd kfd;
  std::vector<UniqueFd> render;
  UniqueFd kfd_fd;
  std::unique_ptr<KfdOps> ops = kfd.Ops();

  explicit Target(KfdCheckpoint* state) {
    const std::vector<uint32_t> gpus = kfd.GpuIds();
    for (size_t i = 0; i < state->devices.size(); ++i) {
      state->devices[i].actual_gpu_id = gpus[i];
      render.push_back(std::move(kfd.OpenRenderNode(gpus[i])).value());
      state->devices[i].drm_fd = render.back().get();
    }
    kfd_fd = std::move(kfd.OpenKfd(kRestoredPid)).value();
  }
  Status Restore(KfdCheckpoint state) {
    Status s = ops->Restore(kfd_fd.get(), &state);
    CloseDmabufs(state);
    return s;
  }
};

TEST(SimKfdTest, RestoreRejectsCorruptedPrivateDataAndBadBuckets) {
  Dumped src;
  Dump(&src);
  KfdCheckpoint state = src.state;
  Target target(&state);

  auto expect_rejected = [&](const KfdCheckpoint& bad, const std::string& what) {
    SCOPED_TRACE(what);
    Status s = target.Restore(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("Invalid argument"), std::string::npos) << s.ToString();
    EXPECT_FALSE(target.kfd.HasProcess(kRestoredPid));  // nothing half-made
  };
  for (size_t at : {size_t{0}, size_t{30}, state.priv_data.size() / 2, state.priv_data.size() - 1}) {
    KfdCheckpoint bad = state;
    bad.priv_data[at] ^= 0x40;
    expect_rejected(bad, "priv byte " + std::to_string(at));
  }
  KfdCheckpoint bad = state;
  bad.priv_data.pop_back();
  expect_rejected(bad, "short priv data");
  bad = state;
  bad.priv_data.clear();
  expect_rejected(bad, "no priv data");
  bad = state;
  bad.bos[1].addr += 0x1000;
  expect_rejected(bad, "bucket address");
  bad = state;
  bad.bos[0].size -= 4096;
  expect_rejected(bad, "bucket size");
  bad = state;
  bad.num_objects += 1;
  expect_rejected(bad, "num_objects");
  bad = state;
  bad.bos.pop_back();
  expect_rejected(bad, "a BO missing");
  bad = state;
  bad.bos[4].gpu_id = 0x4242;
  expect_rejected(bad, "BO on no device");
  bad = state;
  bad.devices[0].actual_gpu_id = 0x9999;
  expect_rejected(bad, "no such GPU");
  bad = state;
  bad.devices[1].actual_gpu_id = bad.devices[0].actual_gpu_id;
  expect_rejected(bad, "a GPU twice");
  bad = state;
  std::swap(bad.devices[0].drm_fd, bad.devices[1].drm_fd);
  expect_rejected(bad, "render node of the other GPU");

  // Device order does not matter (KFD matches them by gpu_id); the good
  // checkpoint restores.
  KfdCheckpoint good = state;
  std::swap(good.devices[0], good.devices[1]);
  Status s = target.Restore(good);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(SimKfdTest, SysfsTopologyParses) {
  for (uint64_t hive : {uint64_t{0}, uint64_t{0x5a5a0000beef}}) {
    SCOPED_TRACE(hive);
    SimKfdOptions options;
    options.gpus = 4;
    options.xgmi_hive_id = hive;
    options.gpu_properties.vram_public = hive == 0;
    SimKfd kfd(options);
    testing::TempDir dir;
    Status s = kfd.WriteSysfsTopology(dir.path());
    ASSERT_TRUE(s.ok()) << s.ToString();
    Result<Topology> parsed = ParseTopology(dir.path());
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    Result<Topology> machine = kfd.MachineTopology();
    ASSERT_TRUE(machine.ok());
    EXPECT_EQ(parsed->nodes, machine->nodes);
    ASSERT_EQ(parsed->gpus().size(), 4u);
    ASSERT_EQ(parsed->cpus().size(), 1u);
    for (size_t i = 0; i < 4; ++i) {
      const KfdNode& gpu = *parsed->gpus()[i];
      EXPECT_EQ(gpu.gpu_id, kfd.GpuIds()[i]);
      EXPECT_EQ(gpu.drm_render_minor, 128 + i);
      EXPECT_EQ(gpu.hive_id, hive);
      EXPECT_EQ(gpu.iolinks.size(), hive ? 4u : 1u);
      EXPECT_EQ(parsed->NumaNode(gpu), 0u);
      EXPECT_EQ(gpu.vram_size, uint64_t{64} << 30);
    }
  }
}

TEST(SimKfdTest, FaultInjection) {
  SimKfd kfd;
  ASSERT_TRUE(kfd.AddProcess(kPid, TwoGpuLayout(kfd.GpuIds())).ok());
  Result<UniqueFd> fd = kfd.OpenKfd(kPid);
  ASSERT_TRUE(fd.ok());
  std::unique_ptr<KfdOps> ops = kfd.Ops();

  SimKfdFaults faults;
  faults.fail_op = "Checkpoint";
  faults.fail_errno = ENOMEM;
  kfd.SetFaults(faults);
  Result<KfdProcessInfo> info = ops->ProcessInfo(fd->get(), kPid);
  ASSERT_TRUE(info.ok());
  Result<KfdCheckpoint> state = ops->Checkpoint(fd->get(), *info);
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.status().message().find("injected"), std::string::npos) << state.status().ToString();
  EXPECT_NE(state.status().message().find("Cannot allocate memory"), std::string::npos);
  EXPECT_TRUE(ops->Unpause(fd->get()).ok());  // the failed call changed nothing

  // The second ProcessInfo fails, and every one after it.
  faults = {};
  faults.fail_op = "ProcessInfo";
  faults.fail_after = 1;
  kfd.SetFaults(faults);
  EXPECT_TRUE(ops->ProcessInfo(fd->get(), kPid).ok());
  EXPECT_TRUE(ops->Unpause(fd->get()).ok());
  EXPECT_FALSE(ops->ProcessInfo(fd->get(), kPid).ok());
  EXPECT_FALSE(ops->ProcessInfo(fd->get(), kPid).ok());
  EXPECT_EQ(*kfd.ProcessState(kPid), SimKfdProcessState::kRunning);

  // Checkpoint returns one BO fewer than ProcessInfo announced.
  faults = {};
  faults.checkpoint_drops_last_bo = true;
  kfd.SetFaults(faults);
  info = ops->ProcessInfo(fd->get(), kPid);
  ASSERT_TRUE(info.ok());
  const size_t fds_before = OpenFdCount();
  state = ops->Checkpoint(fd->get(), *info);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->bos.size(), info->num_bos - 1);
  EXPECT_EQ(OpenFdCount(), fds_before + 3);
  CloseDmabufs(*state);
  EXPECT_TRUE(ops->Unpause(fd->get()).ok());

  // Every op can fail, GetVersion and Resume too.
  faults = {};
  faults.fail_op = "GetVersion";
  kfd.SetFaults(faults);
  uint32_t major = 0, minor = 0;
  EXPECT_FALSE(ops->GetVersion(&major, &minor).ok());

  // An old KFD.
  kfd.SetFaults({});
  kfd.SetVersion(1, 7);
  ASSERT_TRUE(ops->GetVersion(&major, &minor).ok());
  EXPECT_EQ(minor, 7u);
  EXPECT_FALSE(CheckKfdVersion(major, minor).ok());
}

TEST(SimKfdTest, CallLogRecordsEveryCallInOrder) {
  Dumped src;
  Dump(&src);
  src.kfd.ClearCallLog();
  std::unique_ptr<KfdOps> ops = src.kfd.Ops();
  Result<UniqueFd> fd = src.kfd.OpenKfd(kPid);
  ASSERT_TRUE(fd.ok());
  EXPECT_FALSE(ops->Unpause(fd->get()).ok());  // failed calls are logged too

  KfdCheckpoint state = src.state;
  std::vector<UniqueFd> render;
  for (size_t i = 0; i < state.devices.size(); ++i) {
    render.push_back(std::move(src.kfd.OpenRenderNode(state.devices[i].actual_gpu_id)).value());
    state.devices[i].drm_fd = render.back().get();
  }
  Result<UniqueFd> restored_fd = src.kfd.OpenKfd(kRestoredPid);
  ASSERT_TRUE(restored_fd.ok());
  uint32_t major = 0, minor = 0;
  ASSERT_TRUE(ops->GetVersion(&major, &minor).ok());
  ASSERT_TRUE(ops->Restore(restored_fd->get(), &state).ok());
  CloseDmabufs(state);
  ASSERT_TRUE(ops->Resume(fd->get(), kRestoredPid).ok());
  EXPECT_FALSE(ops->Resume(fd->get(), kRestoredPid).ok());
  EXPECT_EQ(src.kfd.CallLog(), (std::vector<std::string>{"Unpause", "GetVersion", "Restore", "Resume", "Resume"}));
  // Both processes live on the one machine, with their own BOs.
  EXPECT_TRUE(src.kfd.HasProcess(kPid));
  EXPECT_EQ(src.kfd.Bos(kRestoredPid)->size(), kBoCount);
}

TEST(SimKfdTest, AddProcessValidatesBos) {
  SimKfd kfd;
  const std::vector<uint32_t> gpus = kfd.GpuIds();
  EXPECT_FALSE(kfd.AddProcess(1, {{kVa, 4096, kKfdBoVram | kKfdBoGtt, gpus[0]}}).ok());
  EXPECT_FALSE(kfd.AddProcess(1, {{kVa, 4096, kWritable, gpus[0]}}).ok());
  EXPECT_FALSE(kfd.AddProcess(1, {{kVa + 1, 4096, kKfdBoVram, gpus[0]}}).ok());
  EXPECT_FALSE(kfd.AddProcess(1, {{kVa, 0, kKfdBoVram, gpus[0]}}).ok());
  EXPECT_FALSE(kfd.AddProcess(1, {{kVa, 4096, kKfdBoVram, 0x4242}}).ok());
  EXPECT_FALSE(kfd.AddProcess(1, {{kVa, 8192, kKfdBoVram, gpus[0]}, {kVa + 4096, 4096, kKfdBoGtt, gpus[0]}}).ok());
  EXPECT_FALSE(kfd.AddProcess(1, {{kVa, 4096, kKfdBoVram, gpus[1]}}, {gpus[0]}).ok());
  EXPECT_FALSE(kfd.HasProcess(1));
  ASSERT_TRUE(kfd.AddProcess(1, {{kVa, 4096, kKfdBoVram, gpus[1]}}, {gpus[1]}).ok());
  EXPECT_EQ(kfd.AddProcess(1, {}).code(), Status::Code::kAlreadyExists);
  EXPECT_EQ(kfd.ProcessDevices(1)->size(), 1u);
  EXPECT_FALSE(kfd.BoBytes(1, 1).ok());
  ASSERT_TRUE(kfd.AddProcess(2, {{kVa, 4096, kKfdBoDoorbell, gpus[0]}}).ok());
  EXPECT_FALSE(kfd.BoBytes(2, 0).ok());  // no contents
}

}  // namespace
}  // namespace vramflow
