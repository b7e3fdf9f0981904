// SPDX-License-Identifier: MIT
#include "tools/cli/stop_signals.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "common/thread_start.h"

namespace vramflow {

StopSignals::StopSignals(std::function<void(int signal)> on_signal) : on_signal_(std::move(on_signal)) {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals_, &old_mask_);
  signal_fd_.Reset(::signalfd(-1, &signals_, SFD_CLOEXEC));
  wake_fd_.Reset(::eventfd(0, EFD_CLOEXEC));
  if (!signal_fd_.valid() || !wake_fd_.valid()) {
    status_ = Status::FromErrno("creating the signal watcher's descriptors", errno);
    return;
  }
  status_ = StartThread(&thread_, "taking SIGINT, SIGTERM and SIGHUP", [this] { Watch(); });
}

StopSignals::~StopSignals() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_.get(), &one, sizeof one);
    thread_.join();
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

// Waits for a signal, or for the destructor's wake-up.
void StopSignals::Watch() {
  for (;;) {
    pollfd fds[2] = {{signal_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    signalfd_siginfo info;
    if (fds[0].revents && ::read(signal_fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info))
      on_signal_(static_cast<int>(info.ssi_signo));
  }
}

}  // namespace vramflow
