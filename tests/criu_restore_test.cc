// SPDX-License-Identifier: MIT
// The plugin's dump and restore code without the hooks: against a simulated
// KFD served in this process, with this process as the restored task.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "datagen/model_data.h"
#include "plugin/criu_dump.h"
#include "plugin/criu_restore.h"
#include "plugin/kfd_image.h"
#include "sim/kfd/sim_kfd.h"
#include "sim/kfd/sim_kfd_service.h"
#include "tests/support/plugin_machine.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

constexpr pid_t kCheckpointed = 4170001;

using Machine = PluginMachine;

// One process with a VRAM and a GTT BO on each GPU, filled.
void AddProcess(SimKfd& kfd, pid_t pid) {
  std::vector<SimKfdBoSpec> bos;
  uint64_t va = 0x100000000ull;
  for (uint32_t gpu : kfd.GpuIds()) {
    bos.push_back({va, 3 << 20, kKfdBoVram, gpu});
    bos.push_back({va + (4 << 20), 5 * 4096, kKfdBoGtt, gpu});
    bos.push_back({va + (5 << 20), 4096, kKfdBoDoorbell, gpu});
    va += 64 << 20;
  }
  ASSERT_TRUE(kfd.AddProcess(pid, bos).ok());
  for (size_t i = 0; i < bos.size(); ++i)
    if (KfdBoHasContents(bos[i].alloc_flags))
      GenerateModelData(DataKind::kBf16Weights, i, 0, kfd.BoBytes(pid, i).value());
}

TEST(CriuRestore, FallsBackToTheTaskWhenTheMainProcessIsUnreachable) {
  Machine m;
  AddProcess(m.kfd, kCheckpointed);
  UniqueFd kfd_file = m.kfd.OpenKfd(kCheckpointed).value();
  Result<KfdDumpResult> dumped = DumpKfdFile(m.ctx, kfd_file.get(), 7, /*unpause_now=*/true);
  ASSERT_TRUE(dumped.ok()) << dumped.status().ToString();
  EXPECT_EQ(m.kfd.ProcessState(kCheckpointed).value(), SimKfdProcessState::kRunning);

  // This process is the restored task; no parallel-restore server exists.
  TaskRestoreState task;
  Result<RestoreFileResult> restored = RestoreFile(m.ctx, 7, &task, "vramflow-nobody-listens-here");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  ASSERT_EQ(restored->outcome, RestoreFileResult::Outcome::kRestored);
  EXPECT_TRUE(restored->fd.valid());
  const pid_t self = ::getpid();
  std::vector<SimKfdBoInfo> before = m.kfd.Bos(kCheckpointed).value(), after = m.kfd.Bos(self).value();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    if (!KfdBoHasContents(before[i].alloc_flags)) continue;
    std::span<uint8_t> a = m.kfd.BoBytes(kCheckpointed, i).value(), b = m.kfd.BoBytes(self, i).value();
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << "BO " << i;
  }

  // UPDATE_VMA_MAP: every device mapping moves to KFD's new offset; render
  // node mappings get an fd, KFD's own (doorbells) none.
  for (size_t i = 0; i < before.size(); ++i) {
    const bool render = KfdBoHasContents(before[i].alloc_flags);
    Result<std::optional<VmaUpdate>> u =
        UpdateVma(task, render ? "/dev/dri/renderD128" : "/dev/kfd", before[i].addr, before[i].offset);
    ASSERT_TRUE(u.ok() && u->has_value()) << i;
    EXPECT_EQ((*u)->new_offset, after[i].offset) << i;
    EXPECT_EQ((*u)->fd >= 0, render) << i;
    if ((*u)->fd >= 0) ::close((*u)->fd);
  }
  EXPECT_FALSE(UpdateVma(task, "/dev/kfd", 0x1234000, 0).value().has_value());  // not ours

  // RESUME_DEVICES_LATE: ours resumes, anyone else's is not ours.
  EXPECT_TRUE(ResumeProcess(m.ctx, self).value());
  EXPECT_EQ(m.kfd.ProcessState(self).value(), SimKfdProcessState::kRunning);
  EXPECT_FALSE(ResumeProcess(m.ctx, 4170999).value());
}

