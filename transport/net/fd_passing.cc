// SPDX-License-Identifier: MIT
#include "transport/net/fd_passing.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

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
  bool fds_sent = fds.empty();
  return SendWithDeadline(socket, data, timeout, what, [&](std::span<const uint8_t> rest) -> Result<ssize_t> {
    iovec iov{const_cast<uint8_t*>(rest.data()), rest.size()};
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
    if (n < 0) return -errno;
    if (n > 0) fds_sent = true;  // they went with the first byte sent
    return n;
  });
}

Status RecvWithFds(int socket, std::span<uint8_t> data, std::vector<UniqueFd>* fds, milliseconds timeout,
                   const std::string& what) {
  alignas(cmsghdr) uint8_t control[kControlBytes];
  return ReceiveWithDeadline(socket, data, timeout, what, [&](std::span<uint8_t> rest) -> Result<ssize_t> {
    iovec iov{rest.data(), rest.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) return -errno;
    if (n == 0) return n;
    std::vector<UniqueFd> arrived;
    TakeFds(&msg, &arrived);
    if (msg.msg_flags & MSG_CTRUNC) {  // `arrived` closes what came
      return Status::Corruption(what + ": the kernel dropped fds of a message (more than " +
                                std::to_string(kMaxFdsPerMessage) + ", or the fd limit was reached)");
    }
    for (UniqueFd& fd : arrived) fds->push_back(std::move(fd));
    return n;
  });
}

}  // namespace vramflow
