// SPDX-License-Identifier: MIT
// An LD_PRELOAD library for tests: caps the threads a process may run.
//
// With $VRAMFLOW_MAX_THREADS=N, at most N threads created by the process
// (the main thread not counted) run at once; pthread_create() fails with
// EAGAIN beyond that, as it does for a process at its `ulimit -u` or out of
// address space for stacks (`ulimit -v`). A thread counts until its start
// routine returns (threads that end with pthread_exit() keep counting).
// Without the variable it changes nothing. It reproduces thread creation
// failures deterministically, where rlimits depend on the machine, the
// build and the user (root ignores RLIMIT_NPROC). Thread-safe.
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

namespace {

std::atomic<long> live_threads{0};

struct Start {
  void* (*routine)(void*);
  void* arg;
};

void* CountedStart(void* p) {
  Start start = *static_cast<Start*>(p);
  std::free(p);
  void* result = start.routine(start.arg);
  --live_threads;
  return result;
}

using CreateFunction = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*routine)(void*), void* arg) {
  static const CreateFunction real = reinterpret_cast<CreateFunction>(::dlsym(RTLD_NEXT, "pthread_create"));
  const char* cap = std::getenv("VRAMFLOW_MAX_THREADS");
  if (cap == nullptr) return real(thread, attr, routine, arg);
  if (live_threads.fetch_add(1) >= std::atol(cap)) {
    --live_threads;
    return EAGAIN;
  }
  auto* start = static_cast<Start*>(std::malloc(sizeof(Start)));
  if (start == nullptr) {
    --live_threads;
    return EAGAIN;
  }
  *start = Start{routine, arg};
  const int err = real(thread, attr, CountedStart, start);
  if (err != 0) {
    std::free(start);
    --live_threads;
  }
  return err;
}
