// SPDX-License-Identifier: MIT
// MachineLimits: the CPUs and memory this process may use, as the kernel
// limits them, read when a command or the plugin picks its defaults
// (streamer/pipeline_fit.h).
//
// CPUs: the affinity mask (taskset, a cpuset), the CPU quota of the
// process's cgroup and its ancestors (cgroup v2 `cpu.max`, v1
// `cpu.cfs_quota_us` / `cpu.cfs_period_us`), and what oneTBB will run (its
// default concurrency and `max_allowed_parallelism`). Memory: /proc/meminfo's
// MemAvailable and the memory limit of the cgroup and its ancestors (v2
// `memory.max`, v1 `memory.limit_in_bytes`). Anything that cannot be read is
// left unknown: these only shape defaults, never correctness.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vramflow {

struct MachineLimits {
  unsigned affinity_cpus = 0;             // CPUs in the affinity mask; 0: unknown
  std::optional<double> cgroup_cpus;      // the tightest CPU quota, in CPUs (1.5 = 150 ms per 100 ms)
  unsigned tbb_threads = 0;               // threads oneTBB runs by default; 0: unknown
  std::optional<uint64_t> mem_available;  // MemAvailable, bytes
  std::optional<uint64_t> cgroup_memory;  // the tightest cgroup memory limit, bytes
};

// Reads the limits of the calling process. `root` prefixes every path read
// under /proc and /sys (tests point it at a tree of fixture files); the
// affinity mask and oneTBB's limits are read only when `root` is empty.
MachineLimits ReadMachineLimits(const std::string& root = "");

// The parts, for tests.
// The tightest CPU quota and memory limit on the path from the process's
// cgroup (`proc_self_cgroup`: /proc/self/cgroup) to the root of each
// hierarchy mounted as `mountinfo` (/proc/self/mountinfo) says, the files read
// below `root`.
struct CgroupLimits {
  std::optional<double> cpus;
  std::optional<uint64_t> memory;
};
CgroupLimits ReadCgroupLimits(const std::string& root);
// MemAvailable from the text of /proc/meminfo.
std::optional<uint64_t> ParseMemAvailable(const std::string& meminfo);
// CPUs from the text of cgroup v2's cpu.max ("max 100000", "150000 100000").
std::optional<double> ParseCpuMax(const std::string& cpu_max);

}  // namespace vramflow
