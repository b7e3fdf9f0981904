// SPDX-License-Identifier: MIT
// Reading a regular file in place (transport/core/file_mapping.h through
// FdSource::ReadInPlace): which files are mapped, what in-place and copying
// reads return when mixed, and that DoneBefore unmaps what lies behind.
#include "transport/core/file_mapping.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>

#include "tests/support/test_util.h"
#include "transport/core/fd_stream.h"

namespace vramflow {
namespace {

using testing::TempDir;
using testing::WriteFileBytes;

std::vector<uint8_t> Counting(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  return bytes;
}

std::vector<uint8_t> Slice(const std::vector<uint8_t>& bytes, size_t at, size_t n) {
  return std::vector<uint8_t>(bytes.begin() + at, bytes.begin() + at + n);
}

std::vector<uint8_t> Copy(std::span<const uint8_t> span) { return std::vector<uint8_t>(span.begin(), span.end()); }

// Writes `bytes` to `path` with `mode` and opens it as a stream source.
std::unique_ptr<ByteSource> WrittenFileSource(const std::string& path, const std::vector<uint8_t>& bytes, mode_t mode) {
  WriteFileBytes(path, bytes);
  EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  Result<std::unique_ptr<ByteSource>> source = OpenFileSource(path);
  EXPECT_TRUE(source.ok()) << source.status().ToString();
  return source.ok() ? std::move(*source) : nullptr;
}

TEST(FileMappingTest, OnlyFilesThatNoOneButTheirOwnerMayWriteAreMapped) {
  const uint32_t me = 1000;
  EXPECT_TRUE(OnlyOwnerMayWrite(me, 0644, me));
  EXPECT_TRUE(OnlyOwnerMayWrite(me, 0600, me));
  EXPECT_TRUE(OnlyOwnerMayWrite(0, 0644, me));  // root's
  EXPECT_TRUE(OnlyOwnerMayWrite(me, 0444, me));
  EXPECT_FALSE(OnlyOwnerMayWrite(1001, 0644, me));  // another user's: they could change it under us
  EXPECT_FALSE(OnlyOwnerMayWrite(me, 0664, me));    // group-writable (or an ACL's mask)
  EXPECT_FALSE(OnlyOwnerMayWrite(me, 0646, me));    // writable by anyone
  EXPECT_FALSE(OnlyOwnerMayWrite(0, 0666, me));
}

TEST(FileMappingTest, InPlaceAndCopyingReadsOfAFileFollowEachOther) {
  TempDir dir;
  const std::vector<uint8_t> bytes = Counting(300000);
  std::unique_ptr<ByteSource> source = WrittenFileSource(dir.File("s"), bytes, 0644);
  ASSERT_TRUE(source);

  std::vector<uint8_t> head(100);
  ASSERT_EQ(*ReadFully(*source, head), 100u);  // by read(2), before any mapping
  EXPECT_EQ(head, Slice(bytes, 0, 100));
  std::optional<std::span<const uint8_t>> a = source->ReadInPlace(1000);
  ASSERT_TRUE(a.has_value()) << "a 0644 file of this user's is read in place";
  EXPECT_EQ(Copy(*a), Slice(bytes, 100, 1000));
  std::vector<uint8_t> middle(50);
  ASSERT_EQ(*ReadFully(*source, middle), 50u);  // from the mapping now
  EXPECT_EQ(middle, Slice(bytes, 1100, 50));
  std::optional<std::span<const uint8_t>> b = source->ReadInPlace(200000);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(Copy(*b), Slice(bytes, 1150, 200000));
  // Short only at the end, then empty; copying reads agree.
  std::optional<std::span<const uint8_t>> tail = source->ReadInPlace(200000);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(Copy(*tail), Slice(bytes, 201150, bytes.size() - 201150));
  EXPECT_EQ(source->ReadInPlace(1)->size(), 0u);
  EXPECT_EQ(*ReadFully(*source, head), 0u);
  // Earlier spans stay readable while nothing passed them.
  EXPECT_EQ(Copy(*a), Slice(bytes, 100, 1000));
}

TEST(FileMappingTest, FilesOthersMayWriteAndPipesAreOnlyCopied) {
  TempDir dir;
  const std::vector<uint8_t> bytes = Counting(10000);
  std::unique_ptr<ByteSource> shared = WrittenFileSource(dir.File("shared"), bytes, 0664);
  ASSERT_TRUE(shared);
  EXPECT_FALSE(shared->ReadInPlace(100).has_value()) << "a group-writable file must be copied";
  std::vector<uint8_t> all(bytes.size());
  ASSERT_EQ(*ReadFully(*shared, all), bytes.size()) << "nothing was consumed by the refusal";
  EXPECT_EQ(all, bytes);

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  ASSERT_EQ(::write(write_end.get(), bytes.data(), 100), 100);
  std::unique_ptr<ByteSource> pipe = BorrowFdSource(read_end.get(), "a pipe");
  EXPECT_FALSE(pipe->ReadInPlace(10).has_value());
  std::vector<uint8_t> got(100);
  EXPECT_EQ(*ReadFully(*pipe, std::span<uint8_t>(got.data(), 100)), 100u);
  EXPECT_EQ(got, Slice(bytes, 0, 100));
}

// A borrowed fd (stdin, fd:N) is left where a reader by read(2) would have
// left it: a shell that runs `vramflow unpack - ...` once per stream of a
// file goes on at the next stream, not at the start of the one just read.
TEST(FileMappingTest, ABorrowedFdIsLeftWhereTheReadsOfItsMappingEnded) {
  TempDir dir;
  const std::vector<uint8_t> bytes = Counting(100000);
  WriteFileBytes(dir.File("s"), bytes);
  ASSERT_EQ(::chmod(dir.File("s").c_str(), 0644), 0);
  UniqueFd fd(::open(dir.File("s").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  {
    std::unique_ptr<ByteSource> source = BorrowFdSource(fd.get(), "a borrowed file");
    std::vector<uint8_t> head(100);
    ASSERT_EQ(*ReadFully(*source, head), 100u);  // by read(2)
    std::optional<std::span<const uint8_t>> middle = source->ReadInPlace(5000);
    ASSERT_TRUE(middle.has_value()) << "a 0644 file of this user's is read in place";
    std::vector<uint8_t> more(900);
    ASSERT_EQ(*ReadFully(*source, more), 900u);  // from the mapping
  }
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_CUR), 6000);
  std::vector<uint8_t> next(10);
  ASSERT_EQ(::read(fd.get(), next.data(), next.size()), 10);
  EXPECT_EQ(next, Slice(bytes, 6000, 10));
}

// This process's resident kB of the mapping that holds `p` (/proc/self/smaps).
uint64_t ResidentKb(const uint8_t* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_it = false;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2) {  // a mapping's first line
      in_it = begin <= at && at < end;
      continue;
    }
    if (in_it && line.rfind("Rss:", 0) == 0) return std::stoull(line.substr(4));
  }
  return 0;
}

