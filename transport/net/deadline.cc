// SPDX-License-Identifier: MIT
#include "transport/net/deadline.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace vramflow {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Deadline::Deadline(milliseconds timeout) : infinite_(timeout.count() < 0) {
  // Clamp so that adding to now() cannot overflow the clock's representation.
  end_ = Clock::now() + std::min<milliseconds>(timeout, std::chrono::hours(24 * 365));
}

int Deadline::PollMs() const {
  if (infinite_) return -1;
  auto left = std::chrono::ceil<milliseconds>(end_ - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

bool Deadline::Expired() const { return !infinite_ && Clock::now() >= end_; }

Result<bool> WaitFor(int fd, short events, const Deadline& deadline, const std::string& what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, deadline.PollMs());
    if (r > 0) return true;
    if (r == 0) {
      if (deadline.Expired()) return false;
      continue;  // woke up a little early (rounding): wait out the rest
    }
    if (errno != EINTR) return Status::FromErrno(what + ": poll", errno);
  }
}

Status SendWithDeadline(int fd, std::span<const uint8_t> data, milliseconds timeout, const std::string& what,
                        const SendStep& send) {
  size_t done = 0;
  std::optional<Deadline> deadline;  // started when the socket first has no room; reset by progress
  while (done < data.size()) {
    VF_ASSIGN_OR_RETURN(ssize_t n, send(data.subspan(done)));
    if (n > 0) {
      done += static_cast<size_t>(n);
      deadline.reset();
      continue;
    }
    if (n == -EINTR) continue;
    if (n < 0 && n != -EAGAIN && n != -EWOULDBLOCK) return Status::FromErrno(what, static_cast<int>(-n));
    if (!deadline) deadline.emplace(timeout);
    VF_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, POLLOUT, *deadline, what));
    if (!ready)
      return Status::TimedOut(what + ": peer accepted no data for " + FormatSeconds(timeout) + " (stopped reading?)");
  }
  return Status::Ok();
}

Status ReceiveWithDeadline(int fd, std::span<uint8_t> data, milliseconds timeout, const std::string& what,
                           const ReceiveStep& receive) {
  size_t done = 0;
  std::optional<Deadline> deadline;  // started when nothing is there; reset by progress
  while (done < data.size()) {
    VF_ASSIGN_OR_RETURN(ssize_t n, receive(data.subspan(done)));
    if (n > 0) {
      done += static_cast<size_t>(n);
      deadline.reset();
      continue;
    }
    if (n == 0)
      return Status::Truncated(what + ": peer closed the connection after " + std::to_string(done) + " of " +
                               std::to_string(data.size()) + " bytes");
    if (n == -EINTR) continue;
    if (n != -EAGAIN && n != -EWOULDBLOCK) return Status::FromErrno(what, static_cast<int>(-n));
    if (!deadline) deadline.emplace(timeout);
    VF_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, POLLIN, *deadline, what));
    if (!ready) {
      std::string progress =
          done > 0 ? " (after " + std::to_string(done) + " of " + std::to_string(data.size()) + " bytes)" : "";
      return Status::TimedOut(what + ": nothing received for " + FormatSeconds(timeout) + progress);
    }
  }
  return Status::Ok();
}

std::string FormatSeconds(milliseconds timeout) {
  const long long ms = timeout.count();
  char text[48];
  std::snprintf(text, sizeof(text), "%s%lld.%03lld", ms < 0 ? "-" : "", std::llabs(ms) / 1000, std::llabs(ms) % 1000);
  std::string s(text);
  while (s.ends_with('0')) s.pop_back();
  if (s.ends_with('.')) s.pop_back();
  return s + " s";
}

}  // namespace vramflow
