// SPDX-License-Identifier: MIT
// Which outputs the vramflow commands make durable (issue 18, defect 14):
// `--fsync` is on by default where a sender is told the data is safe (recv,
// unpack from the network), off elsewhere, and `--no-fsync` turns it off.
// The binary runs with an LD_PRELOAD library (fsync_log_preload.cc) that
// logs the path of every descriptor it fsyncs. Every command runs under
// `timeout`, so no test can hang.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/shell.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using ::vramflow::testing::CommandResult;
using ::vramflow::testing::RunShell;
using ::vramflow::testing::ShellQuote;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::VramflowBinary;

// The paths a command fsynced, one per call, in order.
std::vector<std::string> Synced(const std::string& log) {
  std::vector<std::string> lines;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool SyncedPath(const std::vector<std::string>& synced, const std::string& path) {
  for (const std::string& s : synced)
    if (s == path) return true;
  return false;
}

// Files synced whose name ends in `suffix` (staged or temporary names differ).
bool SyncedFileEndingIn(const std::vector<std::string>& synced, const std::string& suffix) {
  for (const std::string& s : synced)
    if (s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
  return false;
}

bool SyncedPathStartingWith(const std::vector<std::string>& synced, const std::string& prefix) {
  for (const std::string& s : synced)
    if (s.rfind(prefix, 0) == 0) return true;
  return false;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

class FsyncCli : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "an LD_PRELOAD library cannot come before the sanitizer runtime";
#endif
    const std::string bin = ShellQuote(VramflowBinary());
    CommandResult made = RunShell(bin + " gen -k bf16 -s 1M -o " + ShellQuote(dir_.File("a.bin")) + " && " + bin +
                                  " gen -k fp32 -s 1M --seed 2 -o " + ShellQuote(dir_.File("b.bin")) + " && " + bin +
                                  " pack -q " + ShellQuote(dir_.File("a.bin")) + " " + ShellQuote(dir_.File("b.bin")) +
                                  " -o " + ShellQuote(dir_.File("s.vfs")));
    ASSERT_EQ(made.code, 0) << made.output;
  }

  // `listener` (a vramflow command line listening on unix:SOCK, with the
  // fsync log) takes the stream s.vfs from `sender` ("send" or "pack");
  // both must succeed. Returns what the listener synced.
  std::vector<std::string> Receive(const std::string& listener_args, const std::string& sender) {
    const std::string bin = ShellQuote(VramflowBinary()), sock = ShellQuote(dir_.File("sock"));
    const std::string log = dir_.File("fsync.log");
    ::unlink(log.c_str());
    const std::string send =
        sender == "pack"
            ? "pack -q " + ShellQuote(dir_.File("a.bin")) + " " + ShellQuote(dir_.File("b.bin")) + " --to unix:" + sock
            : "send -q --name s.img " + ShellQuote(dir_.File("s.vfs")) + " unix:" + sock;
    CommandResult r =
        RunShell("VRAMFLOW_FSYNC_LOG=" + ShellQuote(log) + " LD_PRELOAD=" + ShellQuote(VRAMFLOW_FSYNC_LOG_PRELOAD) +
                 " timeout 30 " + bin + " " + listener_args +
                 " --accept-timeout 20 -q & listener=$!; "
                 "for i in $(seq 200); do [ -S " +
                 sock +
                 " ] && break; sleep 0.05; done; "
                 "timeout 30 " +
                 bin + " " + send + " || exit 10; wait $listener || exit 11");
    EXPECT_EQ(r.code, 0) << r.output;
    return Synced(log);
  }

  // Runs a local command with the fsync log; returns what it synced.
  std::vector<std::string> Run(const std::string& args) {
    const std::string log = dir_.File("fsync.log");
    ::unlink(log.c_str());
    CommandResult r =
        RunShell("VRAMFLOW_FSYNC_LOG=" + ShellQuote(log) + " LD_PRELOAD=" + ShellQuote(VRAMFLOW_FSYNC_LOG_PRELOAD) +
                 " timeout 30 " + ShellQuote(VramflowBinary()) + " " + args);
    EXPECT_EQ(r.code, 0) << r.output;
    return Synced(log);
  }

  TempDir dir_;
};

// unpack tcp:// or unix: tells its sender DONE: by default every file and
// the directory it was moved into are synced before that.
TEST_F(FsyncCli, UnpackFromTheNetworkSyncsFilesAndDirectoriesByDefault) {
  const std::string out = dir_.File("out");
  std::vector<std::string> synced =
      Receive("unpack --listen unix:" + ShellQuote(dir_.File("sock")) + " -o " + ShellQuote(out + "/"), "pack");
  EXPECT_TRUE(SyncedFileEndingIn(synced, "/a.bin")) << Join(synced);
  EXPECT_TRUE(SyncedFileEndingIn(synced, "/b.bin")) << Join(synced);
  EXPECT_TRUE(SyncedPath(synced, out)) << Join(synced);
  EXPECT_TRUE(SyncedPath(synced, dir_.path())) << "the new directory's own entry: " << Join(synced);

  synced = Receive(
      "unpack --no-fsync -f --listen unix:" + ShellQuote(dir_.File("sock")) + " -o " + ShellQuote(out + "/"), "pack");
  EXPECT_TRUE(synced.empty()) << Join(synced);
}

// unpack from a file tells nobody: syncing is asked for with --fsync.
TEST_F(FsyncCli, UnpackFromAFileSyncsOnlyWithFsync) {
  std::vector<std::string> synced =
      Run("unpack -q " + ShellQuote(dir_.File("s.vfs")) + " -o " + ShellQuote(dir_.File("plain/")));
  EXPECT_TRUE(synced.empty()) << Join(synced);
  synced = Run("unpack -q --fsync " + ShellQuote(dir_.File("s.vfs")) + " -o " + ShellQuote(dir_.File("synced/")));
  EXPECT_TRUE(SyncedFileEndingIn(synced, "/a.bin")) << Join(synced);
  EXPECT_TRUE(SyncedFileEndingIn(synced, "/b.bin")) << Join(synced);
  EXPECT_TRUE(SyncedPath(synced, dir_.File("synced"))) << Join(synced);
}

// recv (one stream, or streams into a directory) syncs the stored stream and
// its directory before it tells the sender DONE, unless --no-fsync.
TEST_F(FsyncCli, RecvSyncsTheStoredStreamByDefault) {
  const std::string sock = ShellQuote(dir_.File("sock"));
  std::vector<std::string> synced =
      Receive("recv --listen unix:" + sock + " -o " + ShellQuote(dir_.File("r.vfs")), "send");
  EXPECT_TRUE(SyncedPathStartingWith(synced, dir_.File("r.vfs.vf-tmp-")))
      << "the file, before its rename: " << Join(synced);
  EXPECT_TRUE(SyncedPath(synced, dir_.path())) << Join(synced);
  ASSERT_EQ(::mkdir(dir_.File("d").c_str(), 0755), 0);
  synced = Receive("recv --listen unix:" + sock + " -d " + ShellQuote(dir_.File("d")) + " --count 1", "send");
  EXPECT_TRUE(SyncedPath(synced, dir_.File("d"))) << Join(synced);
  EXPECT_EQ(synced.size(), 2u) << "the file and its directory: " << Join(synced);
  synced = Receive("recv --no-fsync --listen unix:" + sock + " -o " + ShellQuote(dir_.File("r2.vfs")), "send");
  EXPECT_TRUE(synced.empty()) << Join(synced);
}

}  // namespace
}  // namespace vramflow
