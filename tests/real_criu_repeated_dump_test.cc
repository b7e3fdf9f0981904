// SPDX-License-Identifier: MIT
// RealCriu.* for checkpoints taken again and again (issue 49, defects 1 and
// 2): a second `criu dump` into the same images directory, the same
// VRAMFLOW_TARGET directory or the same `vramflow recv --output-dir`
// replaces the first one's images and streams (and a dump without GPU
// files removes them); and a VRAM stream of another
// dump put beside a dump's metadata images is refused at restore, parallel
// and in the task, naming both dumps' ids.
//
// The test bed (root, the built CRIU, the simulated KFD) is described in
// real_criu_test.cc and real_criu_fixture.h.
#include <chrono>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "tests/support/real_criu_fixture.h"

namespace vramflow {
namespace real_criu {
namespace {

// The dump id the dump's KFD file list records ("dump-id <hex>"), or "".
std::string ListedDumpId(const std::string& images) {
  std::smatch m;
  const std::string text = ReadText(images + "/amdgpu-vramflow-kfd-files.img");
  return std::regex_search(text, m, std::regex("\ndump-id ([0-9a-f]+)\n")) ? std::string(m[1]) : "";
}

// The names in `dir` that start with "amdgpu-vram-".
std::set<std::string> VramStreams(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("amdgpu-vram-", 0) == 0) out.insert(e.path().filename().string());
  return out;
}

// The names in `dir` of the temporary files a writer left there.
std::set<std::string> TemporaryFiles(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".vf-tmp-") != std::string::npos) out.insert(e.path().filename().string());
  return out;
}

class RealCriuRepeated : public RealCriu {
 protected:
  // `criu dump --leave-running` of `pid`: the process and its KFD state stay.
  void DumpLeavingRunning(pid_t pid, const std::string& env = "") {
    testing::CommandResult r =
        RunShell(Criu("dump", TestPluginDir(), env) + " -t " + std::to_string(pid) + " --leave-running -o dump.log");
    ASSERT_EQ(r.code, 0) << r.output << "\n--- dump.log (tail)\n" << LogTail(images_ + "/dump.log");
    ASSERT_TRUE(ProcessExists(pid));
  }
  // New contents in every BO of `pid` (what the application computed since).
  void RefillBos(pid_t pid, uint64_t seed) {
    std::vector<std::vector<uint8_t>>& contents = contents_.at(pid);
    for (size_t i = 0; i < contents.size(); ++i) {
      auto bytes = kfd_->BoBytes(pid, i);
      ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
      contents[i] = testing::ModelBytes(DataKind::kFp32Weights, bytes->size(), seed * 1000 + i);
      std::copy(contents[i].begin(), contents[i].end(), bytes->begin());
    }
  }
  // Ends `pid` as a dump without --leave-running would, KFD state included.
  void Kill(pid_t pid) {
    ::kill(pid, SIGKILL);
    ASSERT_TRUE(WaitGone(pid));
    if (kfd_->HasProcess(pid)) {
      ASSERT_TRUE(kfd_->RemoveProcess(pid).ok());
    }
  }
  // Dumps `pid` twice into the same places, the BOs changed in between,
  // and restores: the second dump's contents must come back.
  void DumpTwiceAndRestore(pid_t pid, const std::string& env) {
    DumpLeavingRunning(pid, env);
    RefillBos(pid, 7);
    DumpLeavingRunning(pid, env);
    Kill(pid);
    testing::CommandResult r = Restore(env);
    ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
    Check(pid);
  }
};

// Defect 1: periodic checkpoints into one images directory (CRIU replaces
// its own images there). The second dump replaces the plugin's metadata
// images and VRAM streams, leaves no temporary file, and the restore brings
// back the second dump's VRAM.
TEST_F(RealCriuRepeated, SecondDumpIntoTheSameImagesDirectoryReplacesTheImages) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  DumpTwiceAndRestore(pid, "");
  EXPECT_EQ(VramStreams(images_).size(), 2u);
  EXPECT_TRUE(TemporaryFiles(images_).empty());
}

// The same with VRAMFLOW_TARGET a directory: the streams there are replaced.
TEST_F(RealCriuRepeated, SecondDumpIntoTheSameTargetDirectoryReplacesTheStreams) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  const std::string target = dir_.File("vram");
  std::filesystem::create_directories(target);
  DumpTwiceAndRestore(pid, "VRAMFLOW_TARGET=" + ShellQuote(target));
  EXPECT_EQ(VramStreams(target).size(), 2u);
  EXPECT_TRUE(VramStreams(images_).empty());
  EXPECT_TRUE(TemporaryFiles(target).empty());
}

