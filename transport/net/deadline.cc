// SPDX-License-Identifier: MIT
#include "transport/net/deadline.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>

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
