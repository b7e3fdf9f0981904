// SPDX-License-Identifier: MIT
#include "transport/net/systemd_socket.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

namespace vramflow {
namespace {

constexpr int kFirstPassedFd = 3;  // SD_LISTEN_FDS_START
constexpr const char* kHint =
    " (--listen systemd: takes the socket systemd passes to a socket-activated service: "
    "start it from a .socket unit or with systemd-socket-activate)";

// A decimal number without sign, spaces or overflow; nullopt otherwise.
std::optional<long> ParseCount(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  long value = 0;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') return std::nullopt;
    if (value > 1000000) return std::nullopt;
    value = value * 10 + (*c - '0');
  }
  return value;
}

}  // namespace

Result<UniqueFd> TakeSystemdListenSocket() {
  const char* pid_text = std::getenv("LISTEN_PID");
  const char* fds_text = std::getenv("LISTEN_FDS");
  if (pid_text == nullptr || fds_text == nullptr)
    return Status::InvalidArgument(std::string("no socket was passed: $") +
                                   (pid_text == nullptr ? "LISTEN_PID" : "LISTEN_FDS") + " is not set" + kHint);
  std::optional<long> pid = ParseCount(pid_text);
  if (!pid) return Status::InvalidArgument(std::string("$LISTEN_PID='") + pid_text + "' is not a process id" + kHint);
  if (*pid != static_cast<long>(::getpid()))
    return Status::InvalidArgument(std::string("the passed socket is not for this process: $LISTEN_PID=") + pid_text +
                                   ", this process is " + std::to_string(::getpid()) + kHint);
  std::optional<long> count = ParseCount(fds_text);
  if (!count || *count < 1)
    return Status::InvalidArgument(std::string("$LISTEN_FDS='") + fds_text + "' passes no socket" + kHint);
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  for (long fd = kFirstPassedFd; fd < kFirstPassedFd + *count; ++fd) {
    int flags = ::fcntl(static_cast<int>(fd), F_GETFD);
    if (flags < 0)
      return Status::FromErrno("passed socket fd " + std::to_string(fd) + " ($LISTEN_FDS=" + fds_text + ")", errno);
    if (::fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC) != 0)
      return Status::FromErrno("passed socket fd " + std::to_string(fd) + ": close-on-exec", errno);
  }
  return UniqueFd(kFirstPassedFd);
}

}  // namespace vramflow
