// SPDX-License-Identifier: MIT
// vramflow's network protocol, version 2: how a chunk stream crosses TCP or
// UNIX stream sockets, striped over several connections. docs/NETWORK.md is
// the spec; this file encodes and parses its messages and runs the hello
// exchange, nothing more (the sender and receiver logic is in net_sink.cc
// and net_source.cc). Security is not here: on TCP every connection is TLS
// 1.3 (tls.h) before the first byte of this protocol, unless --insecure.
//
// Every connection starts with
//   client -> server  ClientHello  (fixed 96 bytes)
//   server -> client  ServerHello  (fixed 96 bytes + a text message)
// and then carries messages, each a 40-byte header and a payload, with
// XXH3-64 checksums against accidents (TLS, where it runs, against attackers).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "transport/net/base_offer.h"
#include "transport/net/connection.h"

namespace vramflow {

inline constexpr uint16_t kNetProtocolVersion = 2;
inline constexpr size_t kHelloBytes = 96;
inline constexpr size_t kMsgHeaderBytes = 40;
inline constexpr size_t kMaxHandshakeMessage = 1024;
inline constexpr uint32_t kMaxSegmentBytes = 16u << 20;
inline constexpr unsigned kMaxStreams = 64;
// A stream's name (NAME message): at most this many bytes, so that a receiver
// can store it under a temporary name beside the final one within NAME_MAX.
inline constexpr size_t kMaxStreamName = 200;

using SessionId = std::array<uint8_t, 16>;

// ClientHello flags (1 and 2 were version 1's "keyed" and "encrypt").
inline constexpr uint16_t kHelloResume = 4;  // reconnecting to an existing session
inline constexpr uint16_t kHelloNamed = 8;   // the stream has a name: NAME opens connection 0
inline constexpr uint16_t kHelloBases = 16;  // the sender asks which bases the receiver holds: BASES answers

struct ClientHello {
  uint16_t version = kNetProtocolVersion;
  uint16_t flags = 0;
  uint16_t conn_index = 0;
  uint16_t conn_count = 1;
  uint32_t generation = 0;  // counts the sender's (re)connections of the session
  SessionId session{};
  uint32_t segment_bytes = 0;  // largest DATA payload the sender uses
  uint64_t window_bytes = 0;   // most unacknowledged bytes the sender keeps
};

enum class HelloStatus : uint16_t {
  kOk = 0,
  kBusy = 1,     // another sender's session is using this receiver's destination
  kVersion = 2,  // protocol versions differ
  // 3 was version 1's "key mismatch"; TLS refuses such peers now.
  kBadRequest = 4,   // the hello makes no sense (counts, sizes)
  kSessionOver = 5,  // the session failed or ended and cannot be resumed
};
const char* HelloStatusName(HelloStatus status);

struct ServerHello {
  uint16_t version = kNetProtocolVersion;
  HelloStatus status = HelloStatus::kOk;
  uint64_t resume_offset = 0;  // the first stream byte the receiver still needs
  uint32_t window_bytes = 0;   // the window the receiver grants (<= the sender's)
  std::string message;         // why, when status is not kOk
};

std::array<uint8_t, kHelloBytes> EncodeClientHello(const ClientHello& hello);
Result<ClientHello> ParseClientHello(std::span<const uint8_t, kHelloBytes> bytes);
// The fixed part; the message (ServerHello::message) follows it on the wire.
std::array<uint8_t, kHelloBytes> EncodeServerHello(const ServerHello& hello);
// Parses the fixed part and returns the length of the message that follows.
Result<uint16_t> ParseServerHello(std::span<const uint8_t, kHelloBytes> bytes, ServerHello* hello);

enum class MsgType : uint8_t {
  kData = 1,   // sender -> receiver: payload = stream bytes at `offset`
  kEnd = 2,    // sender -> receiver: the stream is `offset` bytes long, all sent
  kAck = 3,    // receiver -> sender: every byte before `offset` is consumed
  kDone = 4,   // receiver -> sender: the stream is complete and committed
  kError = 5,  // either way: payload = what went wrong (text); the session is over
  kAbort = 6,  // sender -> receiver: the sender gave up; discard everything
  kPing = 7,   // either way, on an idle connection: "still here"
  kName = 8,   // sender -> receiver, first on connection 0 (kHelloNamed): payload = the stream's name
  kBases = 9,  // receiver -> sender, first on connection 0 (kHelloBases): payload = the offered stream ids
};
const char* MsgTypeName(MsgType type);

struct MsgHeader {
  MsgType type = MsgType::kData;
  uint32_t length = 0;  // payload bytes (without the tag)
  uint64_t seq = 0;     // per connection and direction: 0, 1, 2, ...
  uint64_t offset = 0;
  uint64_t payload_check = 0;  // unkeyed: XXH3-64 of the payload
};

// The BASES message (docs/NETWORK.md, "Bases"): `offset` carries the
// flags, the payload the ids, 32 bytes each. Parsing refuses more than
// kMaxOfferedBases ids, unknown flags, a payload that is not whole ids and
// an id offered twice.
inline constexpr uint64_t kBasesStores = 1;  // the receiver stores the stream as it arrives
uint64_t EncodeBasesFlags(const BaseOffer& offer);
std::vector<uint8_t> EncodeBasesPayload(const BaseOffer& offer);
Result<BaseOffer> ParseBases(uint64_t flags, std::span<const uint8_t> payload);

// One connection after its hello exchange: sends and receives messages and
// checks the sequence, so a dropped or reordered message is an error.
// Send() and Receive*() may be used from two different threads (one sender,
// one receiver); Send() is also safe to call from several threads at once.
class Channel {
 public:
  Channel(std::unique_ptr<Connection> connection, std::chrono::milliseconds io_timeout, std::string what);
  ~Channel();

