// SPDX-License-Identifier: MIT
// TLS 1.3 for the network transports, on OpenSSL: every TCP connection of
// a transfer runs a standard TLS 1.3 handshake before the vramflow protocol
// (docs/NETWORK.md, "Security"), so the protocol itself carries no crypto.
//
// Two ways to authenticate, both mutual and both with forward secrecy:
//   - shared key: the key file becomes a TLS 1.3 external pre-shared key
//     (identity "vramflow", SHA-256 cipher suites) used only with an
//     (EC)DHE exchange (psk_dhe_ke); a peer that would agree on the PSK
//     alone is refused. `openssl s_client -psk` can be the other end.
//   - certificates: each side shows a certificate signed by the CA the
//     other trusts (mutual TLS); the client also checks that the server's
//     certificate names the host it connected to.
// TLS 1.2 and older, session tickets and resumption are off.
//
// kTLS (the kernel encrypting) is opt-in: when OpenSSL and the kernel offer
// it the record layer moves into the kernel, else OpenSSL's own code runs;
// the bytes on the wire are the same.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "transport/net/connection.h"
#include "transport/net/shared_key.h"

// OpenSSL's types, kept out of this header.
struct ssl_ctx_st;
struct ssl_st;

namespace vramflow {

// The PSK identity both ends use in shared-key mode.
inline constexpr char kTlsPskIdentity[] = "vramflow";

// What a user gives: a shared key, or a certificate, its private key and the
// CA that signs the peers' certificates (PEM files).
struct TlsCredentials {
  std::optional<SharedKey> key;
  std::string cert_file;
  std::string key_file;  // the certificate's private key
  std::string ca_file;
  bool ktls = false;  // ask OpenSSL for kernel TLS where it can
  bool empty() const { return !key && cert_file.empty() && key_file.empty() && ca_file.empty(); }
};

// The TLS pre-shared key a shared key stands for: a key written in hex, as
// `vramflow keygen` writes it (an even number of hex digits), is the bytes it
// spells, so that `openssl s_client -psk "$(cat vf.key)"` uses the same key;
// any other key is its bytes as they are. At least kMinKeyBytes either way.
Result<std::vector<uint8_t>> TlsPskFromKey(const SharedKey& key);

// An OpenSSL context for one role. Immutable once made; shared by every
// connection of a sender or receiver and safe to use from many threads.
// It must outlive the handshakes run with it (connections that finished
// their handshake no longer need it).
class TlsContext {
 public:
  enum class Role { kClient, kServer };
  // kInvalidArgument for credentials that are missing, contradictory (a key
  // and a certificate) or unusable (unreadable files, a private key that does
  // not match its certificate), with the file named.
  static Result<std::unique_ptr<TlsContext>> Create(const TlsCredentials& credentials, Role role);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  Role role() const { return role_; }
  bool shared_key() const { return !psk_.empty(); }
  // "shared key (key file 'k')", "certificate 'c.pem' (CA 'ca.pem')": for messages.
  const std::string& describe() const { return describe_; }

 private:
  friend class TlsConnection;
  TlsContext() = default;

  ssl_ctx_st* ctx_ = nullptr;
  Role role_ = Role::kClient;
  std::vector<uint8_t> psk_;  // shared-key mode (the PSK callbacks read it); wiped on destruction
  std::string describe_;
};

// One TLS 1.3 connection over a connected, non-blocking stream socket.
// Thread safety as Connection: one reader and one writer may run at once
// (OpenSSL's calls are serialized inside; waiting for the socket is not).
// Never raises SIGPIPE, also in a process that does not ignore it.
class TlsConnection final : public Connection {
 public:
  // Runs the handshake on `fd`, all of it within `timeout`. A client checks
  // that the server's certificate names `server_host` (certificate mode).
  // `peer` names the other end in messages ("10.0.0.2:41234").
  // Failures: kTimedOut (no handshake within `timeout`), kTruncated or
  // kIoError (the connection went away), kCorruption (the peer is not who it
  // should be or speaks no acceptable TLS: a wrong key, a wrong CA, TLS 1.2,
  // PSK without (EC)DHE); the message names `peer` and OpenSSL's reason.
  static Result<std::unique_ptr<TlsConnection>> Handshake(const TlsContext& context, UniqueFd fd,
                                                          const std::string& server_host,
                                                          std::chrono::milliseconds timeout, const std::string& peer);
  // Sends close_notify (best effort, without waiting) and closes the socket.
  ~TlsConnection() override;

  Status SendAll(std::span<const uint8_t> data, std::chrono::milliseconds timeout, const std::string& what) override;
  Status RecvAll(std::span<uint8_t> data, std::chrono::milliseconds timeout, const std::string& what) override;
  void Shutdown() override;

  // Who the peer proved to be: "PSK identity 'vramflow'" or "certificate
  // 'O=lab,CN=node1'" (RFC 2253, escaped by Printable()); and the cipher suite ("TLS_AES_128_GCM_SHA256").
  const std::string& peer_identity() const { return peer_identity_; }
  const std::string& cipher() const { return cipher_; }
  // Whether the kernel encrypts sending / decrypts receiving (kTLS).
  bool ktls_send() const;
  bool ktls_recv() const;

 private:
  TlsConnection(UniqueFd fd, ssl_st* ssl) : fd_(std::move(fd)), ssl_(ssl) {}
  // Runs `op` (an SSL call returning > 0 on success) under mu_, waiting for
  // the socket outside it while OpenSSL wants to read or write.
  template <typename Op>
  Result<int> Drive(Op op, std::chrono::milliseconds timeout, bool whole_timeout, const std::string& what);

  UniqueFd fd_;
  ssl_st* ssl_;
  mutable std::mutex mu_;  // guards every call on ssl_
  bool broken_ = false;    // a write failed half way: the record stream is lost (guarded by mu_)
  std::string peer_identity_;
  std::string cipher_;
};

}  // namespace vramflow
