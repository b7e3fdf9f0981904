// SPDX-License-Identifier: MIT
#include "tools/cli/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "tools/cli/exit_codes.h"

namespace vramflow {
namespace {

// The signal being handled, for the handlers below (which may only use
// async-signal-safe calls): the process's own signal state, so process-wide.
volatile sig_atomic_t first_signal = 0;

// A second SIGINT, SIGTERM or SIGHUP: exit at once with its status.
void ExitOnSecondSignal(int signal) { ::_exit(128 + signal); }
// The cleanup took longer than kCleanupDeadline: exit with the first's.
void ExitOnDeadline(int) { ::_exit(128 + first_signal); }

void Handle(int signal, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  ::sigaction(signal, &action, nullptr);
}

}  // namespace

int ExitStatusForSignal(int signal) {
  switch (signal) {
    case SIGHUP:
      return kExitSighup;
    case SIGINT:
      return kExitSigint;
    case SIGTERM:
      return kExitSigterm;
    default:
      return 128 + signal;
  }
}

Interrupts::Interrupts(std::string command)
    : command_(std::move(command)), watcher_([this](int signal) { OnSignal(signal); }) {}

Interrupts::~Interrupts() {
  // The watcher exits the process; the command's thread only waits for it.
  while (interrupted()) ::pause();
}

void Interrupts::OnSignal(int signal) {
  if (signal_.exchange(signal) != 0) return;
  first_signal = signal;
  // From here on, a second signal (or the deadline) ends the process at once,
  // in this thread: the only one that does not block them.
  Handle(SIGINT, ExitOnSecondSignal);
  Handle(SIGTERM, ExitOnSecondSignal);
  Handle(SIGHUP, ExitOnSecondSignal);
  Handle(SIGALRM, ExitOnDeadline);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGALRM);
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::alarm(static_cast<unsigned>(kCleanupDeadline.count()));
  std::fprintf(stderr, "vramflow %s: interrupted by %s (SIG%s): cleaning up (a second signal exits at once)\n",
               command_.c_str(), strsignal(signal), sigabbrev_np(signal));
  cleanup_.Run("interrupted by SIG" + std::string(sigabbrev_np(signal)));
  std::fflush(stderr);
  ::_exit(ExitStatusForSignal(signal));
}

}  // namespace vramflow
