// SPDX-License-Identifier: MIT
// An LD_PRELOAD library for tests: makes a process see more CPUs than the
// machine has.
//
// With $VRAMFLOW_FAKE_CPUS=N, sched_getaffinity() reports CPUs 0..N-1 (as
// far as the caller's mask reaches; EINVAL when it is too small, as the
// kernel does), and sysconf(_SC_NPROCESSORS_ONLN / _CONF), get_nprocs() and
// get_nprocs_conf() (std::thread::hardware_concurrency's source) return N.
// oneTBB reads the affinity mask and sysconf itself, so it sees N too. The
// threads still run on the real CPUs. Without the variable it changes
// nothing. Lets tests run the defaults of a 224- or 512-CPU server here.
#include <dlfcn.h>
#include <sched.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace {

long FakeCpus() {
  const char* v = std::getenv("VRAMFLOW_FAKE_CPUS");
  return v ? std::atol(v) : 0;
}

}  // namespace

extern "C" int sched_getaffinity(pid_t pid, size_t size, cpu_set_t* mask) {
  using Function = int (*)(pid_t, size_t, cpu_set_t*);
  static const Function real = reinterpret_cast<Function>(::dlsym(RTLD_NEXT, "sched_getaffinity"));
  const long cpus = FakeCpus();
  if (cpus <= 0) return real(pid, size, mask);
  if (size * 8 < static_cast<size_t>(cpus)) {
    errno = EINVAL;
    return -1;
  }
  std::memset(mask, 0, size);
  for (long i = 0; i < cpus; ++i) CPU_SET_S(static_cast<size_t>(i), size, mask);
  return 0;
}

extern "C" long sysconf(int name) {
  using Function = long (*)(int);
  static const Function real = reinterpret_cast<Function>(::dlsym(RTLD_NEXT, "sysconf"));
  const long cpus = FakeCpus();
  if (cpus > 0 && (name == _SC_NPROCESSORS_ONLN || name == _SC_NPROCESSORS_CONF)) return cpus;
  return real(name);
}

extern "C" int get_nprocs() {
  using Function = int (*)();
  static const Function real = reinterpret_cast<Function>(::dlsym(RTLD_NEXT, "get_nprocs"));
  const long cpus = FakeCpus();
  return cpus > 0 ? static_cast<int>(cpus) : real();
}

extern "C" int get_nprocs_conf() {
  using Function = int (*)();
  static const Function real = reinterpret_cast<Function>(::dlsym(RTLD_NEXT, "get_nprocs_conf"));
  const long cpus = FakeCpus();
  return cpus > 0 ? static_cast<int>(cpus) : real();
}
