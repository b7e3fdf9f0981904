// SPDX-License-Identifier: MIT
#include "transport/net/socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "tests/support/test_util.h"
#include "transport/net/deadline.h"

namespace vramflow {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

Endpoint Parse(const std::string& uri) {
  auto r = ParseEndpoint(uri);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : Endpoint{};
}

SocketOptions FastOptions() {
  SocketOptions o;
  o.connect_timeout = milliseconds(1000);
  o.io_timeout = milliseconds(1000);
  return o;
}

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 12));
  return v;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// A connected pair over loopback TCP: {client, server}.
struct Pair {
  UniqueFd client, server;
  std::string peer;
};
Pair TcpPair(const SocketOptions& options) {
  Pair p;
  auto listener = Listener::Open(Parse("tcp://127.0.0.1:0"), options);
  EXPECT_TRUE(listener.ok()) << listener.status().ToString();
  if (!listener.ok()) return p;
  auto client = ConnectStream(Parse(listener->uri()), options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  auto server = listener->Accept(milliseconds(1000), &p.peer);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  if (client.ok()) p.client = std::move(client).value();
  if (server.ok()) p.server = std::move(server).value();
  return p;
}

// Both sides send 8 MiB and receive the other's 8 MiB at the same time.
void ExchangeBothWays(int a, int b) {
  const size_t kSize = 8 << 20;
  std::vector<uint8_t> a_out = Pattern(kSize, 1), b_out = Pattern(kSize, 2);
  std::vector<uint8_t> a_in(kSize), b_in(kSize);
  Status a_send, b_send, a_recv, b_recv;
  std::thread t1([&] { a_send = SendAll(a, a_out, milliseconds(5000), "a send"); });
  std::thread t2([&] { b_send = SendAll(b, b_out, milliseconds(5000), "b send"); });
  std::thread t3([&] { a_recv = RecvAll(a, a_in, milliseconds(5000), "a recv"); });
  b_recv = RecvAll(b, b_in, milliseconds(5000), "b recv");
  t1.join();
  t2.join();
  t3.join();
  EXPECT_TRUE(a_send.ok()) << a_send.ToString();
  EXPECT_TRUE(b_send.ok()) << b_send.ToString();
  EXPECT_TRUE(a_recv.ok()) << a_recv.ToString();
  EXPECT_TRUE(b_recv.ok()) << b_recv.ToString();
  EXPECT_TRUE(a_in == b_out);
  EXPECT_TRUE(b_in == a_out);
}

TEST(FormatSecondsTest, ExactToTheMillisecondWithoutTrailingZeros) {
  using std::chrono::milliseconds;
  EXPECT_EQ(FormatSeconds(milliseconds(30000)), "30 s");
  EXPECT_EQ(FormatSeconds(milliseconds(120000)), "120 s");  // was "1.2e+02 s" in the network messages
  EXPECT_EQ(FormatSeconds(milliseconds(500)), "0.5 s");
  EXPECT_EQ(FormatSeconds(milliseconds(50)), "0.05 s");  // was "0.1 s"
  EXPECT_EQ(FormatSeconds(milliseconds(1234)), "1.234 s");
  EXPECT_EQ(FormatSeconds(milliseconds(0)), "0 s");
}

TEST(SocketTest, TcpLoopbackRoundTripBothWays) {
  auto listener = Listener::Open(Parse("tcp://127.0.0.1:0"), FastOptions());
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  // The URI names the port the kernel picked.
  const std::string prefix = "tcp://127.0.0.1:";
  ASSERT_EQ(listener->uri().rfind(prefix, 0), 0u) << listener->uri();
  Endpoint bound = Parse(listener->uri());
  EXPECT_NE(bound.port, 0);

  Result<UniqueFd> client = Status::Internal("not connected");
  std::thread connector([&] { client = ConnectStream(bound, FastOptions()); });
  std::string peer;
  auto server = listener->Accept(milliseconds(2000), &peer);
  connector.join();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ(peer.rfind("127.0.0.1:", 0), 0u) << peer;
  EXPECT_NE(peer, "127.0.0.1:0");
  ExchangeBothWays(client->get(), server->get());
}

TEST(SocketTest, ConnectedSocketsAreTunedAndCloseOnExec) {
  Pair p = TcpPair(FastOptions());
  ASSERT_TRUE(p.client.valid() && p.server.valid());
  for (int fd : {p.client.get(), p.server.get()}) {
    int value = 0;
    socklen_t len = sizeof(value);
    ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &len), 0);
    EXPECT_NE(value, 0);
    ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &value, &len), 0);
    EXPECT_NE(value, 0);
    ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &value, &len), 0);
    EXPECT_EQ(value, 1000);
    EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  }
}

