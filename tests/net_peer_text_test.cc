// SPDX-License-Identifier: MIT
// Text one end of a transfer sends the other (an ERROR message's reason) is
// the peer's: it reaches the other end's messages, and so its terminal or
// log, with its control bytes escaped (issue 55, item 13). The sender here
// is raw (a hand-made hello and ERROR through the protocol's Channel), so
// that it can send what vramflow's sender never would.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "transport/core/uri.h"
#include "transport/net/net_options.h"
#include "transport/net/net_protocol.h"
#include "transport/net/net_source.h"
#include "transport/net/socket.h"

namespace vramflow {
namespace {

using namespace std::chrono_literals;

TEST(NetPeerText, ASendersErrorReachesTheReceiverEscaped) {
  NetOptions options;
  options.insecure = true;  // a raw sender speaks plaintext
  Result<std::unique_ptr<NetReceiver>> receiver =
      NetReceiver::Listen(ParseEndpoint("tcp://127.0.0.1:0").value(), options);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  Result<UniqueFd> fd = ConnectStream(ParseEndpoint((*receiver)->uri()).value(), SocketOptions{});
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  ClientHello hello;
  hello.conn_index = 0;
  hello.conn_count = 1;
  hello.generation = 1;
  hello.session.fill(7);
  hello.segment_bytes = 1 << 20;
  hello.window_bytes = 4 << 20;
  Result<ClientConnection> conn =
      ClientHandshake(std::make_unique<PlainConnection>(std::move(*fd)), hello, 3000ms, "raw");
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  Result<std::unique_ptr<ByteSource>> source = (*receiver)->Accept(3000ms);
  ASSERT_TRUE(source.ok()) << source.status().ToString();

  const std::string forged = "x\x1b]0;owned\x07\r\nvramflow recv: stored /ckpt/a.img (1 GiB)\n";
  ASSERT_TRUE(
      conn->channel->Send(MsgType::kError, 0, {reinterpret_cast<const uint8_t*>(forged.data()), forged.size()}).ok());
  std::vector<uint8_t> buf(16);
  Result<size_t> read = (*source)->Read(buf);
  ASSERT_FALSE(read.ok());
  const std::string message = read.status().ToString();
  for (const char control : {'\x1b', '\x07', '\r', '\n'})
    EXPECT_EQ(message.find(control), std::string::npos) << message;
  EXPECT_NE(message.find("\\x1b]0;owned\\x07\\x0d\\x0avramflow recv: stored"), std::string::npos) << message;
}

}  // namespace
}  // namespace vramflow
