// SPDX-License-Identifier: MIT
// Interrupts: how every `vramflow` command answers SIGINT, SIGTERM and SIGHUP.
//
// Constructed once per command, before any other thread starts (it blocks
// the three signals, so every later thread inherits the mask), it takes them
// on a thread of its own (StopSignals). On the first, it says so on stderr,
// runs the command's CleanupRegistry (temporary files and staging
// directories removed, multipart uploads aborted, a network peer told), and
// exits with 128 + the signal's number (129, 130, 143: tools/cli/exit_codes.h).
// The cleanup has a deadline (kCleanupDeadline; the network may be gone); a
// second signal meanwhile exits at once.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "common/cleanup_registry.h"
#include "tools/cli/stop_signals.h"

namespace vramflow {

inline constexpr std::chrono::seconds kCleanupDeadline{10};

class Interrupts {
 public:
  explicit Interrupts(std::string command);
  // When a signal is being handled, waits for its exit instead of returning
  // (the command's own error path must not report a cleanup as a failure).
  ~Interrupts();
  Interrupts(const Interrupts&) = delete;
  Interrupts& operator=(const Interrupts&) = delete;

  // Where the command registers what to undo; outlives every thread of it.
  CleanupRegistry* cleanup() { return &cleanup_; }
  // Not OK when the watcher thread could not be started.
  const Status& status() const { return watcher_.status(); }
  // True once a signal arrived (the process is about to exit).
  bool interrupted() const { return signal_.load() != 0; }

 private:
  void OnSignal(int signal);

  std::string command_;
  CleanupRegistry cleanup_;
  std::atomic<int> signal_{0};
  StopSignals watcher_;  // last: started once the rest exists
};

// 128 + signal, as a shell reports a process a signal ended.
int ExitStatusForSignal(int signal);

}  // namespace vramflow
