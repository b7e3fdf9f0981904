// SPDX-License-Identifier: MIT
// pack's inputs, opened again by path when they are read (issue 18, defect
// 8): a file that replaced the planned one is refused, naming the path, and
// one that changed size while it was packed is reported.
#include "tools/planned_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "streamer/device/file_device.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using ::vramflow::testing::TempDir;
using ::vramflow::testing::WriteFileBytes;

PlannedFile Plan(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return PlannedFile{path, st.st_dev, st.st_ino};
}

//! pack reads an input through a reopen that checks device and inode: a
//! file renamed over the planned one between planning and reading fails
//! the read, naming the path, instead of being packed in its place.
TEST(PlannedFileTest, AReplacedInputIsRefusedWhenRead) {
  TempDir dir;
  const std::string path = dir.File("in.bin");
  WriteFileBytes(path, std::vector<uint8_t>(4096, 7));
  const PlannedFile planned = Plan(path);
  FileDevice device("pack", 1);
  std::vector<uint8_t> buffer(4096);
  uint32_t staging = device.RegisterStaging(buffer.data(), buffer.size()).value();
  uint32_t bo = device.ImportFile([planned] { return ReopenPlannedFile(planned); }, 0, 4096, path).value();

  WriteFileBytes(dir.File("other"), std::vector<uint8_t>(4096, 8));
  ASSERT_EQ(std::rename(dir.File("other").c_str(), path.c_str()), 0);
  Result<DmaFence> fence = device.SubmitCopy(0, DmaDirection::kDeviceToHost, bo, 0, staging, 0, 4096);
  ASSERT_TRUE(fence.ok()) << fence.status().ToString();
  Status s = device.WaitFence(*fence, std::chrono::seconds(10));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("'" + path + "' was replaced while being packed"), std::string::npos) << s.ToString();
  EXPECT_TRUE(buffer == std::vector<uint8_t>(4096, 0)) << "nothing read from the other file";

  Status after = CheckPlannedFileUnchanged(planned, 4096);
  EXPECT_NE(after.ToString().find("was replaced while being packed"), std::string::npos) << after.ToString();
}

//! After reading, a planned file that grew is reported, and an unchanged one is not.
TEST(PlannedFileTest, AnInputThatChangedSizeIsReported) {
  TempDir dir;
  const std::string path = dir.File("in.bin");
  WriteFileBytes(path, std::vector<uint8_t>(100, 1));
  const PlannedFile planned = Plan(path);
  EXPECT_TRUE(CheckPlannedFileUnchanged(planned, 100).ok());
  ASSERT_EQ(::truncate(path.c_str(), 200), 0);
  Status s = CheckPlannedFileUnchanged(planned, 100);
  EXPECT_NE(s.ToString().find("changed size while being packed"), std::string::npos) << s.ToString();
  EXPECT_TRUE(ReopenPlannedFile(planned).ok()) << "still the same file";
}

}  // namespace
}  // namespace vramflow
