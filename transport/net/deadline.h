// SPDX-License-Identifier: MIT
// Deadlines for blocking socket and pipe I/O: the one way transport/ waits
// for a peer with a time limit (socket.cc, fd_passing.cc).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
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

// One non-blocking send or receive (MSG_DONTWAIT) of the bytes still to go:
// how many it moved (> 0), 0 when it moved none (a receive: the peer closed),
// or -errno; or an error of its own, which ends the transfer.
using SendStep = std::function<Result<ssize_t>(std::span<const uint8_t> rest)>;
using ReceiveStep = std::function<Result<ssize_t>(std::span<uint8_t> rest)>;

// Sends all of `data` with `send`, waiting for `fd` to have room whenever it
// has none. kTimedOut when no byte could be sent for `timeout` (each byte
// sent starts the wait anew; negative: no limit), errno's status on any
// other error.
Status SendWithDeadline(int fd, std::span<const uint8_t> data, std::chrono::milliseconds timeout,
                        const std::string& what, const SendStep& send);
// Fills `data` with `receive`, waiting for `fd` to be readable whenever
// nothing is there. kTruncated when the peer closes first (the message says
// after how many bytes), kTimedOut as SendWithDeadline.
Status ReceiveWithDeadline(int fd, std::span<uint8_t> data, std::chrono::milliseconds timeout, const std::string& what,
                           const ReceiveStep& receive);

// "30 s", "0.5 s", "120 s", "0.05 s": seconds, exact to the millisecond and
// without trailing zeros, for messages.
std::string FormatSeconds(std::chrono::milliseconds timeout);

}  // namespace vramflow
