// SPDX-License-Identifier: MIT
// PrivateDirectory and RemoveTree (common/private_directory.h): the staging
// areas of unpack and the streamer, removed by their owner or by an
// interrupt's cleanup, never left behind.
#include "common/private_directory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using ::vramflow::testing::TempDir;

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// `files` empty files in `dir` and in a subdirectory of it.
void Fill(const std::string& dir, int files) {
  const std::string sub = dir + "/sub";
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
  for (int i = 0; i < files; ++i) {
    const std::string path = (i % 2 ? dir : sub) + "/file" + std::to_string(i);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << path;
    ::close(fd);
  }
}

// Two walks at once each meet entries the other has just removed. Each used
// to stop at the first of them, and after a few passes both gave up with
// the directory still there (an unpack's staging directory left behind
// after a SIGTERM, in CI).
TEST(RemoveTree, TwoWalksAtOnceRemoveEverything) {
  TempDir tmp;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string dir = tmp.File("tree" + std::to_string(round));
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
    Fill(dir, 200);
    std::thread other([&] { RemoveTree(dir); });
    RemoveTree(dir);
    other.join();
    ASSERT_FALSE(Exists(dir));
  }
}

TEST(RemoveTree, AMissingPathIsNothingToDo) {
  TempDir tmp;
  RemoveTree(tmp.File("absent"));
  EXPECT_FALSE(Exists(tmp.File("absent")));
}

TEST(PrivateDirectory, IsRemovedWithItsContentsWhenItGoes) {
  TempDir tmp;
  std::string path;
  {
    PrivateDirectory dir;
    ASSERT_TRUE(dir.Create(tmp.File(".work-"), nullptr).ok());
    path = dir.path();
    EXPECT_EQ(path.rfind(tmp.File(".work-"), 0), 0u) << path;
    EXPECT_EQ(path.size(), tmp.File(".work-").size() + 6);
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u) << "mkdtemp's private mode";
    Fill(path, 10);
  }
  EXPECT_FALSE(Exists(path));
}

TEST(PrivateDirectory, TheCleanupRemovesItAndItsOwnerThenLeavesIt) {
  TempDir tmp;
  CleanupRegistry cleanup;
  auto dir = std::make_unique<PrivateDirectory>();
  ASSERT_TRUE(dir->Create(tmp.File(".work-"), &cleanup).ok());
  const std::string path = dir->path();
  Fill(path, 10);
  cleanup.Run("interrupted by SIGTERM");
  EXPECT_FALSE(Exists(path));
  // A directory of that name made since is not its owner's to remove.
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  dir.reset();
  EXPECT_TRUE(Exists(path));
}

TEST(PrivateDirectory, IsNotMadeOnceTheCleanupBegan) {
  TempDir tmp;
  CleanupRegistry cleanup;
  cleanup.Run("interrupted by SIGINT");
  PrivateDirectory dir;
  Status s = dir.Create(tmp.File(".work-"), &cleanup);
  EXPECT_EQ(s.code(), Status::Code::kCancelled) << s.ToString();
  EXPECT_TRUE(dir.path().empty());
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path())) << "something was made in " << tmp.path();
}

// The owner's failure path while an interrupt's cleanup is under way (a
// SIGTERM early in an unpack): the owner leaves the directory to the
// cleanup and waits for it, rather than walking the tree beside it.
TEST(PrivateDirectory, LeavesItToACleanupUnderWay) {
  TempDir tmp;
  CleanupRegistry cleanup;
  auto dir = std::make_unique<PrivateDirectory>();
  ASSERT_TRUE(dir->Create(tmp.File(".work-"), &cleanup).ok());
  const std::string path = dir->path();
  Fill(path, 100);
  // Registered last, so run first: holds the cleanup until `go`.
  std::promise<void> go;
  std::shared_future<void> going = go.get_future().share();
  std::promise<void> holding;
  CleanupEntry gate(&cleanup, [&] {
    holding.set_value();
    going.wait();
  });
  std::thread interrupt([&] { cleanup.Run("interrupted by SIGTERM"); });
  holding.get_future().wait();
  std::atomic<bool> owner_done{false};
  std::thread owner([&] {
    dir.reset();
    owner_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(Exists(path)) << "the owner removed it while the cleanup was under way";
  EXPECT_FALSE(owner_done) << "the owner went before the cleanup was done";
  go.set_value();
  interrupt.join();
  owner.join();
  EXPECT_FALSE(Exists(path));
}

TEST(PrivateDirectory, FailsWithThePathItCouldNotMake) {
  TempDir tmp;
  PrivateDirectory dir;
  Status s = dir.Create(tmp.File("missing/.work-"), nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find(tmp.File("missing/.work-")), std::string::npos) << s.ToString();
  EXPECT_TRUE(dir.path().empty());
}

}  // namespace
}  // namespace vramflow
