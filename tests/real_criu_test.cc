// SPDX-License-Identifier: MIT
// RealCriu.*: the plugin inside a real CRIU 4.2 (and the real
// criu-image-streamer), built by ../shared/criu/build.sh (scripts/test.sh
// builds it into build-criu/ when run as root).
//
// The processes are real: `sleep`s that CRIU dumps and restores. What they
// hold as /dev/kfd is a stand-in, since this machine has no AMD GPU: a
// private character device node (c 10:237, loop-control, which opening
// does nothing to) that the simulated KFD (sim/kfd/sim_kfd.h) adopts as the
// process's KFD file. CRIU hands such a file to the plugin's DUMP_EXT_FILE
// and installs what its RESTORE_EXT_FILE returns, exactly as for /dev/kfd.
// The simulated KFD runs in this test process and is served to the plugin
// inside CRIU over a UNIX socket (the test plugin's VRAMFLOW_SIM_KFD).
//
// Without root or without the built CRIU these tests skip and say why;
// VRAMFLOW_CRIU_REQUIRED=1 (CI) turns a skip into a failure.
#include "tests/support/real_criu_fixture.h"

namespace vramflow {
namespace real_criu {
namespace {

// The installed plugin itself, with no simulator in it, in a real CRIU: it
// registers its hooks, and a plain process dumps and restores with exit 0.
TEST_F(RealCriu, ProductPluginLoadsAndPlainProcessRoundTrips) {
  REQUIRE_REAL_CRIU();
  const std::string libdir = dir_.File("product");
  std::filesystem::create_directories(libdir);
  std::filesystem::copy_file(VRAMFLOW_PRODUCT_PLUGIN, libdir + "/amdgpu_plugin.so");
  const pid_t pid = StartSleeper("", dir_.File("app.log"));
  started_.push_back(pid);
  testing::CommandResult r = RunShell(CriuBinary() + " dump -D " + ShellQuote(images_) + " -v4 --libdir " +
                                      ShellQuote(libdir) + " -t " + std::to_string(pid) + " -o dump.log");
  const std::string dump_log = ReadText(images_ + "/dump.log");
  ASSERT_EQ(r.code, 0) << r.output << dump_log;
  EXPECT_NE(dump_log.find("Plugin \"amdgpu_plugin\""), std::string::npos) << dump_log;
  EXPECT_NE(dump_log.find("amdgpu_plugin (vramflow): vramflow "), std::string::npos) << dump_log;
  EXPECT_NE(dump_log.find("Dumping finished successfully"), std::string::npos);
  ASSERT_TRUE(WaitGone(pid));
  r = Restore("", libdir);
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  EXPECT_TRUE(ProcessExists(pid));
  // A dump that needed no GPU does not list the plugin in the inventory, so
  // the restore runs without it, as upstream's plugin does.
  EXPECT_NE(RestoreLog().find("dumped without amdgpu_plugin"), std::string::npos) << RestoreLog();
}

// Images on disk, 2 GPUs: dump and (parallel) restore exit 0, every byte
// back, KFD resumed. A crash at fini (oneTBB's workers outliving dlclose)
// or an fd of the plugin's in the way of CRIU's ("fd N already in use")
// fails it.
TEST_F(RealCriu, ImagesOnDiskTwoGpus) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  Dump(pid);
  const std::string dump_log = ReadText(images_ + "/dump.log");
  EXPECT_NE(dump_log.find("KFD file"), std::string::npos) << "the plugin's summary is not in CRIU's log";
  EXPECT_EQ(CountImages("amdgpu-kfd-"), 1);
  EXPECT_EQ(CountImages("amdgpu-vram-"), 2);  // one per GPU
  testing::CommandResult r = Restore();
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  Check(pid);
}

// 2 GPUs in 2 processes: a parent and its child, each with BOs on both
// GPUs, dumped and restored as one tree.
TEST_F(RealCriu, TwoGpusInTwoProcesses) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const std::string parent_node = NewKfdNode("parent"), child_node = NewKfdNode("child");
  const auto [parent, child] = StartTwoProcessTree(parent_node, child_node);
  ASSERT_GT(child, 0) << "the tree's child did not start";
  AddGpuProcess(parent, parent_node, kfd_->GpuIds(), 1);
  AddGpuProcess(child, child_node, kfd_->GpuIds(), 2);
  Dump(parent);
  ASSERT_TRUE(WaitGone(child));
  ASSERT_TRUE(kfd_->RemoveProcess(child).ok());
  EXPECT_EQ(CountImages("amdgpu-kfd-"), 2);
  EXPECT_EQ(CountImages("amdgpu-vram-"), 4);
  testing::CommandResult r = Restore();
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  Check(parent);
  Check(child);
}

// A process that uses one GPU of two (a container given one GPU): its image
// lists only that GPU, as upstream's (each GPU entry one of the process's
// KFD devices), so it restores on a machine with one GPU, under another
// gpu_id.
TEST_F(RealCriu, OneOfTwoGpusRestoresOnAOneGpuMachine) {
  REQUIRE_REAL_CRIU();
  StartKfd(2, 0x1000);
  const std::string node = NewKfdNode("app");
  const pid_t pid = StartSleeper(node, dir_.File("app.log"));
  started_.push_back(pid);
  AddGpuProcess(pid, node, {kfd_->GpuIds()[1]}, 3);
  Dump(pid);
  StartKfd(1, 0x3000);
  testing::CommandResult r = Restore();
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  Check(pid);
}

// Two processes map one BO (the child imported the parent's dma-buf):
// vramflow cannot restore the sharing, so `criu dump` fails saying so, and
// both processes run on with their queues resumed.
TEST_F(RealCriu, BoSharedBetweenTwoProcessesRefusesTheDump) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const std::string parent_node = NewKfdNode("parent"), child_node = NewKfdNode("child");
  const auto [parent, child] = StartTwoProcessTree(parent_node, child_node);
  ASSERT_GT(child, 0) << "the tree's child did not start";
  AddGpuProcess(parent, parent_node, {kfd_->GpuIds()[0]}, 1);
  AddGpuProcess(child, child_node, {kfd_->GpuIds()[0]}, 2);
  ASSERT_TRUE(kfd_->ShareBo(parent, 0, child, 0x7e0000000000ull).ok());
  testing::CommandResult r = RunShell(Criu("dump", TestPluginDir()) + " -t " + std::to_string(parent) + " -o dump.log");
  const std::string log = ReadText(images_ + "/dump.log");
  EXPECT_NE(r.code, 0) << log;
  EXPECT_NE(log.find("shared through a dma-buf"), std::string::npos)
      << log.substr(log.size() > 6000 ? log.size() - 6000 : 0);
  EXPECT_TRUE(ProcessExists(parent));
  EXPECT_TRUE(ProcessExists(child));
  EXPECT_EQ(kfd_->ProcessState(parent).value(), SimKfdProcessState::kRunning);
  EXPECT_EQ(kfd_->ProcessState(child).value(), SimKfdProcessState::kRunning);
}