// The same with VRAMFLOW_TARGET=unix:SOCKET of a `vramflow recv
// --output-dir` started without --force: the plugin's streams of the second
// dump replace those of the first (names of the plugin's form only; see
// docs/CLI.md, recv), and they carry the dump's id.
TEST_F(RealCriuRepeated, SecondDumpToTheSameReceiverReplacesTheStreams) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  const std::string received = dir_.File("received"), socket = dir_.File("recv.sock");
  std::filesystem::create_directories(received);
  testing::CommandResult started =
      RunShell("(" + Vramflow() + " recv --listen unix:" + ShellQuote(socket) + " --output-dir " +
               ShellQuote(received) + " --count 4 --accept-timeout 60; echo $? > " + ShellQuote(dir_.File("recv.rc")) +
               ") > " + ShellQuote(dir_.File("recv.log")) + " 2>&1 < /dev/null &");
  ASSERT_EQ(started.code, 0) << started.output;
  for (int i = 0; i < 500 && !std::filesystem::exists(socket); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(std::filesystem::exists(socket)) << ReadText(dir_.File("recv.log"));

  const std::string env = "VRAMFLOW_TARGET=unix:" + ShellQuote(socket);
  DumpLeavingRunning(pid, env);
  RefillBos(pid, 7);
  DumpLeavingRunning(pid, env);
  for (int i = 0; i < 500 && !std::filesystem::exists(dir_.File("recv.rc")); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ReadText(dir_.File("recv.rc")), "0\n") << ReadText(dir_.File("recv.log"));
  EXPECT_EQ(VramStreams(received).size(), 2u) << ReadText(dir_.File("recv.log"));
  EXPECT_TRUE(TemporaryFiles(received).empty());
  // Every stream names the dump it belongs to.
  const std::string id = ListedDumpId(images_);
  ASSERT_EQ(id.size(), 32u) << ReadText(images_ + "/amdgpu-vramflow-kfd-files.img");
  for (const std::string& name : VramStreams(received)) {
    testing::CommandResult inspected = RunShell(Vramflow() + " inspect " + ShellQuote(received + "/" + name));
    EXPECT_NE(inspected.output.find("dump-id = " + id), std::string::npos) << inspected.output;
  }
  Kill(pid);
  testing::CommandResult r = Restore("VRAMFLOW_TARGET=" + ShellQuote(received));
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  Check(pid);
}

// A later dump with no GPU file into the directory of a GPU dump (the
// application closed /dev/kfd, or another process is checkpointed there):
// the earlier dump's images go, its KFD file list with them, so the restore
// neither waits for KFD files CRIU never restores nor finds stale images.
TEST_F(RealCriuRepeated, DumpWithoutGpuFilesRemovesAnEarlierDumpsImages) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  Dump(StartGpuProcess());
  ASSERT_GT(CountImages("amdgpu-"), 0);
  const pid_t plain = StartSleeper("", dir_.File("plain.log"));
  started_.push_back(plain);
  Dump(plain);
  EXPECT_EQ(CountImages("amdgpu-"), 0) << "an earlier dump's images stayed";
  // Bounded: with the earlier list left, the restore waited for its KFD files.
  testing::CommandResult r = RunShell("timeout 60 " + Criu("restore", TestPluginDir()) + " -d -o restore.log");
  ASSERT_EQ(r.code, 0) << r.output << LogTail(images_ + "/restore.log");
  EXPECT_TRUE(ProcessExists(plain));
}

// Defect 2: the VRAM streams of an earlier dump of the same process (same
// names, same BO sizes) put beside a later dump's metadata images. Both
// restores, parallel and in the task, fail naming both dumps' ids, and no
// task is left running with the old VRAM.
TEST_F(RealCriuRepeated, VramStreamOfAnotherDumpIsRefused) {
  REQUIRE_REAL_CRIU();
  StartKfd();
  const pid_t pid = StartGpuProcess();
  DumpLeavingRunning(pid);
  const std::string first = dir_.File("first");
  std::filesystem::rename(images_, first);
  std::filesystem::create_directories(images_);
  RefillBos(pid, 7);
  Dump(pid);
  ASSERT_EQ(VramStreams(first), VramStreams(images_)) << "the two dumps named their streams differently";
  for (const std::string& name : VramStreams(first))
    std::filesystem::copy_file(first + "/" + name, images_ + "/" + name,
                               std::filesystem::copy_options::overwrite_existing);
  const std::string old_id = ListedDumpId(first), new_id = ListedDumpId(images_);
  EXPECT_EQ(old_id.size(), 32u);
  EXPECT_EQ(new_id.size(), 32u);
  EXPECT_NE(old_id, new_id);
  for (const char* parallel : {"1", "0"}) {
    SCOPED_TRACE(std::string("VRAMFLOW_PARALLEL_RESTORE=") + parallel);
    testing::CommandResult r = Restore(std::string("VRAMFLOW_PARALLEL_RESTORE=") + parallel);
    EXPECT_NE(r.code, 0) << "the stale VRAM was restored: " << LogTail(images_ + "/restore.log", 600);
    EXPECT_TRUE(r.code == 0 || WaitGone(pid, std::chrono::seconds(5))) << "the task of a failed restore is running";
    Kill(pid);  // and its KFD state, which KFD's RESTORE made before the contents were refused
    if (old_id.empty() || new_id.empty()) continue;
    const std::string log = RestoreLog();
    EXPECT_NE(log.find("of dump " + old_id + ", but the images are of dump " + new_id), std::string::npos)
        << LogTail(images_ + "/restore.log");
  }
}

}  // namespace
}  // namespace real_criu
}  // namespace vramflow