TEST(SocketTest, ListenOnAllAddressesShowsIpv4PeersPlainly) {
  auto listener = Listener::Open(Parse("tcp://:0"), FastOptions());
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  const std::string& uri = listener->uri();
  EXPECT_TRUE(uri.rfind("tcp://[::]:", 0) == 0 || uri.rfind("tcp://0.0.0.0:", 0) == 0) << uri;
  Endpoint bound = Parse(uri);
  ASSERT_NE(bound.port, 0);
  auto client = ConnectStream(Parse("tcp://127.0.0.1:" + std::to_string(bound.port)), FastOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::string peer;
  auto server = listener->Accept(milliseconds(1000), &peer);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  // A dual-stack socket sees ::ffff:127.0.0.1; the peer string shows plain IPv4.
  EXPECT_EQ(peer.rfind("127.0.0.1:", 0), 0u) << peer;
}

TEST(SocketTest, Ipv6Loopback) {
  auto listener = Listener::Open(Parse("tcp://[::1]:0"), FastOptions());
  if (!listener.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << listener.status().ToString();
  EXPECT_EQ(listener->uri().rfind("tcp://[::1]:", 0), 0u) << listener->uri();
  auto client = ConnectStream(Parse(listener->uri()), FastOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::string peer;
  auto server = listener->Accept(milliseconds(1000), &peer);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(peer.rfind("[::1]:", 0), 0u) << peer;
  std::vector<uint8_t> out = Pattern(4096, 3), in(4096);
  ASSERT_TRUE(SendAll(client->get(), out, milliseconds(1000), "send").ok());
  ASSERT_TRUE(RecvAll(server->get(), in, milliseconds(1000), "recv").ok());
  EXPECT_EQ(in, out);
}

TEST(SocketTest, UnixRoundTripAndSocketFileRemoved) {
  testing::TempDir dir;
  const std::string path = dir.File("vf.sock");
  {
    auto listener = Listener::Open(Parse("unix:" + path), FastOptions());
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    EXPECT_EQ(listener->uri(), "unix:" + path);
    EXPECT_TRUE(Exists(path));
    // Moving the listener keeps the file; only the last owner removes it.
    Listener moved = std::move(listener).value();
    EXPECT_TRUE(Exists(path));

    Result<UniqueFd> client = Status::Internal("not connected");
    std::thread connector([&] { client = ConnectStream(Parse("unix:" + path), FastOptions()); });
    std::string peer;
    auto server = moved.Accept(milliseconds(2000), &peer);
    connector.join();
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    EXPECT_EQ(peer, "unix");
    ExchangeBothWays(client->get(), server->get());
  }
  EXPECT_FALSE(Exists(path));
}

// With a CleanupRegistry, the socket file goes when the registry runs (an
// interrupted process runs no destructors), and only while the path names
// the socket bound: a file put there since is someone else's, whoever
// removes. A registry that is already running refuses a new listener.
TEST(SocketTest, UnixSocketFileGoesWithTheCleanupButNotAnotherFileAtItsPath) {
  testing::TempDir dir;
  const std::string path = dir.File("vf.sock");
  {
    CleanupRegistry cleanup;
    auto listener = Listener::Open(Parse("unix:" + path), FastOptions(), &cleanup);
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    ASSERT_TRUE(Exists(path));
    cleanup.Run("interrupted by SIGTERM");
    EXPECT_FALSE(Exists(path));
    EXPECT_EQ(Listener::Open(Parse("unix:" + path), FastOptions(), &cleanup).status().code(), Status::Code::kCancelled);
    EXPECT_FALSE(Exists(path));
  }
  for (bool by_cleanup : {true, false}) {
    SCOPED_TRACE(by_cleanup ? "the cleanup" : "the destructor");
    CleanupRegistry cleanup;
    std::optional<Result<Listener>> listener(Listener::Open(Parse("unix:" + path), FastOptions(), &cleanup));
    ASSERT_TRUE(listener->ok()) << listener->status().ToString();
    std::filesystem::rename(path, path + ".moved");
    auto other = Listener::Open(Parse("unix:" + path), FastOptions());  // another listener's file
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    if (by_cleanup) cleanup.Run("interrupted by SIGTERM");
    listener.reset();
    EXPECT_TRUE(Exists(path)) << "another listener's file was removed";
    EXPECT_TRUE(Exists(path + ".moved"));
    std::filesystem::remove(path + ".moved");
  }
  EXPECT_FALSE(Exists(path)) << "the other listener removes its own";
}

// Listener::Adopt (systemd socket activation) takes a socket that already
// listens: it reports the bound address, accepts, sets close-on-exec, and
// leaves a UNIX socket's file to whoever made it. A socket that does not
// listen, or is not a stream socket, or no socket at all, is refused.
TEST(SocketTest, AdoptTakesOnlyAListeningStreamSocket) {
  testing::TempDir dir;
  const std::string path = dir.File("passed.sock");
  {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));  // no SOCK_CLOEXEC, as systemd passes it
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::listen(fd.get(), 4), 0);
    auto listener = Listener::Adopt(std::move(fd), FastOptions());
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    EXPECT_EQ(listener->uri(), "unix:" + path);
    EXPECT_TRUE(listener->is_unix());
    EXPECT_NE(::fcntl(listener->fd(), F_GETFD) & FD_CLOEXEC, 0);
    Result<UniqueFd> client = Status::Internal("not connected");
    std::thread connector([&] { client = ConnectStream(Parse("unix:" + path), FastOptions()); });
    std::string peer;
    auto server = listener->Accept(milliseconds(2000), &peer);
    connector.join();
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    ExchangeBothWays(client->get(), server->get());
  }
  EXPECT_TRUE(Exists(path)) << "the adopted socket's file belongs to whoever bound it";

  UniqueFd tcp(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(tcp.get(), reinterpret_cast<sockaddr*>(&any), sizeof(any)), 0);
  ASSERT_EQ(::listen(tcp.get(), 4), 0);
  auto adopted = Listener::Adopt(std::move(tcp), FastOptions());
  ASSERT_TRUE(adopted.ok()) << adopted.status().ToString();
  EXPECT_FALSE(adopted->is_unix());
  EXPECT_TRUE(adopted->uri().starts_with("tcp://127.0.0.1:")) << adopted->uri();

  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  UniqueFd other_end(pair[1]);
  auto connected = Listener::Adopt(UniqueFd(pair[0]), FastOptions());
  ASSERT_FALSE(connected.ok());
  EXPECT_NE(connected.status().message().find("does not listen"), std::string::npos) << connected.status().ToString();
  auto datagram = Listener::Adopt(UniqueFd(::socket(AF_INET, SOCK_DGRAM, 0)), FastOptions());
  ASSERT_FALSE(datagram.ok());
  EXPECT_NE(datagram.status().message().find("not a stream socket"), std::string::npos) << datagram.status().ToString();
  auto file = Listener::Adopt(UniqueFd(::open(path.c_str(), O_PATH)), FastOptions());
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("is not a socket"), std::string::npos) << file.status().ToString();
}

