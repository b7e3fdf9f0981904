// SPDX-License-Identifier: MIT
// CleanupRegistry (common/cleanup_registry.h) and owner tags
// (common/owner_tag.h): what the signal handling of every command and the
// sweeping of a killed run's leftovers rest on.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/cleanup_registry.h"
#include "common/owner_tag.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using namespace std::chrono_literals;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::WriteFileBytes;

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(CleanupRegistry, RunsLocalUndosFirstNewestFirstAndOnlyOnce) {
  CleanupRegistry registry;
  std::vector<std::string> ran;
  CleanupEntry remote(
      &registry, [&] { ran.push_back("remote " + registry.reason()); }, CleanupRegistry::Kind::kRemote);
  CleanupEntry a(&registry, [&] { ran.push_back("a"); });
  CleanupEntry b(&registry, [&] { ran.push_back("b"); });
  CleanupEntry gone(&registry, [&] { ran.push_back("released"); });
  gone.Release();
  EXPECT_FALSE(registry.interrupted());
  registry.Run("interrupted by SIGTERM");
  registry.Run("again");
  EXPECT_TRUE(registry.interrupted());
  EXPECT_EQ(ran, (std::vector<std::string>{"b", "a", "remote interrupted by SIGTERM"}));
}

TEST(CleanupRegistry, NothingCanRegisterOnceRunning) {
  CleanupRegistry registry;
  registry.Run("interrupted by SIGINT");
  bool ran = false;
  CleanupEntry late(&registry, [&] { ran = true; });
  EXPECT_FALSE(late.registered());
  CleanupEntry none(nullptr, [&] { ran = true; });
  EXPECT_TRUE(none.registered()) << "no registry: nothing to refuse";
  EXPECT_FALSE(ran);
}

// The step that makes work final and the cleanup exclude each other: an
// interrupt that arrives during the step waits for it, and a step after the
// interrupt does not run.
TEST(CleanupRegistry, ExclusiveStepAndRunNeverInterleave) {
  CleanupRegistry registry;
  std::atomic<bool> step_done{false};
  std::atomic<bool> undo_saw_step_done{false};
  CleanupEntry entry(&registry, [&] { undo_saw_step_done = step_done.load(); });
  std::promise<void> in_step;
  std::future<Status> step = std::async(std::launch::async, [&] {
    return registry.Exclusive([&] {
      in_step.set_value();
      std::this_thread::sleep_for(100ms);
      step_done = true;
      return Status::Ok();
    });
  });
  in_step.get_future().wait();
  registry.Run("interrupted by SIGTERM");  // waits for the step
  EXPECT_TRUE(step.get().ok());
  EXPECT_TRUE(undo_saw_step_done);
  bool ran = false;
  Status after = registry.Exclusive([&] {
    ran = true;
    return Status::Ok();
  });
  EXPECT_EQ(after.code(), Status::Code::kCancelled) << after.ToString();
  EXPECT_FALSE(ran);
}

// An owner that finishes while the cleanup runs its undo waits for it, so the
// undo never uses what the owner frees.
TEST(CleanupRegistry, ReleaseWaitsForAnUndoInProgress) {
  CleanupRegistry registry;
  std::promise<void> undo_started;
  std::atomic<bool> undo_finished{false};
  auto entry = std::make_unique<CleanupEntry>(&registry, [&] {
    undo_started.set_value();
    std::this_thread::sleep_for(100ms);
    undo_finished = true;
  });
  std::thread run([&] { registry.Run("interrupted by SIGHUP"); });
  undo_started.get_future().wait();
  entry.reset();  // Release()
  EXPECT_TRUE(undo_finished);
  run.join();
}

