// SPDX-License-Identifier: MIT
#include "streamer/machine/tbb_workers.h"

#include <oneapi/tbb/global_control.h>
#include <pthread.h>

#include <cstring>
#include <new>
#include <vector>

namespace vramflow {

Status JoinTbbWorkerThreads() {
  oneapi::tbb::task_scheduler_handle handle{oneapi::tbb::attach{}};
  if (!oneapi::tbb::finalize(handle, std::nothrow))
    return Status::Internal("oneTBB's worker threads could not be ended: its scheduler is still in use");
  return Status::Ok();
}

namespace {

// The probe's threads wait here until every one of them has been started, so
// that they all hold a thread (and a stack) at the same time, as oneTBB's
// workers will.
struct Gate {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  bool open = false;

  void Open() {
    pthread_mutex_lock(&mu);
    open = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }
};

void* WaitAtGate(void* arg) {
  Gate* gate = static_cast<Gate*>(arg);
  pthread_mutex_lock(&gate->mu);
  while (!gate->open) pthread_cond_wait(&gate->cv, &gate->mu);
  pthread_mutex_unlock(&gate->mu);
  return nullptr;
}

// Opens the gate, then joins the threads it holds, when it goes out of scope.
struct Probe {
  Gate gate;
  std::vector<pthread_t> threads;
  ~Probe() {
    gate.Open();
    for (pthread_t t : threads) pthread_join(t, nullptr);
  }
};

}  // namespace

Status CheckWorkersCanStart(unsigned workers) {
  const size_t stack = oneapi::tbb::global_control::active_value(oneapi::tbb::global_control::thread_stack_size);
  pthread_attr_t attr;
  if (int err = pthread_attr_init(&attr); err != 0) return Status::FromErrno("pthread_attr_init", err);
  struct DestroyAttr {
    pthread_attr_t* attr;
    ~DestroyAttr() { pthread_attr_destroy(attr); }
  } destroy_attr{&attr};
  if (int err = pthread_attr_setstacksize(&attr, stack); err != 0)
    return Status::FromErrno("setting a thread stack size of " + std::to_string(stack) + " bytes", err);
  Probe probe;
  probe.threads.reserve(workers);
  for (unsigned i = 0; i < workers; ++i) {
    pthread_t thread;
    if (int err = pthread_create(&thread, &attr, WaitAtGate, &probe.gate); err != 0)
      return Status::IoError("cannot start the " + std::to_string(workers) + " worker threads the pipeline needs (" +
                             std::to_string(i) + " started, then: " + std::strerror(err) + " [" +
                             std::to_string(stack >> 20) +
                             " MiB of stack each]); use fewer threads (-j) or raise "
                             "this process's limits (ulimit -u, ulimit -v)");
    probe.threads.push_back(thread);
  }
  return Status::Ok();
}

}  // namespace vramflow
