// SPDX-License-Identifier: MIT
// RealCriu.* with VRAMFLOW_TARGET: a real CRIU 4.2 dumps a process with two
// simulated GPUs and sends its VRAM somewhere other than the images
// directory, then restores it and checks every byte:
//
// - tcp://: every GPU's stream goes, one named session after another, to a
//   running `vramflow recv --output-dir`, which stores each under its image
//   name; the restore reads them from that directory.
// - s3://BUCKET/PREFIX/{name} on the local Ceph RGW. Its name ends in "Rgw",
//   which ties it to CTest's rgw fixture as the S3Rgw.* tests are
//   (tests/CMakeLists.txt), so `ctest -R RealCriu` starts RGW for it; run
//   outside CTest without RGW settings, it skips and says why.
//
// The test bed (root, the built CRIU, the simulated KFD) is described in
// real_criu_test.cc and real_criu_fixture.h.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "plugin/kfd_image.h"
#include "tests/support/real_criu_fixture.h"
#include "tests/support/tls_test_files.h"

namespace vramflow {
namespace real_criu {
namespace {

// The id in the dump's amdgpu-kfd-<id>.img, or -1.
int KfdImageId(const std::string& images) {
  for (const auto& e : std::filesystem::directory_iterator(images)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, std::regex("amdgpu-kfd-([0-9]+)\\.img"))) return std::stoi(m[1]);
  }
  return -1;
}

// File names in `dir` that start with `prefix`.
std::set<std::string> FilesStartingWith(const std::string& dir, const std::string& prefix) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.insert(name);
  }
  return out;
}

// Waits (up to `limit`) until `path` holds text matching `pattern`; returns
// the first group, or "" on timeout.
std::string WaitForMatch(const std::string& path, const std::regex& pattern,
                         std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    std::smatch m;
    const std::string text = ReadText(path);
    if (std::regex_search(text, m, pattern)) return m[1];
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

// VRAMFLOW_TARGET=tcp://127.0.0.1:PORT, no {name}, over mutual TLS
// (VRAMFLOW_TLS_CERT/_KEY/_CA; recv --cert/--key/--ca): both GPUs' streams
// reach one `vramflow recv --output-dir` under their image names (and nothing of
// VRAM lands in the images directory); restoring from the received files
// brings back every byte.
TEST_F(RealCriu, TcpTargetToRecvOutputDir) {
  REQUIRE_REAL_CRIU();
  StartKfd(2);
  const pid_t pid = StartGpuProcess();
  const std::string received = dir_.File("received");
  std::filesystem::create_directories(received);
  const testing::TlsFiles& files = testing::Files();
  // Port 0: recv prints the port it got. Its exit status lands in recv.rc.
  testing::CommandResult started =
      RunShell("(" + ShellQuote(testing::VramflowBinary()) + " recv --listen tcp://127.0.0.1:0 --output-dir " +
               ShellQuote(received) + " --cert " + ShellQuote(files.File("server.pem")) + " --key " +
               ShellQuote(files.File("server.key")) + " --ca " + ShellQuote(files.File("ca.pem")) +
               " --count 2 --accept-timeout 120; echo $? > " + ShellQuote(dir_.File("recv.rc")) + ") > " +
               ShellQuote(dir_.File("recv.log")) + " 2>&1 < /dev/null &");
  ASSERT_EQ(started.code, 0) << started.output;
  const std::string port =
      WaitForMatch(dir_.File("recv.log"), std::regex("listening on tcp://127\\.0\\.0\\.1:([0-9]+)"));
  ASSERT_FALSE(port.empty()) << ReadText(dir_.File("recv.log"));

  Dump(pid, "VRAMFLOW_TARGET=tcp://127.0.0.1:" + port + " VRAMFLOW_TLS_CERT=" + ShellQuote(files.File("client.pem")) +
                " VRAMFLOW_TLS_KEY=" + ShellQuote(files.File("client.key")) +
                " VRAMFLOW_TLS_CA=" + ShellQuote(files.File("ca.pem")));
  const std::string rc = WaitForMatch(dir_.File("recv.rc"), std::regex("([0-9]+)"));
  ASSERT_EQ(rc, "0") << ReadText(dir_.File("recv.log"));

  const int id = KfdImageId(images_);
  ASSERT_GE(id, 0) << "no amdgpu-kfd-<id>.img in the images directory";
  std::set<std::string> want;
  for (uint32_t gpu : kfd_->GpuIds()) want.insert(VramStreamName(id, gpu));
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(FilesStartingWith(received, ""), want) << ReadText(dir_.File("recv.log"));
  EXPECT_TRUE(FilesStartingWith(images_, "amdgpu-vram-").empty()) << "VRAM streams landed in the images directory";

  testing::CommandResult r = Restore("VRAMFLOW_TARGET=" + ShellQuote(received));
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  Check(pid);
}

// VRAMFLOW_TARGET=s3://BUCKET/PREFIX/{name} on the local Ceph RGW: one
// object per GPU, each a complete stream (vramflow verify), and the restore
// reads them back.
TEST_F(RealCriu, S3TargetOnRgw) {
  REQUIRE_REAL_CRIU();
  if (const char* skip = std::getenv("VRAMFLOW_TEST_S3_SKIP"); skip && *skip) GTEST_SKIP() << "no Ceph RGW: " << skip;
  const char* endpoint = std::getenv("AWS_ENDPOINT_URL");
  const char* bucket = std::getenv("VRAMFLOW_TEST_S3_BUCKET");
  if (!endpoint || !*endpoint || !bucket || !*bucket)
    GTEST_SKIP() << "AWS_ENDPOINT_URL and VRAMFLOW_TEST_S3_BUCKET are not set (run through ctest, whose rgw fixture "
                    "sets them, or eval \"$(scripts/rgw.sh start DIR)\")";
  StartKfd(2);
  const pid_t pid = StartGpuProcess();
  const std::string prefix = "s3://" + std::string(bucket) + "/realcriu-" +
                             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "/";
  const std::string target = "VRAMFLOW_TARGET=" + ShellQuote(prefix + "{name}");

  Dump(pid, target);
  EXPECT_TRUE(FilesStartingWith(images_, "amdgpu-vram-").empty()) << "VRAM streams landed in the images directory";
  const int id = KfdImageId(images_);
  ASSERT_GE(id, 0) << "no amdgpu-kfd-<id>.img in the images directory";
  for (uint32_t gpu : kfd_->GpuIds()) {
    const std::string object = prefix + VramStreamName(id, gpu);
    testing::CommandResult verified =
        RunShell(ShellQuote(testing::VramflowBinary()) + " verify -q " + ShellQuote(object));
    EXPECT_EQ(verified.code, 0) << object << ": " << verified.output;
  }

  testing::CommandResult r = Restore(target);
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  Check(pid);
}

}  // namespace
}  // namespace real_criu
}  // namespace vramflow
