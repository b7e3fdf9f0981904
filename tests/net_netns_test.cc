// SPDX-License-Identifier: MIT
// Transfers between two network namespaces joined by a veth pair: a real
// link that can be slowed down (tc tbf) and cut (link down), which loopback
// cannot do. Needs root and `ip netns`; skipped with the reason otherwise.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/netns_pair.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using testing::RunCommand;
using testing::TempDir;
using testing::VramflowBinary;

using testing::NamespacePair;
using testing::Sh;

std::string MakeStream(const TempDir& dir, const std::string& size) {
  std::string bin = VramflowBinary();
  std::string in = dir.File("in.bin"), stream = dir.File("stream.vfs");
  EXPECT_EQ(Sh(bin + " gen -k random -s " + size + " -o " + in), 0);
  EXPECT_EQ(Sh(bin + " pack -q --codec raw " + in + " -o " + stream), 0);
  return stream;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Starts `command` in the background; its output and exit status land in
// files under `dir` named after `name`.
void Background(const TempDir& dir, const std::string& name, const std::string& command) {
  // The subshell must not hold RunCommand's pipe, or RunCommand waits for it.
  Sh("(" + command + " > " + dir.File(name + ".log") + " 2>&1; echo $? > " + dir.File(name + ".rc") +
     ") > /dev/null 2>&1 &");
}

// Waits up to `seconds` for the background command `name` to exit; returns
// its exit status, or -1 if it is still running.
int WaitFor(const TempDir& dir, const std::string& name, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream rc(dir.File(name + ".rc"));
    int status;
    if (rc >> status) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

std::string Log(const TempDir& dir, const std::string& name) {
  std::ifstream in(dir.File(name + ".log"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(NetNamespaces, TransferAcrossAVethLinkWithAKey) {
  NamespacePair ns;
  if (std::string why = ns.Setup(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  std::string stream = MakeStream(dir, "8M");
  std::string bin = VramflowBinary(), key = dir.File("key"), out = dir.File("out.vfs");
  ASSERT_EQ(Sh(bin + " keygen -o " + key), 0);
  std::string addr = "tcp://" + ns.AddressOfB() + ":7301";
  Background(dir, "recv",
             ns.InB(bin + " recv -q --accept-timeout 20 --key-file " + key + " --listen " + addr + " -o " + out));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string output;
  int rc = -1;
  for (int attempt = 0; attempt < 20; ++attempt) {  // the receiver may still be starting
    rc = Sh(ns.InA(bin + " send -q --key-file " + key + " " + stream + " " + addr), &output);
    if (rc == 0 || output.find("refused") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(WaitFor(dir, "recv", 20), 0) << Log(dir, "recv");
  EXPECT_EQ(testing::ReadFileBytes(out), testing::ReadFileBytes(stream));
}

// A slow link that keeps moving is not a timeout: 2 MiB at 4 Mbit/s takes
// about 4 s, with --timeout 1.
TEST(NetNamespaces, SlowButMovingLinkDoesNotTimeOut) {
  NamespacePair ns;
  if (std::string why = ns.Setup(); !why.empty()) GTEST_SKIP() << why;
  if (!ns.Limit("4mbit")) GTEST_SKIP() << "tc tbf is unavailable";
  TempDir dir;
  std::string stream = MakeStream(dir, "2M");
  std::string bin = VramflowBinary(), key = dir.File("key"), out = dir.File("out.vfs");
  ASSERT_EQ(Sh(bin + " keygen -o " + key), 0);
  std::string addr = "tcp://" + ns.AddressOfB() + ":7302";
  Background(
      dir, "recv",
      ns.InB(bin + " recv -q --timeout 1 --accept-timeout 20 --key-file " + key + " --listen " + addr + " -o " + out));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string output;
  auto start = std::chrono::steady_clock::now();
  int rc = Sh(ns.InA(bin + " send -q --timeout 1 --streams 2 --key-file " + key + " " + stream + " " + addr), &output);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(rc, 0) << output;
  EXPECT_GT(seconds, 2.0) << "the link was not slowed down";
  EXPECT_EQ(WaitFor(dir, "recv", 20), 0) << Log(dir, "recv");
  EXPECT_EQ(testing::ReadFileBytes(out), testing::ReadFileBytes(stream));
}

// The link goes down mid-transfer and stays down: both ends stop with a
// clear error within their timeouts, and nothing is stored.
TEST(NetNamespaces, CutLinkStopsBothEndsAndStoresNothing) {
  NamespacePair ns;
  if (std::string why = ns.Setup(); !why.empty()) GTEST_SKIP() << why;
  if (!ns.Limit("8mbit")) GTEST_SKIP() << "tc tbf is unavailable";
  TempDir dir;
  std::string stream = MakeStream(dir, "8M");  // about 8 s at 8 Mbit/s
  std::string bin = VramflowBinary(), key = dir.File("key"), out = dir.File("out.vfs");
  ASSERT_EQ(Sh(bin + " keygen -o " + key), 0);
  std::string addr = "tcp://" + ns.AddressOfB() + ":7303";
  Background(dir, "recv",
             ns.InB(bin + " recv -q --timeout 1 --resume-timeout 2 --accept-timeout 20 --key-file " + key +
                    " --listen " + addr + " -o " + out));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Background(dir, "send",
             ns.InA(bin + " send -q --timeout 1 --connect-timeout 1 --retries 2 --key-file " + key + " " + stream +
                    " " + addr));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_EQ(WaitFor(dir, "send", 0), -1) << "finished before the cut: " << Log(dir, "send");
  ns.CutLink();
  auto cut = std::chrono::steady_clock::now();
  int send_rc = WaitFor(dir, "send", 30);
  int recv_rc = WaitFor(dir, "recv", 30);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut).count();
  EXPECT_EQ(send_rc, 1) << Log(dir, "send");
  EXPECT_EQ(recv_rc, 1) << Log(dir, "recv");
  EXPECT_LT(seconds, 25.0);
  EXPECT_NE(Log(dir, "send").find("error"), std::string::npos) << Log(dir, "send");
  EXPECT_NE(Log(dir, "recv").find("did not resume"), std::string::npos) << Log(dir, "recv");
  EXPECT_FALSE(Exists(out));
  std::string listing;
  Sh("ls -a " + dir.path(), &listing);
  EXPECT_EQ(listing.find("out.vfs"), std::string::npos) << listing;  // no temporary left either
}

}  // namespace
}  // namespace vramflow
