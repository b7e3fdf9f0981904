// SPDX-License-Identifier: MIT
// Base negotiation over the network (docs/NETWORK.md, "Bases"; issue 21,
// item 4): a receiver tells a sender that asks which stored streams it holds
// and whether it stores what it receives; hostile offers are refused.
// Everything runs over UNIX sockets in a temporary directory, with short
// timeouts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "transport/net_options.h"
#include "transport/net_protocol.h"
#include "transport/net_sink.h"
#include "transport/net_source.h"
#include "transport/socket.h"
#include "transport/uri.h"

namespace vramflow {
namespace {

using namespace std::chrono_literals;
using ::vramflow::testing::TempDir;

NetOptions Quick() {
  NetOptions o;
  o.streams = 2;
  o.segment_bytes = 64 << 10;
  o.window_bytes = 4 << 20;
  o.socket.connect_timeout = 2000ms;
  o.socket.io_timeout = 2000ms;
  o.retries = 1;
  o.resume_timeout = 1000ms;
  return o;
}

Endpoint Parse(const std::string& uri) {
  Result<Endpoint> e = ParseEndpoint(uri);
  EXPECT_TRUE(e.ok()) << uri << ": " << e.status().ToString();
  return e.ok() ? *e : Endpoint{};
}

Sha256Digest IdOf(int n) {
  std::string text = "stream " + std::to_string(n);
  return Sha256(text.data(), text.size());
}

// Sends `bytes` to `uri` (asking for bases when `ask`) and returns what the
// receiver offered, whether the sink said it is seekable and how it ended.
struct Sent {
  Status status;
  std::optional<BaseOffer> offer;
  bool seekable = false;
};
Sent SendTo(const std::string& uri, bool ask, const std::vector<uint8_t>& bytes) {
  Sent sent;
  NetOptions options = Quick();
  options.ask_bases = ask;
  options.on_bases = [&](const BaseOffer& offer) { sent.offer = offer; };
  Result<std::unique_ptr<ByteSink>> sink = OpenNetSink(Parse(uri), options);
  if (!sink.ok()) {
    sent.status = sink.status();
    return sent;
  }
  sent.seekable = (*sink)->Seekable();
  sent.status = (*sink)->Write(bytes);
  if (sent.status.ok()) sent.status = (*sink)->Commit();
  return sent;
}

// Reads a source to its end and reports success.
Status Drain(ByteSource& source) {
  std::vector<uint8_t> buffer(1 << 16);
  for (;;) {
    Result<size_t> n = source.Read(buffer);
    if (!n.ok()) return n.status();
    if (*n == 0) return Status::Ok();
  }
}

TEST(IncrementalNet, ReceiverOffersItsBasesToASenderThatAsks) {
  TempDir dir;
  NetOptions receiving = Quick();
  receiving.sessions = 0;
  receiving.base_offer.stores = true;
  receiving.base_offer.ids = {IdOf(1), IdOf(2)};
  Result<std::unique_ptr<NetReceiver>> receiver = NetReceiver::Listen(Parse("unix:" + dir.File("s")), receiving);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  const std::string uri = (*receiver)->uri();
  const std::vector<uint8_t> bytes(300 << 10, 7);

  // A sender that asks hears the offer, and the sink says the stream is kept.
  Sent asked;
  std::thread sender([&] { asked = SendTo(uri, true, bytes); });
  Result<NetStream> stream = (*receiver)->AcceptStream(5000ms);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  ASSERT_TRUE(stream->offered.has_value());
  EXPECT_EQ(*stream->offered, receiving.base_offer);
  EXPECT_TRUE(Drain(*stream->source).ok());
  EXPECT_TRUE(stream->source->Finish(Status::Ok()).ok());
  sender.join();
  ASSERT_TRUE(asked.status.ok()) << asked.status.ToString();
  ASSERT_TRUE(asked.offer.has_value());
  EXPECT_EQ(*asked.offer, receiving.base_offer);
  EXPECT_TRUE(asked.seekable);

  // The next session hears the new offer; one that does not ask hears none
  // and its sink is a plain socket.
  BaseOffer later;
  later.ids = {IdOf(3)};
  (*receiver)->OfferBases(later);
  Sent second;
  sender = std::thread([&] { second = SendTo(uri, true, bytes); });
  stream = (*receiver)->AcceptStream(5000ms);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ(stream->offered, std::optional<BaseOffer>(later));
  EXPECT_TRUE(Drain(*stream->source).ok());
  EXPECT_TRUE(stream->source->Finish(Status::Ok()).ok());
  sender.join();
  ASSERT_TRUE(second.status.ok()) << second.status.ToString();
  EXPECT_EQ(second.offer, std::optional<BaseOffer>(later));
  EXPECT_FALSE(second.seekable);

  Sent plain;
  sender = std::thread([&] { plain = SendTo(uri, false, bytes); });
  stream = (*receiver)->AcceptStream(5000ms);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_FALSE(stream->offered.has_value());
  EXPECT_TRUE(Drain(*stream->source).ok());
  EXPECT_TRUE(stream->source->Finish(Status::Ok()).ok());
  sender.join();
  ASSERT_TRUE(plain.status.ok()) << plain.status.ToString();
  EXPECT_FALSE(plain.offer.has_value());
  EXPECT_FALSE(plain.seekable);
}

// A receiver that speaks the protocol by hand: answers the hello of each
// connection and, on connection 0, sends `payload` as its BASES message.
class HandMadeReceiver {
 public:
  HandMadeReceiver(const std::string& path, uint64_t flags, std::vector<uint8_t> payload)
      : flags_(flags), payload_(std::move(payload)) {
    Result<Listener> listener = Listener::Open(Parse("unix:" + path), SocketOptions{});
    EXPECT_TRUE(listener.ok()) << listener.status().ToString();
    listener_.emplace(std::move(*listener));
    thread_ = std::thread([this] { Run(); });
  }
  ~HandMadeReceiver() {
    stop_ = true;
    thread_.join();
  }
  std::string uri() const { return listener_->uri(); }