// Restore on another machine whose GPUs have other gpu_ids: the process
// keeps the ids it knows, its BOs land on the new GPUs, every byte back.
TEST_F(RealCriu, RestoreOntoDifferentGpuIds) {
  REQUIRE_REAL_CRIU();
  StartKfd(2, 0x1000);
  const pid_t pid = StartGpuProcess();
  Dump(pid);
  StartKfd(2, 0x2000);
  testing::CommandResult r = Restore();
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  Check(pid);
  const std::vector<SimKfdBoInfo> bos = kfd_->Bos(pid).value();
  for (const SimKfdBoInfo& bo : bos) {
    EXPECT_GE(bo.gpu_id, 0x2000u) << "a BO is on a GPU of the old machine";
    EXPECT_LT(bo.user_gpu_id, 0x2000u) << "the process no longer knows its GPU by the id it had";
  }
}

// Restore in the task (no parallel worker): the pipeline's threads run in
// the restored task and must be gone before CRIU's restorer replaces its
// memory.
TEST_F(RealCriu, InTaskRestore) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  Dump(pid);
  testing::CommandResult r = Restore("VRAMFLOW_PARALLEL_RESTORE=0 VRAMFLOW_THREADS=2");
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  Check(pid);
}

// Dump, restore, dump the restored tree, restore again: fds and threads
// the first restore left behind would show here.
TEST_F(RealCriu, DumpRestoreDumpRestore) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  for (int round = 0; round < 2; ++round) {
    Dump(pid);
    testing::CommandResult r = Restore();
    ASSERT_EQ(r.code, 0) << "round " << round << ": " << r.output << RestoreLog();
    Check(pid);
    if (round == 0) {
      // Start over in a fresh images directory.
      std::filesystem::remove_all(images_);
      std::filesystem::create_directories(images_);
    }
  }
}

// A corrupt VRAM stream makes `criu restore` fail, and the task is not
// left running.
TEST_F(RealCriu, CorruptStreamFailsRestore) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  Dump(pid);
  CorruptAVramStream();
  testing::CommandResult r = Restore("VRAMFLOW_PARALLEL_RESTORE=0");
  EXPECT_NE(r.code, 0) << RestoreLog();
  EXPECT_NE(RestoreLog().find("amdgpu_plugin (vramflow): RESTORE_EXT_FILE"), std::string::npos) << RestoreLog();
  EXPECT_TRUE(WaitGone(pid, std::chrono::seconds(5))) << "the task of a failed restore is running";
}

