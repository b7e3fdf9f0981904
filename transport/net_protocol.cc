#include "transport/net_protocol.h"

#include <sys/socket.h>

#include <cstring>

#include "common/endian.h"
#include "common/hash.h"
#include "transport/socket.h"

namespace vramflow {
namespace {

constexpr char kMagic[8] = {'V', 'F', 'L', 'O', 'W', 'N', 'E', 'T'};
constexpr char kAuthMagic[4] = {'V', 'F', 'C', 'A'};

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
    case HelloStatus::kOk: return "ok";
    case HelloStatus::kBusy: return "busy";
    case HelloStatus::kVersion: return "version mismatch";
    case HelloStatus::kKeyMismatch: return "key mismatch";
    case HelloStatus::kBadRequest: return "bad request";
    case HelloStatus::kSessionOver: return "session over";
  }
  return "unknown";
}

const char* MsgTypeName(MsgType type) {
  switch (type) {
    case MsgType::kData: return "DATA";
    case MsgType::kEnd: return "END";
    case MsgType::kAck: return "ACK";
    case MsgType::kDone: return "DONE";
    case MsgType::kError: return "ERROR";
    case MsgType::kAbort: return "ABORT";
    case MsgType::kPing: return "PING";
    case MsgType::kName: return "NAME";
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
  std::memcpy(&b[32], hello.nonce.data(), 32);
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
  std::memcpy(h.nonce.data(), &b[32], 32);
  h.segment_bytes = LoadLE32(&b[64]);
  h.generation = LoadLE32(&b[68]);
  h.window_bytes = LoadLE64(&b[72]);
  if (h.version != kNetProtocolVersion) return h;  // the caller answers with kVersion
  if (!AllZero(&b[80], 12)) return Status::Corruption("sender's hello has non-zero reserved bytes");
  if (h.conn_count == 0 || h.conn_count > kMaxStreams || h.conn_index >= h.conn_count)
    return Status::InvalidArgument("sender's hello names connection " + std::to_string(h.conn_index) + " of " +
                                   std::to_string(h.conn_count) + " (at most " + std::to_string(kMaxStreams) + ")");
  if (h.segment_bytes == 0 || h.segment_bytes > kMaxSegmentBytes)
    return Status::InvalidArgument("sender's segment size " + std::to_string(h.segment_bytes) + " is out of range");
  if (h.window_bytes < h.segment_bytes)
    return Status::InvalidArgument("sender's window (" + std::to_string(h.window_bytes) + " bytes) is below its segment size");
  if ((h.flags & ~(kHelloKeyed | kHelloEncrypt | kHelloResume | kHelloNamed)) || ((h.flags & kHelloEncrypt) && !(h.flags & kHelloKeyed)))
    return Status::InvalidArgument("sender's hello has unknown or inconsistent flags");
  return h;
}

std::array<uint8_t, kHelloBytes> EncodeServerHello(const ServerHello& hello) {
  std::array<uint8_t, kHelloBytes> b{};
  std::memcpy(b.data(), kMagic, 8);
  StoreLE16(&b[8], hello.version);
  StoreLE16(&b[10], static_cast<uint16_t>(hello.status));
  StoreLE16(&b[12], static_cast<uint16_t>(std::min(hello.message.size(), kMaxHandshakeMessage)));
  StoreLE64(&b[16], hello.resume_offset);
  std::memcpy(&b[24], hello.nonce.data(), 32);
  std::memcpy(&b[56], hello.proof.data(), 32);
  StoreLE32(&b[88], hello.window_bytes);
  StoreLE32(&b[92], HeaderChecksum(b.data(), 92));
  return b;
}

Result<uint16_t> ParseServerHello(std::span<const uint8_t, kHelloBytes> b, ServerHello* h) {
  if (std::memcmp(b.data(), kMagic, 8) != 0) return Status::Corruption("not a vramflow receiver (bad magic in its hello)");
  if (LoadLE32(&b[92]) != HeaderChecksum(b.data(), 92)) return Status::Corruption("receiver's hello fails its checksum");
  h->version = LoadLE16(&b[8]);
  uint16_t status = LoadLE16(&b[10]);
  if (status > static_cast<uint16_t>(HelloStatus::kSessionOver))
    return Status::Corruption("receiver's hello has unknown status " + std::to_string(status));
  h->status = static_cast<HelloStatus>(status);
  uint16_t message_len = LoadLE16(&b[12]);
  if (message_len > kMaxHandshakeMessage) return Status::Corruption("receiver's hello message is too long");
  h->resume_offset = LoadLE64(&b[16]);
  std::memcpy(h->nonce.data(), &b[24], 32);
  std::memcpy(h->proof.data(), &b[56], 32);
  h->window_bytes = LoadLE32(&b[88]);
  return message_len;
}

Digest ServerProof(const SharedKey& key, std::span<const uint8_t> client_hello, const ServerHello& hello) {
  ServerHello unproven = hello;
  unproven.proof = {};
  unproven.message.clear();
  auto server = EncodeServerHello(unproven);
  return HmacSha256(key.secret, {Bytes("vramflow/1 receiver proof"), client_hello, server});
}

Digest ClientProof(const SharedKey& key, std::span<const uint8_t> client_hello, const ServerHello& hello) {
  ServerHello proven = hello;
  proven.message.clear();
  auto server = EncodeServerHello(proven);
  return HmacSha256(key.secret, {Bytes("vramflow/1 sender proof"), client_hello, server});
}

ChannelKeys DeriveChannelKeys(const SharedKey& key, const ClientHello& client, const ServerHello& server) {
  std::array<uint8_t, 64> salt;
  std::memcpy(salt.data(), client.nonce.data(), 32);
  std::memcpy(salt.data() + 32, server.nonce.data(), 32);
  // info = label || session id || LE16(connection index)
  auto info = [&](std::string label) {
    label.append(reinterpret_cast<const char*>(client.session.data()), client.session.size());
    label.push_back(static_cast<char>(client.conn_index & 0xff));
    label.push_back(static_cast<char>(client.conn_index >> 8));
    return label;
  };
  std::string to_server = info("vramflow/1 sender to receiver");
  std::string to_client = info("vramflow/1 receiver to sender");
  ChannelKeys keys;
  keys.client_to_server = HkdfSha256(key.secret, salt, Bytes(to_server));
  keys.server_to_client = HkdfSha256(key.secret, salt, Bytes(to_client));
  return keys;
}

Channel::Channel(UniqueFd fd, Role role, std::optional<ChannelKeys> keys, bool encrypt,
                 std::chrono::milliseconds io_timeout, std::string what)
    : fd_(std::move(fd)), keyed_(keys.has_value()), encrypt_(keys.has_value() && encrypt), io_timeout_(io_timeout),
      what_(std::move(what)) {
  if (keys) {
    bool client = role == Role::kClient;
    send_aead_.emplace(client ? keys->client_to_server : keys->server_to_client);
    recv_aead_.emplace(client ? keys->server_to_client : keys->client_to_server);
  }
}

Channel::~Channel() = default;

Status Channel::Send(MsgType type, uint64_t offset, std::span<const uint8_t> payload) {
  std::lock_guard lock(send_mu_);
  uint8_t header[kMsgHeaderBytes] = {};
  header[0] = static_cast<uint8_t>(type);
  StoreLE32(&header[4], static_cast<uint32_t>(payload.size()));
  StoreLE64(&header[8], send_seq_);
  StoreLE64(&header[16], offset);
  if (!keyed_) {
    StoreLE64(&header[24], Hash64(payload.data(), payload.size()));
    StoreLE32(&header[36], HeaderChecksum(header, 36));
    VF_RETURN_IF_ERROR(SendAll(fd_.get(), header, io_timeout_, what_));
    if (!payload.empty()) VF_RETURN_IF_ERROR(SendAll(fd_.get(), payload, io_timeout_, what_));
  } else {
    // header | payload (sealed in place in a copy) | tag, in one send.
    send_buffer_.resize(kMsgHeaderBytes + payload.size() + Aead::kTagBytes);
    std::memcpy(send_buffer_.data(), header, kMsgHeaderBytes);
    if (!payload.empty()) std::memcpy(send_buffer_.data() + kMsgHeaderBytes, payload.data(), payload.size());
    std::span<uint8_t> body(send_buffer_.data() + kMsgHeaderBytes, payload.size());
    std::span<uint8_t, Aead::kTagBytes> tag(send_buffer_.data() + kMsgHeaderBytes + payload.size(), Aead::kTagBytes);
    VF_RETURN_IF_ERROR(send_aead_->Seal(send_seq_, {header, kMsgHeaderBytes}, body, encrypt_, tag));
    VF_RETURN_IF_ERROR(SendAll(fd_.get(), send_buffer_, io_timeout_, what_));
    if (send_buffer_.capacity() > (4u << 20) && payload.size() < (1u << 20)) send_buffer_ = {};  // don't hoard
  }
  ++send_seq_;
  return Status::Ok();
}

Result<MsgHeader> Channel::ReceiveHeader(uint32_t max_length) {
  VF_RETURN_IF_ERROR(RecvAll(fd_.get(), recv_header_, io_timeout_, what_));
  const uint8_t* b = recv_header_.data();
  std::string where = what_ + ": message " + std::to_string(recv_seq_);
  if (!keyed_ && LoadLE32(&b[36]) != HeaderChecksum(b, 36))
    return Status::Corruption(where + ": header fails its checksum");
  MsgHeader h;
  if (b[0] < static_cast<uint8_t>(MsgType::kData) || b[0] > static_cast<uint8_t>(MsgType::kName))
    return Status::Corruption(where + ": unknown message type " + std::to_string(b[0]));
  h.type = static_cast<MsgType>(b[0]);
  h.length = LoadLE32(&b[4]);
  h.seq = LoadLE64(&b[8]);
  h.offset = LoadLE64(&b[16]);
  h.payload_check = LoadLE64(&b[24]);
  if (h.seq != recv_seq_)
    return Status::Corruption(where + ": out of sequence (numbered " + std::to_string(h.seq) +
                              "): replayed, dropped or reordered");
  if (h.length > max_length)
    return Status::Corruption(where + " (" + MsgTypeName(h.type) + ") claims " + std::to_string(h.length) +
                              " payload bytes, more than the " + std::to_string(max_length) + " allowed");
  return h;
}

Status Channel::ReceivePayload(const MsgHeader& header, std::span<uint8_t> payload) {
  if (payload.size() != header.length) return Status::Internal("payload buffer does not match the header");
  if (!payload.empty()) VF_RETURN_IF_ERROR(RecvAll(fd_.get(), payload, io_timeout_, what_));
  std::string where = what_ + ": message " + std::to_string(header.seq) + " (" + MsgTypeName(header.type) +
                      " at offset " + std::to_string(header.offset) + ")";
  if (keyed_) {
    std::array<uint8_t, Aead::kTagBytes> tag;
    VF_RETURN_IF_ERROR(RecvAll(fd_.get(), tag, io_timeout_, what_));
    Status s = recv_aead_->Open(header.seq, recv_header_, payload, encrypt_, tag);
    if (!s.ok()) return Status::Corruption(where + " failed authentication: tampered, replayed or sent with another key");
  } else if (Hash64(payload.data(), payload.size()) != header.payload_check) {
    return Status::Corruption(where + ": payload fails its checksum");
  }
  ++recv_seq_;
  return Status::Ok();
}

Result<ClientConnection> ClientHandshake(UniqueFd fd, const ClientHello& hello, const std::optional<SharedKey>& key,
                                         std::chrono::milliseconds io_timeout, const std::string& what) {
  auto raw = EncodeClientHello(hello);
  VF_RETURN_IF_ERROR(SendAll(fd.get(), raw, io_timeout, what));
  std::array<uint8_t, kHelloBytes> reply_bytes;
  VF_RETURN_IF_ERROR(RecvAll(fd.get(), reply_bytes, io_timeout, what));
  ServerHello reply;
  VF_ASSIGN_OR_RETURN(uint16_t message_len, ParseServerHello(reply_bytes, &reply));
  reply.message.resize(message_len);
  if (message_len)
    VF_RETURN_IF_ERROR(RecvAll(fd.get(), {reinterpret_cast<uint8_t*>(reply.message.data()), message_len}, io_timeout, what));
  std::string refused = what + ": the receiver refused (" + HelloStatusName(reply.status) + "): " + reply.message;
  switch (reply.status) {
    case HelloStatus::kOk: break;
    case HelloStatus::kBusy: return Status::AlreadyExists(refused);
    case HelloStatus::kSessionOver: return Status::Cancelled(refused);
    default: return Status::InvalidArgument(refused);
  }
  if (reply.version != kNetProtocolVersion)
    return Status::InvalidArgument(what + ": the receiver answered with protocol version " + std::to_string(reply.version));
  std::optional<ChannelKeys> keys;
  if (key) {
    if (!DigestsEqual(reply.proof, ServerProof(*key, raw, reply)))
      return Status::Corruption(what + ": the receiver could not prove it holds the key (" + key->origin +
                                "): wrong key on one side, or not the receiver you meant");
    std::array<uint8_t, kClientAuthBytes> auth{};
    std::memcpy(auth.data(), kAuthMagic, 4);
    Digest proof = ClientProof(*key, raw, reply);
    std::memcpy(&auth[8], proof.data(), 32);
    VF_RETURN_IF_ERROR(SendAll(fd.get(), auth, io_timeout, what));
    std::array<uint8_t, kAuthResultBytes> result;
    VF_RETURN_IF_ERROR(RecvAll(fd.get(), result, io_timeout, what));
    if (std::memcmp(result.data(), kAuthMagic, 4) != 0) return Status::Corruption(what + ": garbled authentication result");
    uint16_t len = std::min<uint16_t>(LoadLE16(&result[6]), kMaxHandshakeMessage);
    std::string text(len, '\0');
    if (len) VF_RETURN_IF_ERROR(RecvAll(fd.get(), {reinterpret_cast<uint8_t*>(text.data()), len}, io_timeout, what));
    if (LoadLE16(&result[4]) != 0) return Status::Corruption(what + ": the receiver rejected our proof: " + text);
    keys = DeriveChannelKeys(*key, hello, reply);
  }
  if (reply.window_bytes < hello.segment_bytes || reply.window_bytes > hello.window_bytes)
    return Status::Corruption(what + ": the receiver granted a window of " + std::to_string(reply.window_bytes) +
                              " bytes for segments of " + std::to_string(hello.segment_bytes));
  ClientConnection out;
  out.resume_offset = reply.resume_offset;
  out.window_bytes = reply.window_bytes;
  out.channel = std::make_unique<Channel>(std::move(fd), Channel::Role::kClient, keys,
                                          (hello.flags & kHelloEncrypt) != 0, io_timeout, what);
  return out;
}

Result<IncomingHello> ReadClientHello(int fd, std::chrono::milliseconds io_timeout, const std::string& what) {
  IncomingHello in;
  VF_RETURN_IF_ERROR(RecvAll(fd, in.raw, io_timeout, what));
  VF_ASSIGN_OR_RETURN(in.hello, ParseClientHello(in.raw));
  return in;
}

void RefuseClient(int fd, HelloStatus status, const std::string& message, std::chrono::milliseconds io_timeout) {
  ServerHello reply;
  reply.status = status;
  reply.message = message.substr(0, kMaxHandshakeMessage);
  auto fixed = EncodeServerHello(reply);
  if (SendAll(fd, fixed, io_timeout, "refusal").ok())
    (void)SendAll(fd, Bytes(reply.message), io_timeout, "refusal");
}

Result<std::unique_ptr<Channel>> AcceptClient(UniqueFd fd, const IncomingHello& incoming,
                                              const std::optional<SharedKey>& key, uint64_t resume_offset,
                                              uint32_t window_bytes, std::chrono::milliseconds io_timeout,
                                              const std::string& what) {
  ServerHello reply;
  reply.resume_offset = resume_offset;
  reply.window_bytes = window_bytes;
  VF_RETURN_IF_ERROR(RandomBytes(reply.nonce));
  if (key) reply.proof = ServerProof(*key, incoming.raw, reply);
  VF_RETURN_IF_ERROR(SendAll(fd.get(), EncodeServerHello(reply), io_timeout, what));
  std::optional<ChannelKeys> keys;
  if (key) {
    std::array<uint8_t, kClientAuthBytes> auth;
    VF_RETURN_IF_ERROR(RecvAll(fd.get(), auth, io_timeout, what));
    Digest proof;
    std::memcpy(proof.data(), &auth[8], 32);
    bool good = std::memcmp(auth.data(), kAuthMagic, 4) == 0 && DigestsEqual(proof, ClientProof(*key, incoming.raw, reply));
    std::string text = good ? "" : "wrong key: the sender could not prove it holds this receiver's key";
    std::array<uint8_t, kAuthResultBytes> result{};
    std::memcpy(result.data(), kAuthMagic, 4);
    StoreLE16(&result[4], good ? 0 : 1);
    StoreLE16(&result[6], static_cast<uint16_t>(text.size()));
    VF_RETURN_IF_ERROR(SendAll(fd.get(), result, io_timeout, what));
    if (!good) {
      (void)SendAll(fd.get(), Bytes(text), io_timeout, what);
      return Status::Corruption(what + ": " + text + " (" + key->origin + ")");
    }
    keys = DeriveChannelKeys(*key, incoming.hello, reply);
  }
  return std::make_unique<Channel>(std::move(fd), Channel::Role::kServer, keys,
                                   (incoming.hello.flags & kHelloEncrypt) != 0, io_timeout, what);
}

void Channel::Shutdown() {
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
}

}  // namespace vramflow
