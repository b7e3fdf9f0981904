// SPDX-License-Identifier: MIT
// Deadlines for blocking socket and pipe I/O: the one way transport/ waits
// for a peer with a time limit (socket.cc, fd_passing.cc).
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"

namespace vramflow {

// A point in time `timeout` from now; a negative timeout never expires.
class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds timeout);
  // The wait for poll(): -1 when infinite, else the remaining milliseconds rounded up.
  int PollMs() const;
  bool Expired() const;

 private:
  bool infinite_;
  std::chrono::steady_clock::time_point end_;
};

// Waits until `fd` reports one of `events` (or an error/hangup, which the
// next send/recv turns into a proper error). False when the deadline passed
// first.
Result<bool> WaitFor(int fd, short events, const Deadline& deadline, const std::string& what);

// "30 s", "0.5 s", "120 s", "0.05 s": seconds, exact to the millisecond and
// without trailing zeros, for messages.
std::string FormatSeconds(std::chrono::milliseconds timeout);

}  // namespace vramflow