TEST(FileMappingTest, DoneBeforeUnmapsWhatLiesBehindAndKeepsTheRest) {
  TempDir dir;
  const size_t size = 48 << 20;
  const std::vector<uint8_t> bytes = Counting(size);
  std::unique_ptr<ByteSource> source = WrittenFileSource(dir.File("s"), bytes, 0600);
  ASSERT_TRUE(source);
  std::optional<std::span<const uint8_t>> all = source->ReadInPlace(size);
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), size);
  const uint8_t* base = all->data();
  EXPECT_EQ(std::accumulate(all->begin(), all->end(), uint64_t{0}),
            std::accumulate(bytes.begin(), bytes.end(), uint64_t{0}));  // every page touched
  const uint64_t before = ResidentKb(base + size - 1);
  EXPECT_GE(before, (size >> 10) - 64) << "the whole file should be mapped in";

  // Less than a step (4 MiB) behind: kept; then 32 MiB behind: unmapped,
  // the rest kept.
  static_assert(FileMapping::kDropStep > (2 << 20) && FileMapping::kDropStep <= (32 << 20));
  source->DoneBefore(base + (2 << 20));
  EXPECT_GE(ResidentKb(base + size - 1), before - 64);
  source->DoneBefore(base + (32 << 20));
  const uint64_t after = ResidentKb(base + size - 1);
  EXPECT_LE(after, before - (32 << 10) + 64) << "32 MiB behind should no longer be mapped";
  EXPECT_GE(after, (16 << 10) - 64);
  EXPECT_EQ(Copy(all->subspan(32 << 20)), Slice(bytes, 32 << 20, 16 << 20)) << "what lies ahead is intact";
}

}  // namespace
}  // namespace vramflow
