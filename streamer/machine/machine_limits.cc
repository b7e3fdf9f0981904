// SPDX-License-Identifier: MIT
#include "streamer/machine/machine_limits.h"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace vramflow {
namespace {

std::optional<std::string> ReadText(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::optional<uint64_t> ParseUnsigned(const std::string& text) {
  std::istringstream in(text);
  unsigned long long v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

// One cgroup filesystem mount from /proc/self/mountinfo.
struct CgroupMount {
  std::string root;         // the cgroup path mounted there
  std::string mount_point;  // where
};

// The mount of cgroup v2 (`controller` empty) or of the v1 hierarchy that
// holds `controller`.
std::optional<CgroupMount> FindMount(const std::string& mountinfo, const std::string& controller) {
  std::istringstream lines(mountinfo);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 6 || dash == f.end() || f.end() - dash < 4) continue;
    const std::string& type = dash[1];
    const std::string& super_options = dash[3];
    if (controller.empty() ? type != "cgroup2" : type != "cgroup") continue;
    if (!controller.empty()) {
      std::vector<std::string> options = Split(super_options, ',');
      if (std::find(options.begin(), options.end(), controller) == options.end()) continue;
    }
    return CgroupMount{f[3], f[4]};
  }
  return std::nullopt;
}

// The directories of `path`'s cgroup and of each ancestor up to the mount,
// under `root`; empty when `path` is not below what is mounted.
std::vector<std::string> CgroupDirs(const std::string& root, const CgroupMount& mount, std::string path) {
  std::string below;
  if (mount.root == "/") {
    below = path;
  } else if (path == mount.root || path.rfind(mount.root + "/", 0) == 0) {
    below = path.substr(mount.root.size());
  } else {
    return {};
  }
  std::vector<std::string> dirs;
  for (;;) {
    while (!below.empty() && below.back() == '/') below.pop_back();
    dirs.push_back(root + mount.mount_point + below);
    if (below.empty()) break;
    below.resize(below.rfind('/'));
  }
  return dirs;
}

void Tighten(std::optional<double>* limit, std::optional<double> value) {
  if (value && (!*limit || *value < **limit)) *limit = value;
}
void Tighten(std::optional<uint64_t>* limit, std::optional<uint64_t> value) {
  if (value && (!*limit || *value < **limit)) *limit = value;
}

// cgroup v1's memory.limit_in_bytes reads as a page-rounded LONG_MAX when unset.
constexpr uint64_t kNoMemoryLimit = uint64_t{1} << 62;

void ReadV2(const std::vector<std::string>& dirs, CgroupLimits* limits) {
  for (const std::string& dir : dirs) {
    if (auto text = ReadText(dir + "/cpu.max")) Tighten(&limits->cpus, ParseCpuMax(*text));
    if (auto text = ReadText(dir + "/memory.max"); text && text->rfind("max", 0) != 0)
      Tighten(&limits->memory, ParseUnsigned(*text));
  }
}

void ReadV1Cpu(const std::vector<std::string>& dirs, CgroupLimits* limits) {
  for (const std::string& dir : dirs) {
    auto quota = ReadText(dir + "/cpu.cfs_quota_us"), period = ReadText(dir + "/cpu.cfs_period_us");
    if (!quota || !period) continue;
    std::istringstream q(*quota);
    long long quota_us = -1;
    std::optional<uint64_t> period_us = ParseUnsigned(*period);
    if (q >> quota_us && quota_us > 0 && period_us && *period_us > 0)
      Tighten(&limits->cpus, static_cast<double>(quota_us) / static_cast<double>(*period_us));
  }
}

void ReadV1Memory(const std::vector<std::string>& dirs, CgroupLimits* limits) {
  for (const std::string& dir : dirs) {
    if (auto text = ReadText(dir + "/memory.limit_in_bytes")) {
      std::optional<uint64_t> limit = ParseUnsigned(*text);
      if (limit && *limit < kNoMemoryLimit) Tighten(&limits->memory, limit);
    }
  }
}

}  // namespace

std::optional<double> ParseCpuMax(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  unsigned long long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period == 0) return std::nullopt;
  std::optional<uint64_t> q = ParseUnsigned(quota);
  if (!q || *q == 0) return std::nullopt;
  return static_cast<double>(*q) / static_cast<double>(period);
}

std::optional<uint64_t> ParseMemAvailable(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream in(line.substr(13));
    unsigned long long kib = 0;
    std::string unit;
    if (!(in >> kib >> unit) || unit != "kB") return std::nullopt;
    return uint64_t{kib} * 1024;
  }
  return std::nullopt;
}

CgroupLimits ReadCgroupLimits(const std::string& root) {
  CgroupLimits limits;
  std::optional<std::string> cgroups = ReadText(root + "/proc/self/cgroup");
  std::optional<std::string> mountinfo = ReadText(root + "/proc/self/mountinfo");
  if (!cgroups || !mountinfo) return limits;
  std::istringstream lines(*cgroups);
  std::string line;
  while (std::getline(lines, line)) {
    // hierarchy-ID:controller-list:cgroup-path
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      if (auto mount = FindMount(*mountinfo, "")) ReadV2(CgroupDirs(root, *mount, path), &limits);
      continue;
    }
    for (const std::string& controller : Split(controllers, ',')) {
      if (controller != "cpu" && controller != "memory") continue;
      std::optional<CgroupMount> mount = FindMount(*mountinfo, controller);
      if (!mount) continue;
      std::vector<std::string> dirs = CgroupDirs(root, *mount, path);
      if (controller == "cpu") ReadV1Cpu(dirs, &limits);
      if (controller == "memory") ReadV1Memory(dirs, &limits);
    }
  }
  return limits;
}

MachineLimits ReadMachineLimits(const std::string& root) {
  MachineLimits limits;
  if (root.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0) limits.affinity_cpus = static_cast<unsigned>(CPU_COUNT(&set));
    const int tbb_default = oneapi::tbb::info::default_concurrency();
    const size_t tbb_allowed =
        oneapi::tbb::global_control::active_value(oneapi::tbb::global_control::max_allowed_parallelism);
    limits.tbb_threads =
        static_cast<unsigned>(std::min<size_t>(std::max(tbb_default, 1), std::max<size_t>(tbb_allowed, 1)));
  }
  CgroupLimits cgroup = ReadCgroupLimits(root);
  limits.cgroup_cpus = cgroup.cpus;
  limits.cgroup_memory = cgroup.memory;
  if (auto meminfo = ReadText(root + "/proc/meminfo")) limits.mem_available = ParseMemAvailable(*meminfo);
  return limits;
}

}  // namespace vramflow
