// SPDX-License-Identifier: MIT
// libFuzzer target: untrusted bytes from the network through the protocol
// parsers (transport/net/net_protocol.h). These are the bytes a peer sends
// after TLS (transport/net/tls.h, fuzzed by OpenSSL's own targets) or, with
// --insecure and on UNIX sockets, as they are: a peer that passed the
// handshake is still untrusted input.
//
// Byte 0 picks what the rest of the input is:
//   0  a sender's hello (ParseClientHello), then what a receiver reads after
//      it on a live connection (ReadClientHello over a socket pair);
//   1  a receiver's hello and answer (ClientHandshake against these bytes);
//   2  messages on a connection (Channel::ReceiveHeader/Payload until the
//      first error).
//
// With VRAMFLOW_FUZZ_WRITE_SEEDS=DIR in the environment the binary writes
// valid inputs of each kind (checksums right, several messages) into DIR and
// exits, so the fuzzer starts past the checksums.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "transport/net/net_protocol.h"

namespace vramflow {
namespace {

constexpr auto kTimeout = std::chrono::milliseconds(200);

// A plain connection on a duplicate of `fd` (the pipe keeps the original).
std::unique_ptr<Connection> Dup(int fd) { return std::make_unique<PlainConnection>(UniqueFd(::dup(fd))); }

// A connected socket pair with `bytes` already written into one end (and
// that end shut for writing, so the reader sees end of input after them).
struct Pipe {
  UniqueFd reader, writer;
  std::thread feeder;
  explicit Pipe(std::span<const uint8_t> bytes) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
    reader.Reset(fds[0]);
    writer.Reset(fds[1]);
    std::vector<uint8_t> copy(bytes.begin(), bytes.end());
    feeder = std::thread([this, copy] {
      size_t done = 0;
      while (done < copy.size()) {
        ssize_t n = ::send(writer.get(), copy.data() + done, copy.size() - done, MSG_NOSIGNAL);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
      ::shutdown(writer.get(), SHUT_WR);
    });
  }
  ~Pipe() {
    ::shutdown(reader.get(), SHUT_RDWR);
    feeder.join();
  }
};

// Drains whatever the code under test wrote towards the peer, so its sends
// never block.
void DrainPeer(int fd) {
  uint8_t buf[4096];
  while (::recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
  }
}

void FuzzClientHello(std::span<const uint8_t> data) {
  if (data.size() >= kHelloBytes) {
    Result<ClientHello> hello = ParseClientHello(data.first<kHelloBytes>());
    if (hello.ok() && hello->version == kNetProtocolVersion &&
        (hello->conn_index >= hello->conn_count || hello->segment_bytes > kMaxSegmentBytes))
      std::abort();  // the parser promised ranges it did not check
  }
  Pipe pipe(data);
  PlainConnection conn(UniqueFd(::dup(pipe.reader.get())));
  (void)ReadClientHello(conn, kTimeout, "fuzz");
}

void FuzzServerAnswer(std::span<const uint8_t> data) {
  Pipe pipe(data);
  ClientHello hello;
  hello.segment_bytes = 1 << 16;
  hello.window_bytes = 1 << 20;
  // ClientHandshake writes its hello into the pair: it sits in the socket
  // buffer, which is large enough.
  Result<ClientConnection> conn = ClientHandshake(Dup(pipe.reader.get()), hello, kTimeout, "fuzz");
  if (conn.ok() && (conn->window_bytes < hello.segment_bytes || conn->window_bytes > hello.window_bytes))
    std::abort();  // a window the sender did not offer
  DrainPeer(pipe.writer.get());
}

void FuzzMessages(std::span<const uint8_t> data) {
  Pipe pipe(data);
  Channel channel(Dup(pipe.reader.get()), kTimeout, "fuzz");
  std::vector<uint8_t> payload;
  for (int i = 0; i < 64; ++i) {
    Result<MsgHeader> header = channel.ReceiveHeader(1 << 16);
    if (!header.ok()) return;
    if (header->length > (1u << 16) || header->seq != static_cast<uint64_t>(i)) std::abort();
    payload.resize(header->length);
    if (!channel.ReceivePayload(*header, payload).ok()) return;
  }
}

void WriteSeeds(const std::string& dir) {
  auto write = [&](const std::string& name, uint8_t mode, std::span<const uint8_t> bytes) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out.put(static_cast<char>(mode));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  };
  ClientHello hello;
  hello.flags = kHelloNamed;
  hello.conn_count = 4;
  hello.conn_index = 2;
  hello.segment_bytes = 1 << 20;
  hello.window_bytes = 64 << 20;
  write("client-hello", 0, EncodeClientHello(hello));
  ServerHello reply;
  reply.window_bytes = 1 << 20;
  reply.resume_offset = 12345;
  auto fixed = EncodeServerHello(reply);
  write("server-hello-ok", 1, fixed);
  reply.status = HelloStatus::kBusy;
  reply.message = "busy elsewhere";
  std::vector<uint8_t> busy;
  auto busy_fixed = EncodeServerHello(reply);
  busy.assign(busy_fixed.begin(), busy_fixed.end());
  busy.insert(busy.end(), reply.message.begin(), reply.message.end());
  write("server-hello-busy", 1, busy);

  // A few messages, captured from a real channel.
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  UniqueFd peer(fds[1]);
  {
    Channel channel(std::make_unique<PlainConnection>(UniqueFd(fds[0])), kTimeout, "seed");
    std::vector<uint8_t> data(300, 7);
    (void)channel.Send(MsgType::kData, 0, data);
    (void)channel.Send(MsgType::kData, 300, data);
    (void)channel.Send(MsgType::kPing, 600, {});
    (void)channel.Send(MsgType::kEnd, 600, {});
  }
  std::vector<uint8_t> wire(8192);
  ssize_t n = ::recv(peer.get(), wire.data(), wire.size(), MSG_DONTWAIT);
  if (n > 0) write("messages", 2, std::span<const uint8_t>(wire.data(), static_cast<size_t>(n)));
}

}  // namespace
}  // namespace vramflow

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("VRAMFLOW_FUZZ_WRITE_SEEDS")) {
    vramflow::WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1u << 18)) return 0;
  std::span<const uint8_t> rest(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      vramflow::FuzzClientHello(rest);
      break;
    case 1:
      vramflow::FuzzServerAnswer(rest);
      break;
    case 2:
      vramflow::FuzzMessages(rest);
      break;
  }
  return 0;
}