TEST(SocketTest, StaleUnixSocketIsReplaced) {
  testing::TempDir dir;
  const std::string path = dir.File("stale.sock");
  {
    // A socket file whose owner is gone: bound, then closed without unlink.
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  }
  ASSERT_TRUE(Exists(path));
  auto listener = Listener::Open(Parse("unix:" + path), FastOptions());
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  auto client = ConnectStream(Parse("unix:" + path), FastOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto server = listener->Accept(milliseconds(1000), nullptr);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
}

// Whoever waits for a UNIX socket's file (a script's `[ -S ]`, a test, CRIU
// started once the streamer's socket is there) connects the moment it sees
// it: the file must not appear before the socket listens. It appears by a
// rename, whole, and no other file is left beside it.
TEST(SocketTest, AUnixSocketFileAppearsOnlyOnceItListens) {
  testing::TempDir dir;
  const std::string path = dir.File("ready.sock");
  UniqueFd watch(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  ASSERT_TRUE(watch.valid());
  ASSERT_GE(::inotify_add_watch(watch.get(), dir.path().c_str(), IN_CREATE | IN_MOVED_TO), 0);
  for (int round = 0; round < 3; ++round) {
    auto listener = Listener::Open(Parse("unix:" + path), FastOptions());
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    alignas(inotify_event) char events[4096];
    const ssize_t n = ::read(watch.get(), events, sizeof events);
    ASSERT_GT(n, 0);
    std::vector<std::string> created;
    std::vector<std::string> moved_in;
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(events + at);
      const std::string name = event->len ? event->name : "";
      (event->mask & IN_MOVED_TO ? moved_in : created).push_back(name);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
    EXPECT_EQ(moved_in, std::vector<std::string>{"ready.sock"}) << "round " << round;
    EXPECT_EQ(std::count(created.begin(), created.end(), "ready.sock"), 0)
        << "bound under its own name, round " << round;
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) files.push_back(entry.path().filename());
    EXPECT_EQ(files, std::vector<std::string>{"ready.sock"}) << "round " << round;
  }
}

// A path that leaves no room in sun_path for the hidden name beside it is
// still listened on: bound in place, as before.
TEST(SocketTest, AUnixPathWithNoRoomForAHiddenNameIsBoundInPlace) {
  testing::TempDir dir;
  const size_t room = sizeof(sockaddr_un{}.sun_path) - 1;  // the longest path
  const std::string parent = dir.path() + "/" + std::string(room - dir.path().size() - 4, 'd');
  ASSERT_TRUE(std::filesystem::create_directory(parent));
  const std::string path = parent + "/s";  // 1 byte short of the limit: ".vf" and 8 hex digits do not fit
  ASSERT_LE(path.size(), room);
  auto listener = Listener::Open(Parse("unix:" + path), FastOptions());
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  auto client = ConnectStream(Parse("unix:" + path), FastOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto server = listener->Accept(milliseconds(1000), nullptr);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// The same seen from outside: a peer that connects as soon as the file is
// there is never refused.
TEST(SocketTest, APeerThatConnectsWhenTheFileAppearsIsNeverRefused) {
  testing::TempDir dir;
  const std::string path = dir.File("race.sock");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  int refused = 0;
  for (int round = 0; round < 300; ++round) {
    std::atomic<bool> stop{false};
    std::thread peer([&] {
      while (!stop.load()) {
        UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) return;
        if (errno == ECONNREFUSED) {
          ++refused;
          return;
        }
      }
    });
    auto listener = Listener::Open(Parse("unix:" + path), FastOptions());
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    stop = true;
    peer.join();
  }
  EXPECT_EQ(refused, 0) << "of 300 peers, refused by a socket file that did not listen yet";
}

TEST(SocketTest, LiveUnixSocketIsNotStolen) {
  testing::TempDir dir;
  const std::string path = dir.File("live.sock");
  auto first = Listener::Open(Parse("unix:" + path), FastOptions());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = Listener::Open(Parse("unix:" + path), FastOptions());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another process is listening on unix:" + path), std::string::npos)
      << second.status().ToString();
  // The failed attempt left the first listener's file in place and working.
  EXPECT_TRUE(Exists(path));
  auto client = ConnectStream(Parse("unix:" + path), FastOptions());
  EXPECT_TRUE(client.ok()) << client.status().ToString();
}

TEST(SocketTest, UnixPathThatIsNotASocketIsRefused) {
  testing::TempDir dir;
  const std::string path = dir.File("regular");
  testing::WriteFileBytes(path, {1, 2, 3});
  auto listener = Listener::Open(Parse("unix:" + path), FastOptions());
  ASSERT_FALSE(listener.ok());
  EXPECT_NE(listener.status().message().find("not a socket"), std::string::npos) << listener.status().ToString();
  EXPECT_EQ(testing::ReadFileBytes(path), (std::vector<uint8_t>{1, 2, 3}));
}

TEST(SocketTest, UnixPathTooLong) {
  const std::string path = "/tmp/" + std::string(200, 'x');
  auto listener = Listener::Open(Parse("unix:" + path), FastOptions());
  ASSERT_FALSE(listener.ok());
  EXPECT_EQ(listener.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(listener.status().message().find("too long"), std::string::npos) << listener.status().ToString();
  auto client = ConnectStream(Parse("unix:" + path), FastOptions());
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Status::Code::kInvalidArgument);
}

TEST(SocketTest, ConnectToMissingUnixSocket) {
  testing::TempDir dir;
  auto client = ConnectStream(Parse("unix:" + dir.File("nobody.sock")), FastOptions());
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Status::Code::kIoError);
  EXPECT_NE(client.status().message().find("nobody.sock"), std::string::npos) << client.status().ToString();
}

TEST(SocketTest, ConnectToClosedPortIsRefused) {
  uint16_t port = 0;
  {
    auto listener = Listener::Open(Parse("tcp://127.0.0.1:0"), FastOptions());
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    port = Parse(listener->uri()).port;
  }
  const std::string uri = "tcp://127.0.0.1:" + std::to_string(port);
  auto start = Clock::now();
  auto client = ConnectStream(Parse(uri), FastOptions());
  ASSERT_FALSE(client.ok());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(client.status().code(), Status::Code::kIoError);
  EXPECT_NE(client.status().message().find("refused"), std::string::npos) << client.status().ToString();
  EXPECT_NE(client.status().message().find("connecting to " + uri), std::string::npos) << client.status().ToString();
}

TEST(SocketTest, ConnectNeedsANetworkEndpointWithHostAndPort) {
  EXPECT_EQ(ConnectStream(Parse("/tmp/file"), FastOptions()).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ConnectStream(Parse("tcp://:80"), FastOptions()).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ConnectStream(Parse("tcp://127.0.0.1:0"), FastOptions()).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Listener::Open(Parse("-"), FastOptions()).status().code(), Status::Code::kInvalidArgument);
}

TEST(SocketTest, TcpPortInUse) {
  auto first = Listener::Open(Parse("tcp://127.0.0.1:0"), FastOptions());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = Listener::Open(Parse(first->uri()), FastOptions());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kIoError);
  EXPECT_NE(second.status().message().find(first->uri()), std::string::npos) << second.status().ToString();
}

