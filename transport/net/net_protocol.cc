// SPDX-License-Identifier: MIT
#include "transport/net/net_protocol.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "common/endian.h"
#include "common/hash.h"

namespace vramflow {
namespace {

constexpr char kMagic[8] = {'V', 'F', 'L', 'O', 'W', 'N', 'E', 'T'};

std::span<const uint8_t> Bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

}  // namespace

const char* HelloStatusName(HelloStatus status) {
  switch (status) {
    case HelloStatus::kOk:
      return "ok";
    case HelloStatus::kBusy:
      return "busy";
    case HelloStatus::kVersion:
      return "version mismatch";
    case HelloStatus::kBadRequest:
      return "bad request";
    case HelloStatus::kSessionOver:
      return "session over";
  }
  return "unknown";
}

const char* MsgTypeName(MsgType type) {
  switch (type) {
    case MsgType::kData:
      return "DATA";
    case MsgType::kEnd:
      return "END";
    case MsgType::kAck:
      return "ACK";
    case MsgType::kDone:
      return "DONE";
    case MsgType::kError:
      return "ERROR";
    case MsgType::kAbort:
      return "ABORT";
    case MsgType::kPing:
      return "PING";
    case MsgType::kName:
      return "NAME";
    case MsgType::kBases:
      return "BASES";
  }
  return "unknown";
}

std::array<uint8_t, kHelloBytes> EncodeClientHello(const ClientHello& hello) {
  std::array<uint8_t, kHelloBytes> b{};
  std::memcpy(b.data(), kMagic, 8);
  StoreLE16(&b[8], hello.version);
  StoreLE16(&b[10], hello.flags);
  StoreLE16(&b[12], hello.conn_index);
  StoreLE16(&b[14], hello.conn_count);
  std::memcpy(&b[16], hello.session.data(), 16);
  StoreLE32(&b[64], hello.segment_bytes);
  StoreLE32(&b[68], hello.generation);
  StoreLE64(&b[72], hello.window_bytes);
  StoreLE32(&b[92], HeaderChecksum(b.data(), 92));
  return b;
}

Result<ClientHello> ParseClientHello(std::span<const uint8_t, kHelloBytes> b) {
  if (std::memcmp(b.data(), kMagic, 8) != 0)
    return Status::Corruption("not a vramflow sender (bad magic in its hello)");
  if (LoadLE32(&b[92]) != HeaderChecksum(b.data(), 92)) return Status::Corruption("sender's hello fails its checksum");
  ClientHello h;
  h.version = LoadLE16(&b[8]);
  h.flags = LoadLE16(&b[10]);
  h.conn_index = LoadLE16(&b[12]);
  h.conn_count = LoadLE16(&b[14]);
  std::memcpy(h.session.data(), &b[16], 16);
  h.segment_bytes = LoadLE32(&b[64]);
  h.generation = LoadLE32(&b[68]);
  h.window_bytes = LoadLE64(&b[72]);
  if (h.version != kNetProtocolVersion) return h;  // the caller answers with kVersion
  if (!AllZero(&b[32], 32) || !AllZero(&b[80], 12))
    return Status::Corruption("sender's hello has non-zero reserved bytes");
  if (h.conn_count == 0 || h.conn_count > kMaxStreams || h.conn_index >= h.conn_count)
    return Status::InvalidArgument("sender's hello names connection " + std::to_string(h.conn_index) + " of " +
                                   std::to_string(h.conn_count) + " (at most " + std::to_string(kMaxStreams) + ")");
  if (h.segment_bytes == 0 || h.segment_bytes > kMaxSegmentBytes)
    return Status::InvalidArgument("sender's segment size " + std::to_string(h.segment_bytes) + " is out of range");
  if (h.window_bytes < h.segment_bytes)
    return Status::InvalidArgument("sender's window (" + std::to_string(h.window_bytes) +
                                   " bytes) is below its segment size");
  if (h.flags & ~(kHelloResume | kHelloNamed | kHelloBases))
    return Status::InvalidArgument("sender's hello has unknown flags");
  return h;
}

std::array<uint8_t, kHelloBytes> EncodeServerHello(const ServerHello& hello) {
  std::array<uint8_t, kHelloBytes> b{};
  std::memcpy(b.data(), kMagic, 8);
  StoreLE16(&b[8], hello.version);
  StoreLE16(&b[10], static_cast<uint16_t>(hello.status));
  StoreLE16(&b[12], static_cast<uint16_t>(std::min(hello.message.size(), kMaxHandshakeMessage)));
  StoreLE64(&b[16], hello.resume_offset);
  StoreLE32(&b[88], hello.window_bytes);
  StoreLE32(&b[92], HeaderChecksum(b.data(), 92));
  return b;
}

Result<uint16_t> ParseServerHello(std::span<const uint8_t, kHelloBytes> b, ServerHello* h) {
  if (std::memcmp(b.data(), kMagic, 8) != 0)
    return Status::Corruption("not a vramflow receiver (bad magic in its hello)");
  if (LoadLE32(&b[92]) != HeaderChecksum(b.data(), 92))
    return Status::Corruption("receiver's hello fails its checksum");
  h->version = LoadLE16(&b[8]);
  uint16_t status = LoadLE16(&b[10]);
  if (status > static_cast<uint16_t>(HelloStatus::kSessionOver) || status == 3)
    return Status::Corruption("receiver's hello has unknown status " + std::to_string(status));
  h->status = static_cast<HelloStatus>(status);
  uint16_t message_len = LoadLE16(&b[12]);
  if (message_len > kMaxHandshakeMessage) return Status::Corruption("receiver's hello message is too long");
  h->resume_offset = LoadLE64(&b[16]);
  if (!AllZero(&b[24], 64)) return Status::Corruption("receiver's hello has non-zero reserved bytes");
  h->window_bytes = LoadLE32(&b[88]);
  return message_len;
}

uint64_t EncodeBasesFlags(const BaseOffer& offer) { return offer.stores ? kBasesStores : 0; }

std::vector<uint8_t> EncodeBasesPayload(const BaseOffer& offer) {
  std::vector<uint8_t> payload;
  const size_t count = std::min(offer.ids.size(), kMaxOfferedBases);
  payload.reserve(count * 32);
  for (size_t i = 0; i < count; ++i) payload.insert(payload.end(), offer.ids[i].begin(), offer.ids[i].end());
  return payload;
}

Result<BaseOffer> ParseBases(uint64_t flags, std::span<const uint8_t> payload) {
  if (flags & ~kBasesStores)
    return Status::Corruption("the receiver's BASES message has unknown flags " + std::to_string(flags));
  if (payload.size() % 32 != 0)
    return Status::Corruption("the receiver's BASES message of " + std::to_string(payload.size()) +
                              " bytes is not a whole number of 32-byte stream ids");
  if (payload.size() / 32 > kMaxOfferedBases)
    return Status::Corruption("the receiver offered " + std::to_string(payload.size() / 32) + " bases, more than the " +
                              std::to_string(kMaxOfferedBases) + " the protocol allows");
  BaseOffer offer;
  offer.stores = (flags & kBasesStores) != 0;
  for (size_t at = 0; at < payload.size(); at += 32) {
    Sha256Digest id;
    std::memcpy(id.data(), payload.data() + at, 32);
    if (offer.Holds(id)) return Status::Corruption("the receiver offered base " + HexDigest(id) + " twice");
    offer.ids.push_back(id);
  }
  return offer;
}

Channel::Channel(std::unique_ptr<Connection> connection, std::chrono::milliseconds io_timeout, std::string what)
    : connection_(std::move(connection)), io_timeout_(io_timeout), what_(std::move(what)) {}

Channel::~Channel() = default;

Status Channel::Send(MsgType type, uint64_t offset, std::span<const uint8_t> payload) {
  std::lock_guard lock(send_mu_);
  uint8_t header[kMsgHeaderBytes] = {};
  header[0] = static_cast<uint8_t>(type);
  StoreLE32(&header[4], static_cast<uint32_t>(payload.size()));
  StoreLE64(&header[8], send_seq_);
  StoreLE64(&header[16], offset);
  StoreLE64(&header[24], Hash64(payload.data(), payload.size()));
  StoreLE32(&header[36], HeaderChecksum(header, 36));
  VF_RETURN_IF_ERROR(connection_->SendAll(header, io_timeout_, what_));
  if (!payload.empty()) VF_RETURN_IF_ERROR(connection_->SendAll(payload, io_timeout_, what_));
  ++send_seq_;
  return Status::Ok();
}

Result<MsgHeader> Channel::ReceiveHeader(uint32_t max_length) {
  VF_RETURN_IF_ERROR(connection_->RecvAll(recv_header_, io_timeout_, what_));
  const uint8_t* b = recv_header_.data();
  std::string where = what_ + ": message " + std::to_string(recv_seq_);
  if (LoadLE32(&b[36]) != HeaderChecksum(b, 36)) return Status::Corruption(where + ": header fails its checksum");
  MsgHeader h;
  if (b[0] < static_cast<uint8_t>(MsgType::kData) || b[0] > static_cast<uint8_t>(MsgType::kBases))
    return Status::Corruption(where + ": unknown message type " + std::to_string(b[0]));
  h.type = static_cast<MsgType>(b[0]);
  h.length = LoadLE32(&b[4]);
  h.seq = LoadLE64(&b[8]);
  h.offset = LoadLE64(&b[16]);
  h.payload_check = LoadLE64(&b[24]);
  if (h.seq != recv_seq_)
    return Status::Corruption(where + ": out of sequence (numbered " + std::to_string(h.seq) +
                              "): dropped or reordered");
  if (h.length > max_length)
    return Status::Corruption(where + " (" + MsgTypeName(h.type) + ") claims " + std::to_string(h.length) +
                              " payload bytes, more than the " + std::to_string(max_length) + " allowed");
  return h;
}

Status Channel::ReceivePayload(const MsgHeader& header, std::span<uint8_t> payload) {
  if (payload.size() != header.length) return Status::Internal("payload buffer does not match the header");
  if (!payload.empty()) VF_RETURN_IF_ERROR(connection_->RecvAll(payload, io_timeout_, what_));
  if (Hash64(payload.data(), payload.size()) != header.payload_check)
    return Status::Corruption(what_ + ": message " + std::to_string(header.seq) + " (" + MsgTypeName(header.type) +
                              " at offset " + std::to_string(header.offset) + "): payload fails its checksum");
  ++recv_seq_;
  return Status::Ok();
}

Result<ClientConnection> ClientHandshake(std::unique_ptr<Connection> connection, const ClientHello& hello,
                                         std::chrono::milliseconds io_timeout, const std::string& what) {
  Connection& conn = *connection;
  VF_RETURN_IF_ERROR(conn.SendAll(EncodeClientHello(hello), io_timeout, what));
  std::array<uint8_t, kHelloBytes> reply_bytes;
  Status got = conn.RecvAll(reply_bytes, io_timeout, what);
  // A TLS receiver answers a plaintext hello with a TLS alert record (0x15 0x03).
  if (!got.ok() || std::memcmp(reply_bytes.data(), kMagic, 8) != 0) {
    if (reply_bytes[0] == 0x15 && reply_bytes[1] == 0x03)
      return Status::Unauthenticated(what +
                                     ": the receiver requires TLS: give the sender its key (--key-file) or a "
                                     "certificate (--cert, --key, --ca)");
    VF_RETURN_IF_ERROR(got);
  }
  ServerHello reply;
  VF_ASSIGN_OR_RETURN(uint16_t message_len, ParseServerHello(reply_bytes, &reply));
  reply.message.resize(message_len);
  if (message_len)
    VF_RETURN_IF_ERROR(conn.RecvAll({reinterpret_cast<uint8_t*>(reply.message.data()), message_len}, io_timeout, what));
  std::string refused = what + ": the receiver refused (" + HelloStatusName(reply.status) + "): " + reply.message;
  switch (reply.status) {
    case HelloStatus::kOk:
      break;
    case HelloStatus::kBusy:
      return Status::AlreadyExists(refused);
    case HelloStatus::kSessionOver:
      return Status::Cancelled(refused);
    default:
      return Status::InvalidArgument(refused);
  }
  if (reply.version != kNetProtocolVersion)
    return Status::InvalidArgument(what + ": the receiver answered with protocol version " +
                                   std::to_string(reply.version));
  if (reply.window_bytes < hello.segment_bytes || reply.window_bytes > hello.window_bytes)
    return Status::Corruption(what + ": the receiver granted a window of " + std::to_string(reply.window_bytes) +
                              " bytes for segments of " + std::to_string(hello.segment_bytes));
  ClientConnection out;
  out.resume_offset = reply.resume_offset;
  out.window_bytes = reply.window_bytes;
  out.channel = std::make_unique<Channel>(std::move(connection), io_timeout, what);
  return out;
}

Result<IncomingHello> ReadClientHello(Connection& connection, std::chrono::milliseconds io_timeout,
                                      const std::string& what) {
  IncomingHello in;
  VF_RETURN_IF_ERROR(connection.RecvAll(in.raw, io_timeout, what));
  VF_ASSIGN_OR_RETURN(in.hello, ParseClientHello(in.raw));
  return in;
}

void RefuseClient(Connection& connection, HelloStatus status, const std::string& message,
                  std::chrono::milliseconds io_timeout) {
  ServerHello reply;
  reply.status = status;
  reply.message = message.substr(0, kMaxHandshakeMessage);
  auto fixed = EncodeServerHello(reply);
  if (connection.SendAll(fixed, io_timeout, "refusal").ok())
    (void)connection.SendAll(Bytes(reply.message), io_timeout, "refusal");
}

Result<std::unique_ptr<Channel>> AcceptClient(std::unique_ptr<Connection> connection, uint64_t resume_offset,
                                              uint32_t window_bytes, std::chrono::milliseconds io_timeout,
                                              const std::string& what) {
  ServerHello reply;
  reply.resume_offset = resume_offset;
  reply.window_bytes = window_bytes;
  VF_RETURN_IF_ERROR(connection->SendAll(EncodeServerHello(reply), io_timeout, what));
  return std::make_unique<Channel>(std::move(connection), io_timeout, what);
}

void Channel::Shutdown() { connection_->Shutdown(); }

}  // namespace vramflow
