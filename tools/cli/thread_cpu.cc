// SPDX-License-Identifier: MIT
#include "tools/cli/thread_cpu.h"

#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "streamer/device/copy_rings.h"

namespace vramflow {
namespace {

double Seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; }

// utime + stime of one thread from /proc/self/task/TID/stat, in seconds; the
// fields after the parenthesised name are 14 and 15 (proc(5)). Clock ticks
// (10 ms): the fallback where the thread's CPU clock cannot be read.
Result<double> ThreadTickSeconds(const std::string& task_dir) {
  std::ifstream f(task_dir + "/stat");
  if (!f) return Status::IoError("cannot open " + task_dir + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return Status::Corruption(task_dir + "/stat has no command name");
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The CPU time of thread `tid` of this process, to the nanosecond: its
// scheduler clock, named as pthread_getcpuclockid names it (the kernel's
// per-thread CPU clock id: ~tid << 3, CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED),
// since the ring threads are not ours to hold a pthread_t of.
Result<double> ThreadSeconds(const std::string& task_dir, pid_t tid) {
  const clockid_t clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6u);
  timespec t{};
  if (::clock_gettime(clock, &t) == 0) return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  return ThreadTickSeconds(task_dir);
}

}  // namespace

Result<CpuUse> ProcessCpuUse() {
  CpuUse use;
  use.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  rusage self{};
  if (::getrusage(RUSAGE_SELF, &self) != 0) return Status::FromErrno("getrusage", errno);
  use.total_seconds = Seconds(self.ru_utime) + Seconds(self.ru_stime);
  DIR* tasks = ::opendir("/proc/self/task");
  if (!tasks) return Status::FromErrno("opening /proc/self/task", errno);
  while (dirent* e = ::readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = std::string("/proc/self/task/") + e->d_name;
    std::ifstream comm(dir + "/comm");
    std::string name;
    if (!std::getline(comm, name) || name != kDmaRingThreadName) continue;  // gone, or not a ring
    Result<double> seconds = ThreadSeconds(dir, static_cast<pid_t>(std::atoi(e->d_name)));
    if (seconds.ok()) use.dma_ring_seconds += *seconds;  // a ring that just exited counts in the total only
  }
  ::closedir(tasks);
  return use;
}

unsigned UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace vramflow