TEST(SocketTest, RecvAllTimesOut) {
  Pair p = TcpPair(FastOptions());
  ASSERT_TRUE(p.client.valid() && p.server.valid());
  std::vector<uint8_t> buffer(16);
  auto start = Clock::now();
  Status s = RecvAll(p.client.get(), buffer, milliseconds(200), "reading the header");
  auto elapsed = Clock::now() - start;
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_EQ(s.message(), "reading the header: nothing received for 0.2 s");
  EXPECT_GE(elapsed, milliseconds(190));
  EXPECT_LT(elapsed, std::chrono::seconds(2));
}

TEST(SocketTest, SendAllToAPeerThatNeverReadsTimesOut) {
  SocketOptions options = FastOptions();
  options.buffer_bytes = 64 << 10;
  options.io_timeout = milliseconds(5000);  // keep TCP_USER_TIMEOUT out of the way
  Pair p = TcpPair(options);
  ASSERT_TRUE(p.client.valid() && p.server.valid());
  std::vector<uint8_t> data(64 << 20, 0x5a);
  auto start = Clock::now();
  Status s = SendAll(p.client.get(), data, milliseconds(300), "sending chunk 7");
  auto elapsed = Clock::now() - start;
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_EQ(s.message(), "sending chunk 7: peer accepted no data for 0.3 s (stopped reading?)");
  EXPECT_GE(elapsed, milliseconds(290));
  EXPECT_LT(elapsed, std::chrono::seconds(2));
}

