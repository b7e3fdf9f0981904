// SPDX-License-Identifier: MIT
// Issue 19, item 1: a large output does not fill the page cache (and with it
// a container's memory cgroup): the file sink keeps about two windows of
// what it wrote cached, whatever the file's size.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <vector>

#include "common/unique_fd.h"
#include "streamer/device/write_behind.h"
#include "tests/support/shell.h"
#include "tests/support/test_util.h"
#include "transport/core/fd_stream.h"
#include "transport/core/writeback_window.h"

namespace vramflow {
namespace {

// Bytes of `path` in the page cache (mincore over a mapping of it).
uint64_t CachedBytes(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_TRUE(fd.valid()) << path;
  const off_t size = ::lseek(fd.get(), 0, SEEK_END);
  void* map = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd.get(), 0);
  EXPECT_NE(map, MAP_FAILED);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident((static_cast<size_t>(size) + page - 1) / page);
  EXPECT_EQ(::mincore(map, static_cast<size_t>(size), resident.data()), 0);
  ::munmap(map, static_cast<size_t>(size));
  uint64_t cached = 0;
  for (unsigned char r : resident) cached += (r & 1) ? static_cast<uint64_t>(page) : 0;
  return cached;
}

TEST(WritebackWindow, AFileSinkKeepsAFewWindowsCached) {
  testing::TempDir dir;
  struct statfs fs;
  ASSERT_EQ(::statfs(dir.path().c_str(), &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << "the test directory is on tmpfs, whose pages are the file";
  const std::string path = dir.File("big.vfs");
  auto sink = OpenFileSink(path, FileSinkOptions{});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  std::vector<uint8_t> block((1u << 20) + 12345, 0x5a);  // not a multiple of the window
  const int kBlocks = 64;
  for (int i = 0; i < kBlocks; ++i) ASSERT_TRUE((*sink)->Write(block).ok());
  ASSERT_TRUE((*sink)->Commit().ok());
  const uint64_t size = uint64_t{kBlocks} * block.size();
  const uint64_t cached = CachedBytes(path);
  // Started, waiting and the tail: at most three windows.
  EXPECT_LE(cached, 3 * kDefaultWritebackWindow) << cached << " of " << size << " bytes still cached";
  EXPECT_EQ(testing::ReadFileBytes(path).size(), size);  // and every byte is there
}

// unpack writes its files through the file device, chunks at their offsets
// from several ring threads: what it wrote is written back and dropped
// behind it too, so about WriteBehind's window of each stays cached.
TEST(WritebackWindow, AnUnpackedFileKeepsAFewWindowsCached) {
  testing::TempDir dir;
  struct statfs fs;
  ASSERT_EQ(::statfs(dir.path().c_str(), &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << "the test directory is on tmpfs, whose pages are the file";
  const uint64_t size = 96ull << 20;
  const std::string vf = testing::ShellQuote(testing::VramflowBinary());
  std::string out;
  ASSERT_EQ(
      testing::RunCommand("cd " + testing::ShellQuote(dir.path()) + " && " + vf + " gen -s 96M -k bf16 -o in.bin && " +
                              vf + " pack -q in.bin -o s.vfs && " + vf + " unpack -q s.vfs -o out.bin -j 2",
                          &out),
      0)
      << out;
  const uint64_t cached = CachedBytes(dir.File("out.bin"));
  // The window, and the chunks in flight past it: at most three of the
  // file sink's windows.
  EXPECT_LE(cached, WriteBehind::kDefaultWindow + kDefaultWritebackWindow)
      << cached << " of " << size << " bytes still cached";
  EXPECT_EQ(testing::ReadFileBytes(dir.File("out.bin")), testing::ReadFileBytes(dir.File("in.bin")));
}

}  // namespace
}  // namespace vramflow
