// SPDX-License-Identifier: MIT
// RealCriu.StreamerTcpListenRemap*: --tcp-listen-remap's rewrite of
// files.img (image_streamer/tcp_remap.h) on real CRIU 4.2 dumps of a Python
// server: the restored server listens where the rewrite says, and the
// rewrite is byte for byte what the real criu-image-streamer's serve hands
// CRIU (but moves every socket on the port, where it moves the first).
// Without root or the built CRIU these skip (see real_criu_test.cc).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "image_streamer/tcp_remap.h"
#include "tests/support/real_criu_fixture.h"

namespace vramflow {
namespace real_criu {
namespace {

// Listens on 127.0.0.1:PORT and [::1]:PORT (TCP; only the first with
// "v4only"), greets each connection with "v4" or "v6" and closes it; also
// holds a UDP socket on 127.0.0.1:PORT. Says "ready" once everything is
// bound.
constexpr const char* kServer = R"(
import select, socket, sys
port = int(sys.argv[1])
v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
v4.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
v4.bind(("127.0.0.1", port)); v4.listen()
listeners = [v4]
if sys.argv[2:] != ["v4only"]:
    v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    v6.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    v6.bind(("::1", port)); v6.listen()
    listeners.append(v6)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", port))
print("ready", flush=True)
while True:
    ready, _, _ = select.select(listeners, [], [])
    for s in ready:
        c, _ = s.accept()
        c.sendall(b"v4" if s is v4 else b"v6")
        c.close()
)";

// A TCP port free on both loopbacks right now (the kernel's pick).
uint16_t FreePort() {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int s4 = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ::bind(s4, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::getsockname(s4, reinterpret_cast<sockaddr*>(&a), &len);
    const uint16_t port = ntohs(a.sin_port);
    const int s6 = ::socket(AF_INET6, SOCK_STREAM, 0);
    sockaddr_in6 b{};
    b.sin6_family = AF_INET6;
    b.sin6_addr = in6addr_loopback;
    b.sin6_port = htons(port);
    const bool v6_free = ::bind(s6, reinterpret_cast<sockaddr*>(&b), sizeof(b)) == 0;
    ::close(s6);
    ::close(s4);
    if (v6_free) return port;
  }
  return 0;
}

// What a server on loopback (v4 or v6) at `port` says, or "refused".
std::string Greeting(bool v6, uint16_t port) {
  const int s = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    a.sin6_port = htons(port);
    rc = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    rc = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  std::string out;
  if (rc != 0) {
    out = errno == ECONNREFUSED ? "refused" : std::string("connect: ") + std::strerror(errno);
  } else {
    timeval tv{5, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[16];
    ssize_t n;
    while ((n = ::read(s, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  }
  ::close(s);
  return out;
}

// Is a UDP socket of `pid`'s network namespace bound to 127.0.0.1:port?
bool UdpBound(pid_t pid, uint16_t port) {
  char local[32];
  std::snprintf(local, sizeof(local), "0100007F:%04X", port);
  return ReadText("/proc/" + std::to_string(pid) + "/net/udp").find(local) != std::string::npos;
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  const std::string text = ReadText(path);
  return std::vector<uint8_t>(text.begin(), text.end());
}

// Starts the server on `port` as CRIU wants it (output to `log`) and waits
// until it is ready.
pid_t StartServer(const std::string& log, uint16_t port, bool v4_only = false) {
  const std::string port_text = std::to_string(port);
  const char* variant = v4_only ? "v4only" : "both";
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    PrepareChildForCriu(log.c_str(), nullptr);
    ::execl("/usr/bin/python3", "python3", "-c", kServer, port_text.c_str(), variant, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 500 && ReadText(log).find("ready") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(ReadText(log).find("ready"), std::string::npos) << ReadText(log);
  return pid;
}

// A plain dump (no plugin) of `pid` into `images`, which CRIU then kills.
void DumpPlain(const std::string& images, pid_t pid) {
  testing::CommandResult r =
      RunShell(CriuBinary() + " dump -D " + ShellQuote(images) + " -v4 -t " + std::to_string(pid) + " -o dump.log");
  ASSERT_EQ(r.code, 0) << r.output << ReadText(images + "/dump.log");
  ASSERT_TRUE(WaitGone(pid));
}

testing::CommandResult RestorePlain(const std::string& images) {
  return RunShell(CriuBinary() + " restore -D " + ShellQuote(images) + " -v4 -d -o restore.log");
}

// The server dumped listening on OLD and restored from a files.img
// remapped OLD:NEW listens on NEW (v4 and v6), no longer on OLD; its UDP
// socket on OLD stays there. On the real image: no remap gives the same
// bytes, a port nobody listens on is an error, and NEW:OLD undoes OLD:NEW.
TEST_F(RealCriu, StreamerTcpListenRemapRestoresOnTheNewPort) {
  REQUIRE_REAL_CRIU();
  const uint16_t old_port = FreePort();
  uint16_t new_port = FreePort();
  while (new_port == old_port) new_port = FreePort();
  ASSERT_NE(old_port, 0);
  ASSERT_NE(new_port, 0);
  const pid_t pid = StartServer(dir_.File("server.log"), old_port);
  started_.push_back(pid);
  ASSERT_TRUE(UdpBound(pid, old_port));
  DumpPlain(images_, pid);

  const std::string files_img = images_ + "/files.img";
  const std::vector<uint8_t> dumped = ReadBytes(files_img);
  auto same = RemapTcpListenPorts(dumped, {});
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->files_img, dumped);
  EXPECT_EQ(same->listen_ports, (std::vector<uint16_t>{old_port, old_port}));

  auto unknown = RemapTcpListenPorts(dumped, {{old_port, new_port}, {new_port, old_port}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no listening TCP socket on port " + std::to_string(new_port)),
            std::string::npos)
      << unknown.status().message();

  auto moved = RemapTcpListenPorts(dumped, {{old_port, new_port}});
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->sockets_remapped, 2u);
  EXPECT_NE(moved->files_img, dumped);
  auto back = RemapTcpListenPorts(moved->files_img, {{new_port, old_port}});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->files_img, dumped);

  {
    std::ofstream out(files_img, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(moved->files_img.data()),
              static_cast<std::streamsize>(moved->files_img.size()));
  }
  testing::CommandResult r = RestorePlain(images_);
  ASSERT_EQ(r.code, 0) << r.output << ReadText(images_ + "/restore.log");
  ASSERT_TRUE(ProcessExists(pid));
  EXPECT_EQ(Greeting(false, new_port), "v4");
  EXPECT_EQ(Greeting(true, new_port), "v6");
  EXPECT_EQ(Greeting(false, old_port), "refused");
  EXPECT_EQ(Greeting(true, old_port), "refused");
  EXPECT_TRUE(UdpBound(pid, old_port)) << "the UDP socket moved";
  EXPECT_FALSE(UdpBound(pid, new_port));
}

// Without a remap the same dump restores on the old port (the control for
// the test above: the restored server is reachable this way at all).
TEST_F(RealCriu, StreamerTcpListenRemapNoneKeepsThePort) {
  REQUIRE_REAL_CRIU();
  const uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  const pid_t pid = StartServer(dir_.File("server.log"), port);
  started_.push_back(pid);
  DumpPlain(images_, pid);
  testing::CommandResult r = RestorePlain(images_);
  ASSERT_EQ(r.code, 0) << r.output << ReadText(images_ + "/restore.log");
  EXPECT_EQ(Greeting(false, port), "v4");
  EXPECT_EQ(Greeting(true, port), "v6");
}

// CRIU's side of criu-image-streamer's serve protocol, for one file: asks
// for NAME on SOCKET (u32 LE length + img_streamer_request_entry), expects
// exists=true, hands over a pipe's write end and copies what arrives to OUT.
constexpr const char* kFetchFromStreamer = R"(
import os, socket, struct, sys
path, name, out = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
request = b"\x0a" + bytes([len(name)]) + name
s.sendall(struct.pack("<I", len(request)) + request)
def exact(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit("the streamer closed the connection")
        b += c
    return b
reply = exact(struct.unpack("<I", exact(4))[0])
if reply != b"\x08\x01":
    sys.exit("reply %r, not exists=true" % reply)
r, w = os.pipe()
socket.send_fds(s, [b"\0"], [w])
os.close(w)
with open(out, "wb") as f:
    while True:
        c = os.read(r, 65536)
        if not c:
            break
        f.write(c)
s.close()
)";

// The server dumped through the real criu-image-streamer; that stream's
// files.img as the real streamer's `serve --tcp-listen-remap OLD:NEW`
// hands it to CRIU, and as `extract` writes it (no remap).
struct StreamerRemap {
  std::vector<uint8_t> extracted;
  std::vector<uint8_t> served;
};

StreamerRemap DumpAndRemapWithCriuImageStreamer(const std::string& root, pid_t pid, uint16_t old_port,
                                                uint16_t new_port) {
  StreamerRemap out;
  const std::string images = root + "/stream-images";
  const std::string shard = root + "/shard";
  std::filesystem::create_directories(images);
  const std::string wait_for = "for i in $(seq 500); do [ -S \"$1\" ] && exit 0; sleep 0.02; done; exit 1";
  testing::CommandResult r =
      RunShell("(" + StreamerBinary() + " -D " + ShellQuote(images) + " capture | cat > " + ShellQuote(shard) +
               ") & cap=$!; sh -c " + ShellQuote(wait_for) + " sh " + ShellQuote(images + "/streamer-capture.sock") +
               " || exit 99; " + CriuBinary() + " dump -D " + ShellQuote(images) + " --stream -v4 -t " +
               std::to_string(pid) + " -o dump.log; rc=$?; wait $cap; exit $rc");
  EXPECT_EQ(r.code, 0) << r.output << ReadText(images + "/dump.log");
  EXPECT_TRUE(WaitGone(pid));
  // Shards must be pipes.
  r = RunShell("cat " + ShellQuote(shard) + " | " + StreamerBinary() + " -D " + ShellQuote(root + "/extracted") +
               " extract");
  EXPECT_EQ(r.code, 0) << r.output;
  out.extracted = ReadBytes(root + "/extracted/files.img");
  const std::string serve_dir = root + "/serve";
  std::filesystem::create_directories(serve_dir);
  r = RunShell("(cat " + ShellQuote(shard) + " | " + StreamerBinary() + " -D " + ShellQuote(serve_dir) +
               " --tcp-listen-remap " + std::to_string(old_port) + ":" + std::to_string(new_port) +
               " serve) & srv=$!; sh -c " + ShellQuote(wait_for) + " sh " +
               ShellQuote(serve_dir + "/streamer-serve.sock") + " || exit 99; /usr/bin/python3 -c " +
               ShellQuote(kFetchFromStreamer) + " " + ShellQuote(serve_dir + "/streamer-serve.sock") + " files.img " +
               ShellQuote(root + "/served.img") + "; rc=$?; wait $srv; exit $rc");
  EXPECT_EQ(r.code, 0) << r.output;
  out.served = ReadBytes(root + "/served.img");
  return out;
}

// One listening socket on OLD: our rewrite of files.img is byte for byte
// what the real criu-image-streamer's serve --tcp-listen-remap hands CRIU.
TEST_F(RealCriu, StreamerTcpListenRemapMatchesCriuImageStreamer) {
  REQUIRE_REAL_CRIU(true);
  const uint16_t old_port = FreePort();
  uint16_t new_port = FreePort();
  while (new_port == old_port) new_port = FreePort();
  const pid_t pid = StartServer(dir_.File("server.log"), old_port, /*v4_only=*/true);
  started_.push_back(pid);
  const StreamerRemap theirs = DumpAndRemapWithCriuImageStreamer(dir_.path(), pid, old_port, new_port);
  ASSERT_FALSE(theirs.extracted.empty());
  ASSERT_NE(theirs.served, theirs.extracted) << "the real streamer did not remap";
  auto ours = RemapTcpListenPorts(theirs.extracted, {{old_port, new_port}});
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  EXPECT_EQ(ours->sockets_remapped, 1u);
  EXPECT_EQ(ours->files_img, theirs.served);
}

// Listening on OLD over v4 and v6: criu-image-streamer moves only the first
// socket it meets; we move both (docs/CLI.md, "streamer --tcp-listen-remap").
TEST_F(RealCriu, StreamerTcpListenRemapMovesEverySocketUnlikeCriuImageStreamer) {
  REQUIRE_REAL_CRIU(true);
  const uint16_t old_port = FreePort();
  uint16_t new_port = FreePort();
  while (new_port == old_port) new_port = FreePort();
  const pid_t pid = StartServer(dir_.File("server.log"), old_port);
  started_.push_back(pid);
  const StreamerRemap theirs = DumpAndRemapWithCriuImageStreamer(dir_.path(), pid, old_port, new_port);
  auto their_ports = RemapTcpListenPorts(theirs.served, {});
  ASSERT_TRUE(their_ports.ok()) << their_ports.status().ToString();
  std::vector<uint16_t> ports = their_ports->listen_ports;
  std::sort(ports.begin(), ports.end());
  std::vector<uint16_t> one_moved{old_port, new_port};
  std::sort(one_moved.begin(), one_moved.end());
  EXPECT_EQ(ports, one_moved);
  auto ours = RemapTcpListenPorts(theirs.extracted, {{old_port, new_port}});
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  EXPECT_EQ(ours->sockets_remapped, 2u);
  auto our_ports = RemapTcpListenPorts(ours->files_img, {});
  ASSERT_TRUE(our_ports.ok());
  EXPECT_EQ(our_ports->listen_ports, (std::vector<uint16_t>{new_port, new_port}));
}

}  // namespace
}  // namespace real_criu
}  // namespace vramflow
