// SPDX-License-Identifier: MIT
// ImageFileStore (image_streamer/image_file_store.h) on its own: what Take answers
// when, spilling within the budget, the rewrite hook, and the stream's
// failure reaching a waiting taker.
#include "image_streamer/image_file_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using testing::TempDir;

std::string Name(uint32_t id) { return std::to_string(id) + ".img"; }

// The bytes WriteTo gives (through a memfd).
std::vector<uint8_t> Contents(const ImageFileStore& store, const ImageFileStore::File& file) {
  UniqueFd fd(::memfd_create("image", MFD_CLOEXEC));
  EXPECT_TRUE(store.WriteTo(file, fd.get(), "test file").ok());
  std::vector<uint8_t> out(static_cast<size_t>(::lseek(fd.get(), 0, SEEK_END)));
  EXPECT_EQ(::pread(fd.get(), out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  return out;
}

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST(ImageFileStore, AnswersOnlyWhatTheStreamProves) {
  TempDir dir;
  MemoryBudget budget(16 << 20);
  ImageFileStore store(&budget, dir.path(), false);
  ASSERT_TRUE(store.Open().ok());
  ASSERT_TRUE(store.Begin(1, "a.img", false).ok());
  ASSERT_TRUE(store.Write(1, 0, Bytes(100, 1)).ok());
  auto waiting = std::async(std::launch::async, [&] { return store.Take("a.img"); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout) << "a file still arriving";
  ASSERT_TRUE(store.WriteZeros(1, 100, 50).ok());
  ASSERT_TRUE(store.End(1, 150).ok());
  auto taken = waiting.get();
  ASSERT_TRUE(taken.ok() && *taken);
  std::vector<uint8_t> expected = Bytes(100, 1);
  expected.resize(150, 0);
  EXPECT_EQ(Contents(store, **taken), expected);
  store.Release(*taken);
  EXPECT_FALSE(store.Take("a.img").ok()) << "a second take";

  auto absent = std::async(std::launch::async, [&] { return store.Take("b.img"); });
  EXPECT_EQ(absent.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout) << "nothing proves it absent";
  const std::string list = std::string("a.img") + '\0' + "c.img" + '\0';
  ASSERT_TRUE(store.Begin(2, kStreamerFileListObject, true).ok());
  ASSERT_TRUE(
      store.Write(2, 0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(list.data()), list.size())).ok());
  ASSERT_TRUE(store.End(2, list.size()).ok());
  auto answer = absent.get();
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(*answer, nullptr);
  EXPECT_FALSE(store.Begin(3, "d.img", false).ok()) << "a file the list does not name";

  auto failing = std::async(std::launch::async, [&] { return store.Take("c.img"); });
  EXPECT_EQ(failing.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  store.Finish(Status::Corruption("frame 9 at stream offset 1234: bad"));
  auto failed = failing.get();
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.status().ToString().find("offset 1234"), std::string::npos);
}

TEST(ImageFileStore, SpillsWithinTheBudget) {
  TempDir dir;
  MemoryBudget budget(4 << 20);
  ImageFileStore store(&budget, dir.path(), false);
  ASSERT_TRUE(store.Open().ok());
  std::vector<std::vector<uint8_t>> files;
  for (uint32_t id = 1; id <= 6; ++id) {
    files.push_back(Bytes(1 << 20, static_cast<uint8_t>(id)));
    ASSERT_TRUE(store.Begin(id, Name(id), false).ok());
    for (size_t at = 0; at < files.back().size(); at += 256 << 10)
      ASSERT_TRUE(store.Write(id, at, std::span<const uint8_t>(files.back()).subspan(at, 256 << 10)).ok());
    ASSERT_TRUE(store.End(id, files.back().size()).ok());
    EXPECT_LE(budget.in_use(), budget.limit());
  }
  EXPECT_GE(store.spilled_bytes(), 2u << 20);
  EXPECT_LE(budget.peak(), budget.limit());
  for (uint32_t id = 6; id >= 1; --id) {
    auto file = store.Take(Name(id));
    ASSERT_TRUE(file.ok() && *file);
    EXPECT_EQ(Contents(store, **file), files[id - 1]) << id;
    store.Release(*file);
  }
  EXPECT_LT(budget.in_use(), 4096u) << "only what the store keeps of each file (its name, its state)";
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "spill files of released files";
}

// Issue 55, defect 4: zero runs that touch are one range, whatever their
// number, in memory and in a spill file (a hole there).
TEST(ImageFileStore, RangesThatTouchAreOne) {
  TempDir dir;
  for (bool spill_all : {false, true}) {
    MemoryBudget budget(1 << 20);
    {
      ImageFileStore store(&budget, dir.path(), spill_all);
      ASSERT_TRUE(store.Open().ok());
      ASSERT_TRUE(store.Begin(1, "a.img", false).ok());
      const uint64_t in_use = budget.in_use();
      constexpr uint64_t kRuns = 200'000;
      for (uint64_t i = 0; i < kRuns; ++i) ASSERT_TRUE(store.WriteZeros(1, i, 1).ok()) << i;
      ASSERT_TRUE(store.Write(1, kRuns, Bytes(10, 5)).ok());
      for (uint64_t i = kRuns + 10; i < 2 * kRuns; ++i) ASSERT_TRUE(store.WriteZeros(1, i, 1).ok()) << i;
      EXPECT_LT(budget.in_use() - in_use, 8192u) << "spill_all " << spill_all;
      ASSERT_TRUE(store.End(1, 2 * kRuns).ok());
      auto file = store.Take("a.img");
      ASSERT_TRUE(file.ok() && *file);
      std::vector<uint8_t> expected(2 * kRuns, 0);
      const std::vector<uint8_t> bytes = Bytes(10, 5);
      std::copy(bytes.begin(), bytes.end(), expected.begin() + kRuns);
      EXPECT_EQ(Contents(store, **file), expected) << "spill_all " << spill_all;
      store.Release(*file);
    }
    EXPECT_EQ(budget.in_use(), 0u) << "spill_all " << spill_all;
  }
}

// Issue 55, defect 4: ranges apart (every other byte, as a hostile stream
// may send them) are charged to the budget: the store refuses them, naming
// --max-memory, once they pass it, instead of growing (they were not
// charged at all).
TEST(ImageFileStore, RangesApartAreChargedToTheBudget) {
  TempDir dir;
  MemoryBudget budget(1 << 20);
  ImageFileStore store(&budget, dir.path(), false);
  ASSERT_TRUE(store.Open().ok());
  ASSERT_TRUE(store.Begin(1, "a.img", false).ok());
  Status s;
  uint64_t runs = 0;
  for (; runs < 100'000 && s.ok(); ++runs) s = store.WriteZeros(1, 2 * runs, 1);
  EXPECT_FALSE(s.ok()) << runs << " ranges apart within 1 MiB";
  EXPECT_NE(s.ToString().find("--max-memory"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("a.img"), std::string::npos) << s.ToString();
  EXPECT_LE(budget.peak(), budget.limit());
}

TEST(ImageFileStore, RewritesAFileBeforeItIsTaken) {
  TempDir dir;
  MemoryBudget budget(4 << 20);
  ImageFileStore store(&budget, dir.path(), false);
  ASSERT_TRUE(store.Open().ok());
  store.SetRewrite("files.img", [](std::vector<uint8_t> bytes) -> Result<std::vector<uint8_t>> {
    for (uint8_t& b : bytes) b ^= 0xff;
    bytes.push_back(42);
    return bytes;
  });
  store.SetRewrite("bad.img", [](std::vector<uint8_t>) -> Result<std::vector<uint8_t>> {
    return Status::InvalidArgument("port 80 is not listening");
  });
  ASSERT_TRUE(store.Begin(1, "files.img", false).ok());
  ASSERT_TRUE(store.Write(1, 0, Bytes(10, 3)).ok());
  ASSERT_TRUE(store.End(1, 10).ok());
  auto file = store.Take("files.img");
  ASSERT_TRUE(file.ok() && *file);
  std::vector<uint8_t> expected = Bytes(10, 3);
  for (uint8_t& b : expected) b ^= 0xff;
  expected.push_back(42);
  EXPECT_EQ(Contents(store, **file), expected);
  ASSERT_TRUE(store.Begin(2, "bad.img", false).ok());
  ASSERT_TRUE(store.Write(2, 0, Bytes(10, 3)).ok());
  Status s = store.End(2, 10);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("port 80"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace vramflow