// Creating and registering is one step: an interrupt during the creation
// waits for it and then undoes it; after the interrupt, nothing is created.
// (A file created just before its registration would otherwise outlive an
// interrupt that ran in between: the process exits once the cleanup ends.)
TEST(CleanupRegistry, WhatIsCreatedIsAlwaysUndone) {
  TempDir dir;
  const std::string path = dir.File("temp");
  CleanupRegistry registry;
  std::promise<void> creating;
  std::future<Result<CleanupEntry>> entry = std::async(std::launch::async, [&] {
    return CleanupEntry::Create(
        &registry,
        [&] {
          creating.set_value();
          std::this_thread::sleep_for(100ms);
          WriteFileBytes(path, {1});
          return Status::Ok();
        },
        [&] { ::unlink(path.c_str()); });
  });
  creating.get_future().wait();
  registry.Run("interrupted by SIGTERM");
  ASSERT_TRUE(entry.get().ok());
  EXPECT_FALSE(Exists(path)) << "created during the interrupt and left behind";

  bool created = false;
  Result<CleanupEntry> late = CleanupEntry::Create(
      &registry,
      [&] {
        created = true;
        return Status::Ok();
      },
      [] {});
  EXPECT_EQ(late.status().code(), Status::Code::kCancelled);
  EXPECT_FALSE(created);
}

// A pid that no longer runs: a child that exited and was reaped.
long DeadPid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(OwnerTag, TellsLiveWritersFromDeadOnesAndReusedPids) {
  const std::string mine = OwnerTag();
  EXPECT_EQ(mine.rfind(std::to_string(::getpid()) + ".", 0), 0u) << mine;
  EXPECT_TRUE(OwnerAlive(mine));
  EXPECT_FALSE(OwnerAlive(std::to_string(DeadPid()) + ".12345"));
  // This process's pid with another start time: a writer that died and whose
  // pid was given to this process.
  const std::string start = mine.substr(mine.find('.') + 1);
  EXPECT_FALSE(OwnerAlive(std::to_string(::getpid()) + "." + std::to_string(std::stoull(start) + 1)));
  EXPECT_TRUE(OwnerAlive("not-a-tag")) << "what is not a tag is never judged dead";
}

TEST(OwnerTag, SweepRemovesOnlyDeadWritersLeftovers) {
  TempDir dir;
  const std::string dead = std::to_string(DeadPid()) + ".777";
  const std::string live = OwnerTag();
  WriteFileBytes(dir.File("a.vfs.vf-tmp-" + dead + "-0badcafe"), {1});
  WriteFileBytes(dir.File("b.vfs.vf-tmp-" + live + "-0badcafe"), {2});
  ASSERT_EQ(::mkdir(dir.File(".out.vf-unpack-" + dead + "-Xy12Ab").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(dir.File(".out.vf-unpack-" + dead + "-Xy12Ab/sub").c_str(), 0700), 0);
  WriteFileBytes(dir.File(".out.vf-unpack-" + dead + "-Xy12Ab/sub/f"), {3});
  WriteFileBytes(dir.File("c.vfs.vf-tmp-12ab34cd"), {4});       // an old-style name: no owner, left alone
  WriteFileBytes(dir.File("d.vfs.vf-tmp-" + dead + "x"), {5});  // not followed by '-' or '.': not a tag
  EXPECT_EQ(SweepDeadTemporaries(dir.path(), ".vf-tmp-"), 1);
  EXPECT_EQ(SweepDeadTemporaries(dir.path(), ".vf-unpack-"), 1);
  EXPECT_FALSE(Exists(dir.File("a.vfs.vf-tmp-" + dead + "-0badcafe")));
  EXPECT_TRUE(Exists(dir.File("b.vfs.vf-tmp-" + live + "-0badcafe")));
  EXPECT_FALSE(Exists(dir.File(".out.vf-unpack-" + dead + "-Xy12Ab")));
  EXPECT_TRUE(Exists(dir.File("c.vfs.vf-tmp-12ab34cd")));
  EXPECT_TRUE(Exists(dir.File("d.vfs.vf-tmp-" + dead + "x")));
}

}  // namespace
}  // namespace vramflow
