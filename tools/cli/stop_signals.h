// SPDX-License-Identifier: MIT
// StopSignals: SIGINT, SIGTERM and SIGHUP, taken on a thread of their own,
// so that a command can stop cleanly (tools/cli/interrupt.h), discarding what it
// had half written, instead of dying with temporary files left behind.
//
// The constructor blocks the three signals in the calling thread, and so in every
// thread it starts afterwards: construct it before any other thread. The
// destructor joins its thread and restores the signal mask. A watcher
// thread that cannot be started is reported by status().
#pragma once

#include <signal.h>

#include <functional>
#include <thread>

#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

class StopSignals {
 public:
  // `on_signal` runs on the watcher's thread, once per signal received.
  explicit StopSignals(std::function<void(int signal)> on_signal);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // Not OK when the watcher thread could not be started: no signal is then
  // taken (all three stay blocked until the destructor).
  const Status& status() const { return status_; }

 private:
  void Watch();

  std::function<void(int)> on_signal_;
  sigset_t signals_;
  sigset_t old_mask_;
  UniqueFd signal_fd_;  // signalfd: the blocked signals, read by the watcher
  UniqueFd wake_fd_;    // eventfd: the destructor ends the watcher's wait
  Status status_;
  std::thread thread_;
};

}  // namespace vramflow