 private:
  void Run() {
    while (!stop_) {
      Result<UniqueFd> fd = listener_->Accept(50ms, nullptr);
      if (!fd.ok()) continue;
      auto connection = std::make_unique<PlainConnection>(std::move(*fd));
      Result<IncomingHello> in = ReadClientHello(*connection, 2000ms, "test");
      if (!in.ok()) continue;
      const bool first = in->hello.conn_index == 0;
      Result<std::unique_ptr<Channel>> channel =
          AcceptClient(std::move(connection), 0, static_cast<uint32_t>(in->hello.window_bytes), 2000ms, "test");
      if (!channel.ok()) continue;
      if (first) (void)(*channel)->Send(MsgType::kBases, flags_, payload_);
      channels_.push_back(std::move(*channel));  // held open until the test ends
    }
  }

  uint64_t flags_;
  std::vector<uint8_t> payload_;
  std::optional<Listener> listener_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Channel>> channels_;
  std::thread thread_;
};

std::vector<uint8_t> IdsPayload(int count) {
  std::vector<uint8_t> payload;
  for (int i = 0; i < count; ++i) {
    Sha256Digest id = IdOf(i);
    payload.insert(payload.end(), id.begin(), id.end());
  }
  return payload;
}

TEST(IncrementalNet, SenderRefusesAnOfferOverTheLimit) {
  TempDir dir;
  HandMadeReceiver receiver(dir.File("s"), kBasesStores, IdsPayload(static_cast<int>(kMaxOfferedBases) + 1));
  Sent sent = SendTo(receiver.uri(), true, std::vector<uint8_t>(1000, 1));
  ASSERT_FALSE(sent.status.ok());
  EXPECT_EQ(sent.status.code(), Status::Code::kCorruption) << sent.status.ToString();
  EXPECT_NE(sent.status.message().find("BASES"), std::string::npos) << sent.status.ToString();
  EXPECT_NE(sent.status.message().find("more than the 2048 allowed"), std::string::npos) << sent.status.ToString();
  EXPECT_FALSE(sent.offer.has_value());
}

TEST(IncrementalNet, SenderRefusesMalformedOffers) {
  struct Case {
    const char* what;
    uint64_t flags;
    std::vector<uint8_t> payload;
    const char* message;
  };
  std::vector<uint8_t> twice = IdsPayload(2);
  std::memcpy(twice.data() + 32, twice.data(), 32);
  const Case cases[] = {
      {"unknown flags", 2, IdsPayload(1), "unknown flags 2"},
      {"partial id", 0, std::vector<uint8_t>(33, 1), "not a whole number of 32-byte stream ids"},
      {"an id twice", 0, twice, "twice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    HandMadeReceiver receiver(dir.File("s"), c.flags, c.payload);
    Sent sent = SendTo(receiver.uri(), true, std::vector<uint8_t>(1000, 1));
    ASSERT_FALSE(sent.status.ok());
    EXPECT_EQ(sent.status.code(), Status::Code::kCorruption) << sent.status.ToString();
    EXPECT_NE(sent.status.message().find(c.message), std::string::npos) << sent.status.ToString();
  }
  // The limit itself is fine.
  TempDir dir;
  HandMadeReceiver receiver(dir.File("s"), kBasesStores, IdsPayload(static_cast<int>(kMaxOfferedBases)));
  NetOptions options = Quick();
  options.ask_bases = true;
  std::optional<BaseOffer> offer;
  options.on_bases = [&](const BaseOffer& o) { offer = o; };
  Result<std::unique_ptr<ByteSink>> sink = OpenNetSink(Parse(receiver.uri()), options);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  ASSERT_TRUE(offer.has_value());
  EXPECT_EQ(offer->ids.size(), kMaxOfferedBases);
  EXPECT_TRUE(offer->stores);
}

}  // namespace
}  // namespace vramflow