// The same, with parallel restore: CRIU ignores RESUME_DEVICES_LATE's
// result, so POST_FORKING waits for every KFD file and fails the restore.
TEST_F(RealCriu, CorruptStreamFailsParallelRestore) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  Dump(pid);
  ASSERT_TRUE(std::filesystem::exists(images_ + "/amdgpu-vramflow-kfd-files.img"));
  CorruptAVramStream();
  testing::CommandResult r = Restore();
  EXPECT_NE(r.code, 0) << RestoreLog();
  EXPECT_NE(RestoreLog().find("amdgpu_plugin (vramflow): POST_FORKING: "), std::string::npos) << RestoreLog();
  EXPECT_TRUE(WaitGone(pid, std::chrono::seconds(5))) << "the task of a failed restore is running";
}

// A VRAM stream that is missing altogether: the same.
TEST_F(RealCriu, MissingStreamFailsParallelRestore) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  Dump(pid);
  for (const auto& e : std::filesystem::directory_iterator(images_))
    if (e.path().filename().string().rfind("amdgpu-vram-", 0) == 0) {
      std::filesystem::remove(e.path());
      break;
    }
  testing::CommandResult r = Restore();
  EXPECT_NE(r.code, 0) << RestoreLog();
  EXPECT_NE(RestoreLog().find("POST_FORKING"), std::string::npos) << RestoreLog();
  EXPECT_TRUE(WaitGone(pid, std::chrono::seconds(5))) << "the task of a failed restore is running";
}

// Images without the dump's KFD file list (another plugin's): the main
// process cannot know what to wait for, so each task fills its own BOs.
TEST_F(RealCriu, WithoutTheKfdFileListTasksRestoreTheirOwnBos) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  Dump(pid);
  ASSERT_TRUE(std::filesystem::remove(images_ + "/amdgpu-vramflow-kfd-files.img"));
  testing::CommandResult r = Restore();
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  EXPECT_NE(RestoreLog().find("restoring BO contents in each task"), std::string::npos) << RestoreLog();
  Check(pid);
}

// Images dumped with the plugin name it in CRIU's inventory: without the
// plugin, CRIU refuses the restore saying so.
TEST_F(RealCriu, InventoryNamesThePlugin) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  Dump(pid);
  const std::string empty = dir_.File("no-plugins");
  std::filesystem::create_directories(empty);
  testing::CommandResult r = Restore("", empty);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(RestoreLog().find("Missing required plugin: amdgpu_plugin"), std::string::npos) << RestoreLog();
}

// CRIU --stream through the real criu-image-streamer, 2 GPUs in one
// process: every image, VRAM streams included, goes through the streamer's
// pipes (its serve pushes a whole file before the next request).
TEST_F(RealCriu, StreamThroughRealImageStreamer) {
  REQUIRE_REAL_CRIU(true);
  StartKfd();
  const pid_t pid = StartGpuProcess();
  const std::string image = dir_.File("checkpoint.img");
  const std::string wait_for =
      "for i in $(seq 500); do [ -S " + ShellQuote(images_) + "/$0 ] && exit 0; sleep 0.02; done; exit 1";
  // capture: the shard must be a pipe.
  testing::CommandResult r = RunShell(
      "(" + StreamerBinary() + " -D " + ShellQuote(images_) + " capture | cat > " + ShellQuote(image) + ") & cap=$!; " +
      "sh -c " + ShellQuote(wait_for) + " streamer-capture.sock || exit 99; " + Criu("dump", TestPluginDir()) +
      " --stream -t " + std::to_string(pid) + " -o dump.log; rc=$?; wait $cap; exit $rc");
  ASSERT_EQ(r.code, 0) << r.output << ReadText(images_ + "/dump.log");
  ASSERT_TRUE(WaitGone(pid));
  ASSERT_TRUE(kfd_->RemoveProcess(pid).ok());
  for (const auto& e : std::filesystem::directory_iterator(images_))
    EXPECT_EQ(e.path().filename().string().rfind("amdgpu-", 0), std::string::npos) << "image on disk: " << e.path();
  r = RunShell("(cat " + ShellQuote(image) + " | " + StreamerBinary() + " -D " + ShellQuote(images_) +
               " serve) & srv=$!; " + "sh -c " + ShellQuote(wait_for) + " streamer-serve.sock || exit 99; " +
               Criu("restore", TestPluginDir()) + " --stream -d -o restore.log; rc=$?; wait $srv; exit $rc");
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  Check(pid);
}

}  // namespace
}  // namespace real_criu
}  // namespace vramflow
