// SPDX-License-Identifier: MIT
#include "transport/net/net_security.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace vramflow {

Result<std::unique_ptr<TlsContext>> NetTlsContext(const Endpoint& endpoint, const NetOptions& options,
                                                  TlsContext::Role role) {
  if (endpoint.kind != Endpoint::Kind::kTcp) return std::unique_ptr<TlsContext>();
  const bool sending = role == TlsContext::Role::kClient;
  if (options.insecure) {
    if (!options.tls.empty())
      return Status::InvalidArgument(endpoint.uri + ": --insecure and TLS credentials were both given: drop one");
    if (options.log)
      options.log(std::string("warning: ") + (sending ? "sending to " : "receiving on ") + endpoint.uri +
                  " without TLS (--insecure): anyone on the network path can read or change the stream" +
                  (sending ? "" : ", and anyone who reaches the port can send one"));
    return std::unique_ptr<TlsContext>();
  }
  if (options.tls.empty())
    return Status::InvalidArgument(std::string(sending ? "sending to " : "receiving on ") + endpoint.uri +
                                   " needs TLS credentials: a shared key (--key-file, or $VRAMFLOW_KEY_FILE) or a "
                                   "certificate (--cert, --key, --ca); or --insecure for plaintext");
  auto context = TlsContext::Create(options.tls, role);
  if (!context.ok()) return context.status().WithContext(endpoint.uri);
  return context;
}

Status CheckPeerSpeaksPlaintext(int fd, std::chrono::milliseconds timeout, const std::string& peer) {
  constexpr uint8_t kTlsHandshakeRecord = 0x16;
  pollfd p{fd, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(timeout.count(), 0)));
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0) return Status::Ok();
  uint8_t first = 0;
  ssize_t n;
  do {
    n = ::recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n == 1 && first == kTlsHandshakeRecord)
    return Status::InvalidArgument("the peer at " + peer +
                                   " speaks TLS; this receiver runs --insecure (give both ends the same credentials, "
                                   "or the sender --insecure too)");
  return Status::Ok();
}

std::string DescribeKtls(const TlsConnection& connection) {
  const bool send = connection.ktls_send(), recv = connection.ktls_recv();
  if (send || recv)
    return std::string("kTLS in use: the kernel does the TLS record layer (") +
           (send && recv ? "sending and receiving"
            : send       ? "sending only"
                         : "receiving only") +
           ")";
  return "kTLS was asked for (--ktls) but is not available here (OpenSSL without it, or a kernel without "
         "CONFIG_TLS / the tls module): TLS runs in user space";
}

Status CheckUnixPeer(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return Status::FromErrno("reading the UNIX socket peer's credentials", errno);
  if (cred.uid == ::geteuid() || cred.uid == 0) return Status::Ok();
  return Status::Unauthenticated("refused a UNIX socket peer of another user (pid " + std::to_string(cred.pid) +
                                 ", uid " + std::to_string(cred.uid) + "; this receiver runs as uid " +
                                 std::to_string(::geteuid()) + ")");
}

}  // namespace vramflow
