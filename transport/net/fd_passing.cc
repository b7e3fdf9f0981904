// SPDX-License-Identifier: MIT
#include "transport/net/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>

#include "transport/net/deadline.h"

namespace vramflow {
namespace {

using std::chrono::milliseconds;

// Room for the most fds one message carries.
constexpr size_t kControlBytes = CMSG_SPACE(kMaxFdsPerMessage * sizeof(int));

// Moves the fds of every SCM_RIGHTS message in `msg` to *out.
void TakeFds(msghdr* msg, std::vector<UniqueFd>* out) {
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      out->emplace_back(fd);
    }
  }
}

}  // namespace

Status SendWithFds(int socket, std::span<const uint8_t> data, std::span<const int> fds, milliseconds timeout,
                   const std::string& what) {
  if (data.empty()) return Status::InvalidArgument(what + ": fds need at least one data byte to ride on");
  if (fds.size() > kMaxFdsPerMessage) {
    return Status::InvalidArgument(what + ": " + std::to_string(fds.size()) + " fds in one message (at most " +
                                   std::to_string(kMaxFdsPerMessage) + ")");
  }
  alignas(cmsghdr) uint8_t control[kControlBytes];
  size_t done = 0;
  bool fds_sent = fds.empty();
  std::optional<Deadline> deadline;  // started when the socket has no room; reset by progress
  while (done < data.size()) {
    iovec iov{const_cast<uint8_t*>(data.data() + done), data.size() - done};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds_sent) {
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
      std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    }
    ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      fds_sent = true;  // they went with the first byte sent
      deadline.reset();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return Status::FromErrno(what, errno);
    if (!deadline) deadline.emplace(timeout);
    VF_ASSIGN_OR_RETURN(bool ready, WaitFor(socket, POLLOUT, *deadline, what));
    if (!ready) return Status::TimedOut(what + ": peer accepted no data for " + FormatSeconds(timeout) + " (stopped reading?)");
  }
  return Status::Ok();
}

Status RecvWithFds(int socket, std::span<uint8_t> data, std::vector<UniqueFd>* fds, milliseconds timeout,
                   const std::string& what) {
  alignas(cmsghdr) uint8_t control[kControlBytes];
  size_t done = 0;
  std::optional<Deadline> deadline;
  while (done < data.size()) {
    iovec iov{data.data() + done, data.size() - done};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n > 0) {
      std::vector<UniqueFd> arrived;
      TakeFds(&msg, &arrived);
      if (msg.msg_flags & MSG_CTRUNC) {  // `arrived` closes what came
        return Status::Corruption(what + ": the kernel dropped fds of a message (more than " +
                                  std::to_string(kMaxFdsPerMessage) + ", or the fd limit was reached)");
      }
      for (UniqueFd& fd : arrived) fds->push_back(std::move(fd));
      done += static_cast<size_t>(n);
      deadline.reset();
      continue;
    }
    if (n == 0) {
      return Status::Truncated(what + ": peer closed the connection after " + std::to_string(done) + " of " +
                               std::to_string(data.size()) + " bytes");
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Status::FromErrno(what, errno);
    if (!deadline) deadline.emplace(timeout);
    VF_ASSIGN_OR_RETURN(bool ready, WaitFor(socket, POLLIN, *deadline, what));
    if (!ready) {
      std::string progress =
          done > 0 ? " (after " + std::to_string(done) + " of " + std::to_string(data.size()) + " bytes)" : "";
      return Status::TimedOut(what + ": nothing received for " + FormatSeconds(timeout) + progress);
    }
  }
  return Status::Ok();
}

}  // namespace vramflow
