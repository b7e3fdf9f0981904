// SPDX-License-Identifier: MIT
// The file device's open files (issue 18, defect 8): files imported by how
// to open them are opened when a copy runs and a bounded number kept open;
// a file closed by the cache stays usable by the copy holding it.
#include "streamer/device/file_device.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "streamer/device/fd_cache.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using ::vramflow::testing::ReadFileBytes;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::WriteFileBytes;

// Open fds of this process.
size_t OpenFds() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  while (struct dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n - 1;  // the directory stream's own
}

FileOpener OpenPath(const std::string& path, int flags) {
  return [path, flags]() -> Result<UniqueFd> {
    UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno("opening " + path, errno);
    return fd;
  };
}

// Runs one copy and waits for it.
Status Copy(FileDevice& device, DmaDirection direction, uint32_t bo, uint32_t staging, size_t size) {
  VF_ASSIGN_OR_RETURN(DmaFence fence, device.SubmitCopy(0, direction, bo, 0, staging, 0, size));
  return device.WaitFence(fence, std::chrono::seconds(10));
}

//! 64 files written and read back through a device that keeps 4 open: the
//! process never holds more than those 4 (plus the one a copy is using,
//! and those the write-behind queue holds), and files it has closed are
//! opened again when read.
TEST(FileDeviceTest, KeepsABoundedNumberOfFilesOpen) {
  TempDir dir;
  constexpr int kFiles = 64;
  constexpr size_t kSize = 4096;
  FileDevice device("test", /*rings=*/1, /*cached_files=*/4);
  std::vector<uint8_t> buffer(kSize);
  uint32_t staging = device.RegisterStaging(buffer.data(), buffer.size()).value();
  const size_t before = OpenFds();
  std::vector<uint32_t> bos;
  for (int i = 0; i < kFiles; ++i) {
    const std::string path = dir.File(std::to_string(i));
    WriteFileBytes(path, {});
    bos.push_back(device.ImportFile(OpenPath(path, O_RDWR), 0, kSize, path).value());
    std::fill(buffer.begin(), buffer.end(), static_cast<uint8_t>(i));
    ASSERT_TRUE(Copy(device, DmaDirection::kHostToDevice, bos.back(), staging, kSize).ok());
    ASSERT_LE(device.CachedFiles(), 4u);
    // The cache's files, and those whose written ranges wait to be dropped
    // from the page cache (streamer/device/write_behind.h).
    ASSERT_LE(OpenFds(), before + 4 + WriteBehind::kMaxRanges);
  }
  for (int i = 0; i < kFiles; ++i) {
    Status s = Copy(device, DmaDirection::kDeviceToHost, bos[static_cast<size_t>(i)], staging, kSize);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(buffer == std::vector<uint8_t>(kSize, static_cast<uint8_t>(i))) << "file " << i;
  }
  EXPECT_LE(OpenFds(), before + 4 + WriteBehind::kMaxRanges);
  EXPECT_EQ(ReadFileBytes(dir.File("9")), std::vector<uint8_t>(kSize, 9));
}

//! A file the cache lets go of (evicted, or its BO released) stays open for
//! the user still holding it, and closes when that user lets go.
TEST(FdCacheTest, AFileStaysOpenWhileItsUserHoldsIt) {
  TempDir dir;
  WriteFileBytes(dir.File("a"), {1, 2, 3});
  FdCache cache(1);
  std::shared_ptr<const UniqueFd> held = cache.Get(1, OpenPath(dir.File("a"), O_RDONLY)).value();
  const int fd = held->get();
  ASSERT_TRUE(cache.Get(2, OpenPath(dir.File("a"), O_RDONLY)).ok());  // evicts key 1
  EXPECT_EQ(cache.size(), 1u);
  uint8_t byte = 0;
  EXPECT_EQ(::pread(fd, &byte, 1, 2), 1) << "closed under its user";
  EXPECT_EQ(byte, 3);
  held.reset();
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "still open once nobody holds it";
  cache.Drop(2);
  EXPECT_EQ(cache.size(), 0u);
}

//! An opener's error fails the copy that needed the file, with its message.
TEST(FileDeviceTest, AFileThatCannotBeOpenedFailsItsCopy) {
  TempDir dir;
  FileDevice device("test", 1);
  std::vector<uint8_t> buffer(16);
  uint32_t staging = device.RegisterStaging(buffer.data(), buffer.size()).value();
  uint32_t bo = device.ImportFile(OpenPath(dir.File("missing"), O_RDONLY), 0, 16, "missing").value();
  Status s = Copy(device, DmaDirection::kDeviceToHost, bo, staging, 16);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("opening " + dir.File("missing")), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace vramflow
