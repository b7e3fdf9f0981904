// SPDX-License-Identifier: MIT
// Base negotiation over the network (docs/NETWORK.md, "Bases"; issue 21,
// item 4): a receiver tells a sender that asks which stored streams it holds
// and whether it stores what it receives; hostile offers are refused.
// Everything runs over UNIX sockets in a temporary directory, with short
// timeouts.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "streamer/base/base_store.h"
#include "streamer/format/base_stream.h"
#include "streamer/format/seek_index.h"
#include "tests/support/test_util.h"
#include "tools/pack.h"
#include "transport/core/file_random_access.h"
#include "transport/core/uri.h"
#include "transport/net/net_options.h"
#include "transport/net/net_protocol.h"
#include "transport/net/net_sink.h"
#include "transport/net/net_source.h"
#include "transport/net/socket.h"

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

// ------------------------------------------- the store and the sender's choice

constexpr size_t kWeights = 3 << 20;
constexpr size_t kKv = 1 << 20;

std::vector<uint8_t> Random(size_t n, uint64_t seed) { return testing::RandomBytes(n, seed); }

// A checkpoint's two files in DIR/NAME: the same weights each time, the KV
// cache from `kv_seed`.
std::vector<std::string> WriteCheckpoint(const TempDir& dir, const std::string& name, uint64_t kv_seed,
                                         uint64_t weights_seed = 1) {
  std::filesystem::create_directories(dir.File(name));
  testing::WriteFileBytes(dir.File(name + "/weights"), Random(kWeights, weights_seed));
  testing::WriteFileBytes(dir.File(name + "/kv"), Random(kKv, kv_seed));
  return {dir.File(name + "/weights"), dir.File(name + "/kv")};
}

PackOptions PackOf(std::vector<std::string> inputs, const std::string& output) {
  PackOptions options;
  options.inputs = std::move(inputs);
  options.output = output;
  options.pipeline.encoder.codec = CodecChoice::kRaw;
  options.pipeline.encoder.transform = TransformChoice::kNone;
  options.pipeline.chunk_size = 256 << 10;
  options.pipeline.max_memory = 64 << 20;
  options.pipeline.threads = 2;
  options.progress = ProgressStyle();
  options.transport.net = Quick();
  return options;
}

Sha256Digest StreamIdOf(const std::string& path) {
  Result<std::unique_ptr<RandomAccessSource>> file = OpenFileRandomAccess(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return {};
  Result<StoredStreamIndex> stored = ReadSeekIndex(**file);
  EXPECT_TRUE(stored.ok()) << path << ": " << stored.status().ToString();
  return stored.ok() ? stored->id : Sha256Digest{};
}

void SetMtime(const std::string& path, time_t seconds) {
  struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// The scan reads only the newest files (at most the bound), newest first,
// skips what is no stream with an index, dot files and temporaries, and
// offers each stream id once.
TEST(IncrementalNet, StoreScanIsBoundedNewestFirstAndSkipsNonStreams) {
  TempDir dir;
  std::filesystem::create_directories(dir.File("store"));
  PackReport report;
  for (int i = 1; i <= 3; ++i) {
    const std::string out = dir.File("store/ck" + std::to_string(i) + ".vfs");
    ASSERT_TRUE(RunPack(PackOf(WriteCheckpoint(dir, "v" + std::to_string(i), 10 + i), out), &report).ok());
    SetMtime(out, 1000000 + i);
  }
  std::filesystem::copy_file(dir.File("store/ck1.vfs"), dir.File("store/copy-of-ck1.vfs"));
  SetMtime(dir.File("store/copy-of-ck1.vfs"), 1000000);
  std::filesystem::copy_file(dir.File("store/ck3.vfs"), dir.File("store/.hidden.vfs"));
  std::filesystem::copy_file(dir.File("store/ck3.vfs"), dir.File("store/x.vfs.vf-tmp-123"));
  testing::WriteFileBytes(dir.File("store/notes.txt"), std::vector<uint8_t>(100, 'x'));
  SetMtime(dir.File("store/notes.txt"), 2000000);  // the newest file
  std::filesystem::create_directories(dir.File("store/subdir"));

  Result<BaseStore> all = ScanBaseStore(dir.File("store"), TransportOptions{});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->streams.size(), 3u);
  EXPECT_EQ(all->streams[0].location, dir.File("store/ck3.vfs"));
  EXPECT_EQ(all->streams[1].location, dir.File("store/ck2.vfs"));
  EXPECT_EQ(all->streams[2].location, dir.File("store/ck1.vfs"));  // newer than its copy
  EXPECT_EQ(all->streams[0].id, StreamIdOf(dir.File("store/ck3.vfs")));
  EXPECT_EQ(all->files_read, 5u);  // notes.txt, three streams and the copy
  EXPECT_EQ(all->skipped, 1u);
  EXPECT_NE(all->streams[0].id, all->streams[1].id);
  BaseOffer offer = all->Offer(true);
  EXPECT_TRUE(offer.stores);
  EXPECT_EQ(offer.ids.size(), 3u);

  // Bounded: the two newest files only (notes.txt and ck3).
  Result<BaseStore> two = ScanBaseStore(dir.File("store"), TransportOptions{}, 2);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->files_read, 2u);
  ASSERT_EQ(two->streams.size(), 1u);
  EXPECT_EQ(two->streams[0].location, dir.File("store/ck3.vfs"));

  EXPECT_FALSE(ScanBaseStore(dir.File("missing"), TransportOptions{}).ok());
  EXPECT_FALSE(ScanBaseStore(dir.File("store/notes.txt"), TransportOptions{}).ok());
}

