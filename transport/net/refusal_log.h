// SPDX-License-Identifier: MIT
// RefusalLog: a receiver's log of refused connections (failed TLS
// handshakes, foreign UNIX peers, TLS spoken to an --insecure receiver)
// that a flood of bad clients cannot flood.
//
// The first refusal is logged at once, with its peer address; after a line,
// further refusals within `interval` are only counted, and summed up in one
// line ("N more connections refused in the last T s; the latest: ...") by
// the next refusal after the interval or by Flush(). So a burst costs at
// most one line per interval plus its summary, and the first bad peer is
// always named.
//
// Thread-safe: connection threads call Refused(), the accept loop Flush().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace vramflow {

class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;
  // `log` may be empty (then nothing is logged); `prefix` starts every line
  // (the receiver's address).
  RefusalLog(std::function<void(const std::string&)> log, std::string prefix,
             std::chrono::milliseconds interval = std::chrono::milliseconds(1000));

  // A connection was refused; `why` says so, naming the peer.
  void Refused(const std::string& why);
  // Logs the summary of the refusals counted but not logged, once the
  // interval since the last line has passed (or now, `force`).
  void Flush(bool force = false);

 private:
  void FlushLocked(Clock::time_point now, bool force);  // caller holds mu_

  const std::function<void(const std::string&)> log_;
  const std::string prefix_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  bool logged_any_ = false;      // guarded by mu_
  Clock::time_point last_line_;  // guarded by mu_
  uint64_t unlogged_ = 0;        // guarded by mu_: refusals since the last line
  std::string latest_;           // guarded by mu_: the latest of those
};

}  // namespace vramflow
