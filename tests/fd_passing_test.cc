// SPDX-License-Identifier: MIT
#include "transport/net/fd_passing.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace vramflow {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kTimeout{2000};

struct SocketPair {
  UniqueFd a, b;
};
SocketPair MakePair() {
  int sv[2] = {-1, -1};
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

UniqueFd Memfd(const std::string& contents) {
  UniqueFd fd(::memfd_create("fd-passing-test", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::pwrite(fd.get(), contents.data(), contents.size(), 0), static_cast<ssize_t>(contents.size()));
  return fd;
}

bool SameFile(int a, int b) {
  struct stat sa {
  }, sb{};
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::string ReadAll(int fd, size_t n) {
  std::string s(n, '\0');
  EXPECT_EQ(::pread(fd, s.data(), n, 0), static_cast<ssize_t>(n));
  return s;
}

//! Fds arrive as new, close-on-exec descriptors of the same open files, with the data intact.
TEST(FdPassing, FdsArriveAndReferToTheSameFiles) {
  SocketPair p = MakePair();
  UniqueFd one = Memfd("first file"), two = Memfd("second");
  const std::vector<uint8_t> data = {1, 2, 3, 4, 5};
  const int fds[] = {one.get(), two.get()};
  ASSERT_TRUE(SendWithFds(p.a.get(), data, fds, kTimeout, "send").ok());

  std::vector<uint8_t> got(data.size());
  std::vector<UniqueFd> received;
  Status s = RecvWithFds(p.b.get(), got, &received, kTimeout, "recv");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got, data);
  ASSERT_EQ(received.size(), 2u);
  EXPECT_NE(received[0].get(), one.get());
  EXPECT_TRUE(SameFile(received[0].get(), one.get()));
  EXPECT_TRUE(SameFile(received[1].get(), two.get()));
  EXPECT_EQ(ReadAll(received[0].get(), 10), "first file");
  EXPECT_EQ(ReadAll(received[1].get(), 6), "second");
  EXPECT_TRUE(::fcntl(received[0].get(), F_GETFD) & FD_CLOEXEC);
  // A write through the received fd shows in the sender's file: one file, not a copy.
  ASSERT_EQ(::pwrite(received[1].get(), "S", 1, 0), 1);
  EXPECT_EQ(ReadAll(two.get(), 6), "Second");
}

//! Several messages, each with its own fds (a full batch among them), arrive in order; data-only
//! messages between them carry none.
TEST(FdPassing, SeveralMessagesOfFds) {
  SocketPair p = MakePair();
  std::vector<UniqueFd> files;
  std::vector<int> batch;
  for (size_t i = 0; i < kMaxFdsPerMessage; ++i) {
    files.push_back(Memfd(std::to_string(i) + "f"));
    batch.push_back(files.back().get());
  }
  UniqueFd last = Memfd("last");
  std::thread sender([&] {
    const uint8_t header[] = {'h', 'd', 'r'};
    EXPECT_TRUE(SendWithFds(p.a.get(), header, batch, kTimeout, "batch").ok());
    const std::vector<uint8_t> body(100000, 7);  // larger than one socket buffer write, no fds
    EXPECT_TRUE(SendWithFds(p.a.get(), body, {}, kTimeout, "body").ok());
    const uint8_t tail[] = {'t'};
    const int one[] = {last.get()};
    EXPECT_TRUE(SendWithFds(p.a.get(), tail, one, kTimeout, "tail").ok());
  });
  std::vector<UniqueFd> received;
  std::vector<uint8_t> header(3), body(100000), tail(1);
  ASSERT_TRUE(RecvWithFds(p.b.get(), header, &received, kTimeout, "batch").ok());
  ASSERT_EQ(received.size(), kMaxFdsPerMessage);
  ASSERT_TRUE(RecvWithFds(p.b.get(), body, &received, kTimeout, "body").ok());
  EXPECT_EQ(received.size(), kMaxFdsPerMessage);
  EXPECT_EQ(body, std::vector<uint8_t>(100000, 7));
  ASSERT_TRUE(RecvWithFds(p.b.get(), tail, &received, kTimeout, "tail").ok());
  sender.join();
  ASSERT_EQ(received.size(), kMaxFdsPerMessage + 1);
  for (size_t i = 0; i < kMaxFdsPerMessage; ++i) EXPECT_TRUE(SameFile(received[i].get(), files[i].get())) << i;
  EXPECT_TRUE(SameFile(received.back().get(), last.get()));
  EXPECT_EQ(tail[0], 't');
}

//! More fds than one message may carry, or no data byte to carry them, is refused before sending.
TEST(FdPassing, RefusesOversizedOrEmptyMessages) {
  SocketPair p = MakePair();
  std::vector<int> too_many(kMaxFdsPerMessage + 1, p.a.get());
  const uint8_t byte[] = {0};
  EXPECT_EQ(SendWithFds(p.a.get(), byte, too_many, kTimeout, "x").code(), Status::Code::kInvalidArgument);
  const int one[] = {p.a.get()};
  EXPECT_EQ(SendWithFds(p.a.get(), {}, one, kTimeout, "x").code(), Status::Code::kInvalidArgument);
}

size_t OpenFdCount() {
  size_t n = 0;
  for (int fd = 0; fd < 4096; ++fd) n += ::fcntl(fd, F_GETFD) >= 0 ? 1 : 0;
  return n;
}

//! A message with more fds than the receiver makes room for (the kernel's SCM_MAX_FD is 253) is
//! Corruption, and the fds that did arrive are closed, not leaked.
TEST(FdPassing, TruncatedFdsAreReportedAndClosed) {
  SocketPair p = MakePair();
  constexpr size_t kCount = 253;
  std::vector<int> fds(kCount, p.a.get());
  alignas(cmsghdr) uint8_t control[CMSG_SPACE(kCount * sizeof(int))] = {};
  uint8_t byte = 'x';
  iovec iov{&byte, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(kCount * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds.data(), kCount * sizeof(int));
  ASSERT_EQ(::sendmsg(p.a.get(), &msg, 0), 1) << std::strerror(errno);

  const size_t before = OpenFdCount();
  std::vector<uint8_t> got(1);
  std::vector<UniqueFd> received;
  Status s = RecvWithFds(p.b.get(), got, &received, kTimeout, "too many");
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_TRUE(received.empty());
  EXPECT_EQ(OpenFdCount(), before);
}

//! A peer that closes mid-message is kTruncated (saying how far it got); sending to it is an I/O error.
TEST(FdPassing, PeerCloses) {
  SocketPair p = MakePair();
  const uint8_t two[] = {1, 2};
  ASSERT_TRUE(SendWithFds(p.a.get(), two, {}, kTimeout, "send").ok());
  p.a.Reset();
  std::vector<uint8_t> want(4);
  std::vector<UniqueFd> fds;
  Status s = RecvWithFds(p.b.get(), want, &fds, kTimeout, "reply");
  EXPECT_EQ(s.code(), Status::Code::kTruncated) << s.ToString();
  EXPECT_NE(s.message().find("after 2 of 4 bytes"), std::string::npos) << s.message();

  const int one[] = {p.b.get()};
  Status send = SendWithFds(p.b.get(), two, one, kTimeout, "to a closed peer");
  EXPECT_EQ(send.code(), Status::Code::kIoError) << send.ToString();
}

//! Nothing arriving, or a peer that stops reading, is kTimedOut after about the timeout.
TEST(FdPassing, TimesOut) {
  SocketPair p = MakePair();
  std::vector<uint8_t> want(1);
  std::vector<UniqueFd> fds;
  auto start = Clock::now();
  Status s = RecvWithFds(p.b.get(), want, &fds, milliseconds(150), "idle peer");
  auto took = Clock::now() - start;
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_GE(took, milliseconds(140));
  EXPECT_LT(took, milliseconds(2000));

  // Nobody reads p.b: the sender fills the socket buffers, then gives up.
  const int buffer = 64 << 10;
  ::setsockopt(p.a.get(), SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  const std::vector<uint8_t> big(16 << 20, 1);
  Status send = SendWithFds(p.a.get(), big, {}, milliseconds(150), "stuck peer");
  EXPECT_EQ(send.code(), Status::Code::kTimedOut) << send.ToString();
}

}  // namespace
}  // namespace vramflow