// The ROCm runtime's /dev/shm files come back on a host (or in a container)
// whose /dev/shm lacks them: the shared memory with its size and first word,
// and the semaphore beside it, as upstream creates it (value 1). CRIU
// restores the task's mappings of both, so a missing one fails the restore.
TEST(CriuRestore, RecreatesTheRocmRuntimesSharedMemoryAndSemaphore) {
  static constexpr char kShm[] = "/dev/shm/hsakmt_shared_mem";
  static constexpr char kSem[] = "/dev/shm/sem.hsakmt_semaphore";
  if (std::string why = testing::UsePrivateDevShm(); !why.empty()) GTEST_SKIP() << "no /dev/shm of its own: " << why;
  if (::access(kShm, F_OK) == 0 || ::access(kSem, F_OK) == 0)
    GTEST_SKIP() << "this host's ROCm runtime owns " << kShm << " or " << kSem;
  struct Cleanup {
    ~Cleanup() {
      ::unlink(kShm);
      ::sem_unlink("/hsakmt_semaphore");
    }
  } cleanup;
  {
    UniqueFd shm(::open(kShm, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    ASSERT_TRUE(shm.valid()) << std::strerror(errno);
    ASSERT_EQ(::ftruncate(shm.get(), 8192), 0);
    const uint8_t magic[4] = {0x78, 0x56, 0x34, 0x12};
    ASSERT_EQ(::pwrite(shm.get(), magic, 4, 0), 4);
  }
  Machine m;
  AddProcess(m.kfd, kCheckpointed);
  UniqueFd kfd_file = m.kfd.OpenKfd(kCheckpointed).value();
  ASSERT_TRUE(DumpKfdFile(m.ctx, kfd_file.get(), 7, /*unpause_now=*/true).ok());
  ASSERT_EQ(::unlink(kShm), 0);  // a fresh /dev/shm

  TaskRestoreState task;
  Result<RestoreFileResult> restored = RestoreFile(m.ctx, 7, &task, "");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  struct stat st;
  ASSERT_EQ(::stat(kShm, &st), 0) << kShm << " was not recreated";
  EXPECT_EQ(st.st_size, 8192);
  UniqueFd shm(::open(kShm, O_RDONLY | O_CLOEXEC));
  uint8_t magic[4] = {};
  ASSERT_EQ(::pread(shm.get(), magic, 4, 0), 4);
  EXPECT_EQ(magic[0], 0x78);
  EXPECT_EQ(magic[3], 0x12);
  sem_t* sem = ::sem_open("/hsakmt_semaphore", 0);
  ASSERT_NE(sem, SEM_FAILED) << kSem << " was not created";
  int value = -1;
  EXPECT_EQ(::sem_getvalue(sem, &value), 0);
  EXPECT_EQ(value, 1);
  ::sem_close(sem);
}

// CRIU's find_unused_fd_pid as a restore that has the checkpointed process
// among its tasks answers it, and as one that does not (-1, "Invalid pid").
int KnowsEveryPid(int) { return 100; }
int KnowsNoOtherPid(int pid) { return pid == ::getpid() ? 100 : -1; }

// A KFD image of another task of the restore (a shared /dev/kfd CRIU
// restores in its holder with the lowest pid) is refused before KFD's
// RESTORE, naming both processes; a pid that is no task of the restore
// (outside CRIU, or a harness that restores under new pids) is not checked.
TEST(CriuRestore, AKfdImageOfAnotherTaskOfTheRestoreIsRefused) {
  Machine m;
  const pid_t other = ::getppid();  // a running process: CRIU's tasks all exist when files are restored
  AddProcess(m.kfd, other);
  UniqueFd kfd_file = m.kfd.OpenKfd(other).value();
  ASSERT_TRUE(DumpKfdFile(m.ctx, kfd_file.get(), 7, /*unpause_now=*/true).ok());
  m.ctx.find_unused_fd_pid = KnowsEveryPid;
  TaskRestoreState task;
  Result<RestoreFileResult> refused = RestoreFile(m.ctx, 7, &task, "");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(
      refused.status().message().find("is process " + std::to_string(other) +
                                      "'s KFD file, but CRIU restores it in process " + std::to_string(::getpid())),
      std::string::npos)
      << refused.status().ToString();
  EXPECT_FALSE(m.kfd.HasProcess(::getpid())) << "KFD's RESTORE ran in the wrong process";

  m.ctx.find_unused_fd_pid = KnowsNoOtherPid;
  Result<RestoreFileResult> restored = RestoreFile(m.ctx, 7, &task, "");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_TRUE(m.kfd.HasProcess(::getpid()));
}

// A pid that no process has is not asked about (CRIU would log "Invalid
// pid"): every task of a restore exists when its files are restored.
TEST(CriuRestore, AKfdImageOfAPidNoProcessHasIsRestoredHere) {
  Machine m;
  AddProcess(m.kfd, kCheckpointed);
  UniqueFd kfd_file = m.kfd.OpenKfd(kCheckpointed).value();
  ASSERT_TRUE(DumpKfdFile(m.ctx, kfd_file.get(), 7, /*unpause_now=*/true).ok());
  m.ctx.find_unused_fd_pid = KnowsEveryPid;
  TaskRestoreState task;
  Result<RestoreFileResult> restored = RestoreFile(m.ctx, 7, &task, "");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_TRUE(m.kfd.HasProcess(::getpid()));
}

TEST(CriuRestore, RenderNodesWaitForTheirTasksKfdFileAndFilesNotOursAreNotOurs) {
  Machine m;
  AddProcess(m.kfd, kCheckpointed);
  UniqueFd render = m.kfd.OpenRenderNode(m.kfd.GpuIds()[1]).value();
  ASSERT_TRUE(DumpRenderNodeFile(m.ctx, render.get(), 9, m.kfd.GpuIds()[1], {}).ok());
  TaskRestoreState task;
  Result<RestoreFileResult> early = RestoreFile(m.ctx, 9, &task, "");
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  EXPECT_EQ(early->outcome, RestoreFileResult::Outcome::kRetry);
  Result<RestoreFileResult> none = RestoreFile(m.ctx, 12345, &task, "");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->outcome, RestoreFileResult::Outcome::kNotOurs);

  UniqueFd kfd_file = m.kfd.OpenKfd(kCheckpointed).value();
  ASSERT_TRUE(DumpKfdFile(m.ctx, kfd_file.get(), 8, true).ok());
  ASSERT_TRUE(RestoreFile(m.ctx, 8, &task, "").ok());
  Result<RestoreFileResult> later = RestoreFile(m.ctx, 9, &task, "");
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  ASSERT_EQ(later->outcome, RestoreFileResult::Outcome::kRestored);
  EXPECT_EQ(m.kfd.RenderNodeGpu(later->fd.get()).value(), m.kfd.GpuIds()[1]);
}

TEST(CriuRestore, AFailedDumpLeavesTheProcessRunningAndNoMetadataImage) {
  Machine m;
  AddProcess(m.kfd, kCheckpointed);
  UniqueFd kfd_file = m.kfd.OpenKfd(kCheckpointed).value();
  SimKfdFaults faults;
  faults.checkpoint_drops_last_bo = true;  // KFD lost a BO between PROCESS_INFO and CHECKPOINT
  m.kfd.SetFaults(faults);
  Result<KfdDumpResult> dumped = DumpKfdFile(m.ctx, kfd_file.get(), 7, true);
  EXPECT_FALSE(dumped.ok());
  m.kfd.SetFaults({});
  EXPECT_EQ(m.kfd.ProcessState(kCheckpointed).value(), SimKfdProcessState::kRunning);
  EXPECT_EQ(*m.images->Open(KfdImageName(7)), nullptr);
}

}  // namespace
}  // namespace vramflow
