// SPDX-License-Identifier: MIT
// Issue 19, item 1: the limits a process runs under, read from fixture
// trees of /proc and /sys files (cgroup v1 and v2, nested groups, a
// namespaced mount), and the defaults chosen from them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "codecs/chunk_codec.h"
#include "streamer/machine/machine_limits.h"
#include "streamer/pipeline_fit.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

void Put(const testing::TempDir& root, const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(root.path() + path).parent_path());
  testing::WriteFileBytes(root.path() + path, std::vector<uint8_t>(text.begin(), text.end()));
}

const char* kMeminfo = "MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n";

TEST(MachineLimits, ParsesCpuMaxAndMemAvailable) {
  EXPECT_FALSE(ParseCpuMax("max 100000\n"));
  EXPECT_DOUBLE_EQ(*ParseCpuMax("150000 100000\n"), 1.5);
  EXPECT_FALSE(ParseCpuMax("garbage"));
  EXPECT_FALSE(ParseCpuMax("100 0"));
  EXPECT_EQ(*ParseMemAvailable(kMeminfo), 8000000ull * 1024);
  EXPECT_FALSE(ParseMemAvailable("MemTotal: 1 kB\n"));
}

//! cgroup v2: the tightest cpu.max and memory.max from the process's group up
//! to the mount; "max" is no limit.
TEST(MachineLimits, CgroupV2TightestOnThePathToTheRoot) {
  testing::TempDir root;
  Put(root, "/proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  Put(root, "/proc/self/mountinfo",
      "24 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
      "25 1 0:5 / /proc rw - proc proc rw\n");
  Put(root, "/proc/meminfo", kMeminfo);
  Put(root, "/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
  Put(root, "/sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n");
  Put(root, "/sys/fs/cgroup/kubepods/pod1/cpu.max", "250000 100000\n");
  Put(root, "/sys/fs/cgroup/kubepods/pod1/memory.max", "1073741824\n");
  Put(root, "/sys/fs/cgroup/kubepods/cpu.max", "400000 100000\n");
  Put(root, "/sys/fs/cgroup/kubepods/memory.max", "4294967296\n");
  MachineLimits limits = ReadMachineLimits(root.path());
  ASSERT_TRUE(limits.cgroup_cpus);
  EXPECT_DOUBLE_EQ(*limits.cgroup_cpus, 2.5);
  ASSERT_TRUE(limits.cgroup_memory);
  EXPECT_EQ(*limits.cgroup_memory, 1ull << 30);
  EXPECT_EQ(*limits.mem_available, 8000000ull * 1024);
}

//! cgroup v1: cpu (here co-mounted with cpuacct) and memory in their own
//! hierarchies; an unset limit reads as a huge number or -1.
TEST(MachineLimits, CgroupV1CpuAndMemoryHierarchies) {
  testing::TempDir root;
  Put(root, "/proc/self/cgroup", "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n");
  Put(root, "/proc/self/mountinfo",
      "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
      "31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
  Put(root, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "50000\n");
  Put(root, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  Put(root, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  Put(root, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  Put(root, "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "536870912\n");
  Put(root, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  CgroupLimits limits = ReadCgroupLimits(root.path());
  ASSERT_TRUE(limits.cpus);
  EXPECT_DOUBLE_EQ(*limits.cpus, 0.5);
  ASSERT_TRUE(limits.memory);
  EXPECT_EQ(*limits.memory, 512 * kMiB);
}

//! Inside a cgroup namespace (or a container that mounts only its own
//! group) the mount's root is the group itself: its files are at the mount
//! point. A path outside what is mounted is not guessed at.
TEST(MachineLimits, CgroupMountedBelowTheRootAndUnlimited) {
  testing::TempDir root;
  Put(root, "/proc/self/cgroup", "0::/ctr\n");
  Put(root, "/proc/self/mountinfo", "24 1 0:22 /ctr /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  Put(root, "/sys/fs/cgroup/cpu.max", "200000 100000\n");
  Put(root, "/sys/fs/cgroup/memory.max", "268435456\n");
  CgroupLimits limits = ReadCgroupLimits(root.path());
  EXPECT_DOUBLE_EQ(limits.cpus.value_or(0), 2.0);
  EXPECT_EQ(limits.memory.value_or(0), 256 * kMiB);

  testing::TempDir other;
  Put(other, "/proc/self/cgroup", "0::/elsewhere\n");
  Put(other, "/proc/self/mountinfo", "24 1 0:22 /ctr /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  Put(other, "/sys/fs/cgroup/cpu.max", "200000 100000\n");
  EXPECT_FALSE(ReadCgroupLimits(other.path()).cpus);

  testing::TempDir none;  // no /proc, no /sys: nothing known
  MachineLimits unknown = ReadMachineLimits(none.path());
  EXPECT_FALSE(unknown.cgroup_cpus);
  EXPECT_FALSE(unknown.cgroup_memory);
  EXPECT_FALSE(unknown.mem_available);
}

TEST(PipelineFit, ThreadsFromAffinityQuotaAndOneTbb) {
  MachineLimits limits;
  limits.affinity_cpus = 224;
  EXPECT_EQ(DefaultThreads(limits), 224u);
  limits.tbb_threads = 64;
  EXPECT_EQ(DefaultThreads(limits), 64u);
  limits.cgroup_cpus = 2.5;  // rounded up
  EXPECT_EQ(DefaultThreads(limits), 3u);
  limits.cgroup_cpus = 0.1;
  EXPECT_EQ(DefaultThreads(limits), 1u);
  limits = MachineLimits{};
  limits.affinity_cpus = 1;
  limits.tbb_threads = 1;
  EXPECT_EQ(DefaultThreads(limits), 1u);
}

//! The default budget feeds every thread from 1 to 512 with codec state and
//! two slots, is never below 256 MiB where memory allows, and never above a
//! quarter of MemAvailable or of the cgroup's limit (floor 32 MiB).
TEST(PipelineFit, BudgetScalesWithThreadsWithinTheMemory) {
  PipelineOptions options;
  MachineLimits plenty;
  plenty.mem_available = 1ull << 40;
  for (unsigned threads : {1u, 2u, 16u, 164u, 165u, 224u, 512u}) {
    const uint64_t budget = DefaultMemoryBudget(plenty, options, threads);
    EXPECT_GE(budget, kMinDefaultBudget);
    EXPECT_EQ(ThreadsTheBudgetFeeds(threads, budget, budget / 8, CodecStateBytesPerThread(options), SlotBytes(options)),
              threads)
        << threads << " threads, budget " << budget;
  }
  EXPECT_EQ(DefaultMemoryBudget(plenty, options, 2), kMinDefaultBudget);

  MachineLimits container = plenty;
  container.cgroup_memory = 512 * kMiB;
  EXPECT_EQ(DefaultMemoryBudget(container, options, 224), 128 * kMiB);
  container.cgroup_memory = 64 * kMiB;
  EXPECT_EQ(DefaultMemoryBudget(container, options, 2), kDefaultBudgetFloor);
  MachineLimits small_host;
  small_host.mem_available = 400 * kMiB;
  EXPECT_EQ(DefaultMemoryBudget(small_host, options, 1), 100 * kMiB);
}

TEST(PipelineFit, ThreadsTheBudgetFeeds) {
  // fixed 10 + t × 3 + max(t, 2) × 5
  EXPECT_EQ(ThreadsTheBudgetFeeds(4, 1000, 10, 3, 5), 4u);
  EXPECT_EQ(ThreadsTheBudgetFeeds(100, 10 + 8 * 8, 10, 3, 5), 8u);
  EXPECT_EQ(ThreadsTheBudgetFeeds(100, 10 + 8 * 8 + 7, 10, 3, 5), 8u);
  EXPECT_EQ(ThreadsTheBudgetFeeds(1, 0, 10, 3, 5), 1u);  // not even one: the graph says why
  EXPECT_EQ(ThreadsTheBudgetFeeds(3, 10 + 3 + 10, 10, 3, 5), 1u);
}

}  // namespace
}  // namespace vramflow