  Status Send(MsgType type, uint64_t offset, std::span<const uint8_t> payload);
  // Receives the next header, then its payload into `payload` (header.length
  // bytes), checked. `max_length` bounds what a peer may claim.
  Result<MsgHeader> ReceiveHeader(uint32_t max_length);
  Status ReceivePayload(const MsgHeader& header, std::span<uint8_t> payload);
  // Wakes any thread blocked on this connection and makes further I/O fail.
  void Shutdown();
  const std::string& what() const { return what_; }

 private:
  std::unique_ptr<Connection> connection_;
  std::chrono::milliseconds io_timeout_;
  std::string what_;
  std::mutex send_mu_;
  uint64_t send_seq_ = 0;  // guarded by send_mu_
  uint64_t recv_seq_ = 0;  // receiving thread only
  std::array<uint8_t, kMsgHeaderBytes> recv_header_{};
};

// The hello exchange, both sides, on a connection that has passed TLS (or
// needs none). Failures are classified by Status code so a sender knows
// whether reconnecting can help: kIoError, kTimedOut and kTruncated are
// transient; kAlreadyExists (busy), kInvalidArgument (a refusal: versions)
// and kCorruption are final.

struct ClientConnection {
  std::unique_ptr<Channel> channel;
  uint64_t resume_offset = 0;
  uint32_t window_bytes = 0;  // granted by the receiver
};
// Sender side: hello, and the receiver's answer.
Result<ClientConnection> ClientHandshake(std::unique_ptr<Connection> connection, const ClientHello& hello,
                                         std::chrono::milliseconds io_timeout, const std::string& what);

// Receiver side, first step: reads the sender's hello.
struct IncomingHello {
  std::array<uint8_t, kHelloBytes> raw{};
  ClientHello hello;
};
Result<IncomingHello> ReadClientHello(Connection& connection, std::chrono::milliseconds io_timeout,
                                      const std::string& what);
// Refuses the sender with a status and a message it will print.
void RefuseClient(Connection& connection, HelloStatus status, const std::string& message,
                  std::chrono::milliseconds io_timeout);
// Accepts the sender: answers, and returns the connection ready for messages.
Result<std::unique_ptr<Channel>> AcceptClient(std::unique_ptr<Connection> connection, uint64_t resume_offset,
                                              uint32_t window_bytes, std::chrono::milliseconds io_timeout,
                                              const std::string& what);

}  // namespace vramflow
