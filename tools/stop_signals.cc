#include "tools/stop_signals.h"

#include <pthread.h>

#include <cerrno>
#include <ctime>

#include "common/thread_start.h"

namespace vramflow {

StopSignals::StopSignals(std::function<void(int signal)> on_signal) : on_signal_(std::move(on_signal)) {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals_, &old_mask_);
  status_ = StartThread(&thread_, "taking SIGINT, SIGTERM and SIGHUP", [this] { Watch(); });
}

StopSignals::~StopSignals() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

// Polls, so that the destructor needs no signal of its own to end the wait.
void StopSignals::Watch() {
  const timespec tick{0, 100 * 1000 * 1000};
  while (!done_) {
    const int signal = sigtimedwait(&signals_, nullptr, &tick);
    if (signal > 0) on_signal_(signal);
  }
}

}  // namespace vramflow