TEST(SocketTest, PeerClosesMidMessage) {
  Pair p = TcpPair(FastOptions());
  ASSERT_TRUE(p.client.valid() && p.server.valid());
  std::vector<uint8_t> part = Pattern(100, 4);
  ASSERT_TRUE(SendAll(p.server.get(), part, milliseconds(1000), "send").ok());
  p.server.Reset();
  std::vector<uint8_t> buffer(1000);
  Status s = RecvAll(p.client.get(), buffer, milliseconds(1000), "reading frame 3");
  EXPECT_EQ(s.code(), Status::Code::kTruncated) << s.ToString();
  EXPECT_EQ(s.message(), "reading frame 3: peer closed the connection after 100 of 1000 bytes");
  EXPECT_TRUE(std::equal(part.begin(), part.end(), buffer.begin()));
}

TEST(SocketTest, SendAllToAClosedPeerIsAnIoError) {
  Pair p = TcpPair(FastOptions());
  ASSERT_TRUE(p.client.valid() && p.server.valid());
  // Unread data at close makes the kernel answer with a reset.
  std::vector<uint8_t> small(10, 1);
  ASSERT_TRUE(SendAll(p.client.get(), small, milliseconds(1000), "send").ok());
  std::this_thread::sleep_for(milliseconds(20));
  p.server.Reset();
  std::vector<uint8_t> data(1 << 20, 2);
  Status s;
  for (int i = 0; i < 50 && s.ok(); ++i) s = SendAll(p.client.get(), data, milliseconds(1000), "sending to the sink");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kIoError) << s.ToString();
  EXPECT_EQ(s.message().rfind("sending to the sink: ", 0), 0u) << s.message();
}

TEST(SocketTest, AcceptTimesOut) {
  auto listener = Listener::Open(Parse("tcp://127.0.0.1:0"), FastOptions());
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  auto start = Clock::now();
  std::string peer = "untouched";
  auto conn = listener->Accept(milliseconds(150), &peer);
  auto elapsed = Clock::now() - start;
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.status().code(), Status::Code::kTimedOut);
  EXPECT_NE(conn.status().message().find(listener->uri()), std::string::npos) << conn.status().ToString();
  EXPECT_EQ(peer, "untouched");
  EXPECT_GE(elapsed, milliseconds(140));
  EXPECT_LT(elapsed, std::chrono::seconds(2));
}

TEST(SocketTest, ZeroLengthTransfersNeedNoPeer) {
  EXPECT_TRUE(SendAll(-1, {}, milliseconds(0), "nothing").ok());
  EXPECT_TRUE(RecvAll(-1, {}, milliseconds(0), "nothing").ok());
}

}  // namespace
}  // namespace vramflow