// What a receiver with `offer` gets from RunPack(`options`): the bytes on
// the wire (as received) and pack's report.
struct Migration {
  Status packed;
  PackReport report;
  std::vector<uint8_t> received;
};
Migration Migrate(const TempDir& dir, const BaseOffer& offer, PackOptions options) {
  Migration m;
  NetOptions receiving = Quick();
  receiving.base_offer = offer;
  const std::string socket = dir.File("sock");
  ::unlink(socket.c_str());
  Result<std::unique_ptr<NetReceiver>> receiver = NetReceiver::Listen(Parse("unix:" + socket), receiving);
  EXPECT_TRUE(receiver.ok()) << receiver.status().ToString();
  if (!receiver.ok()) return m;
  options.output = "unix:" + socket;
  std::thread sender([&] { m.packed = RunPack(options, &m.report); });
  Result<NetStream> stream = (*receiver)->AcceptStream(10000ms);
  EXPECT_TRUE(stream.ok()) << stream.status().ToString();
  if (stream.ok()) {
    std::vector<uint8_t> buffer(1 << 16);
    for (;;) {
      Result<size_t> n = stream->source->Read(buffer);
      if (!n.ok() || *n == 0) break;
      m.received.insert(m.received.end(), buffer.begin(), buffer.begin() + *n);
    }
    (void)stream->source->Finish(Status::Ok());
  }
  sender.join();
  return m;
}

// The sender builds on the newest candidate the receiver holds: the weights
// travel as references, only the KV cache as data; a storing receiver gets
// the stream with its index, so that it is the next base. A receiver that
// holds nothing, or only an unrelated stream, gets the full stream.
TEST(IncrementalNet, SenderBuildsOnTheCandidateTheReceiverHolds) {
  TempDir dir;
  PackReport report;
  ASSERT_TRUE(RunPack(PackOf(WriteCheckpoint(dir, "v1", 1), dir.File("ck1.vfs")), &report).ok());
  ASSERT_TRUE(RunPack(PackOf(WriteCheckpoint(dir, "other", 3, 9), dir.File("other.vfs")), &report).ok());
  const std::vector<std::string> v2 = WriteCheckpoint(dir, "v2", 2);
  PackOptions options = PackOf(v2, "");
  options.bases = {dir.File("other.vfs"), dir.File("ck1.vfs")};

  BaseOffer holds_ck1{.stores = true, .ids = {IdOf(7), StreamIdOf(dir.File("ck1.vfs"))}};
  Migration with_base = Migrate(dir, holds_ck1, options);
  ASSERT_TRUE(with_base.packed.ok()) << with_base.packed.ToString();
  EXPECT_TRUE(with_base.report.incremental);
  EXPECT_EQ(with_base.report.base_ref_bytes, kWeights);
  EXPECT_EQ(with_base.received.size(), with_base.report.stream_bytes);
  EXPECT_GT(with_base.received.size(), kKv);
  EXPECT_LT(with_base.received.size(), kKv + (64 << 10));
  // Stored as received, it has its index and is a base itself.
  testing::WriteFileBytes(dir.File("ck2.vfs"), with_base.received);
  Result<std::unique_ptr<RandomAccessSource>> stored = OpenFileRandomAccess(dir.File("ck2.vfs"));
  ASSERT_TRUE(stored.ok());
  Result<StoredStreamIndex> index = ReadSeekIndex(**stored);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_TRUE(index->header.flags & kStreamFlagBase);
  EXPECT_NE(StreamIdOf(dir.File("ck2.vfs")), Sha256Digest{});

  BaseOffer nothing{.stores = true, .ids = {}};
  BaseOffer unrelated{.stores = false, .ids = {IdOf(8)}};
  for (const BaseOffer* offer : {&nothing, &unrelated}) {
    SCOPED_TRACE(offer == &nothing ? "nothing" : "unrelated");
    Migration full = Migrate(dir, *offer, options);
    ASSERT_TRUE(full.packed.ok()) << full.packed.ToString();
    EXPECT_FALSE(full.report.incremental);
    EXPECT_EQ(full.report.base_ref_bytes, 0u);
    EXPECT_GT(full.received.size(), kWeights + kKv);
    testing::WriteFileBytes(dir.File("full.vfs"), full.received);
    Result<std::unique_ptr<RandomAccessSource>> file = OpenFileRandomAccess(dir.File("full.vfs"));
    ASSERT_TRUE(file.ok());
    // Indexed only for a receiver that stores it.
    EXPECT_EQ(ReadSeekIndex(**file).ok(), offer->stores);
  }
}

}  // namespace
}  // namespace vramflow
