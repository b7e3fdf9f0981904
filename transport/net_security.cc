#include "transport/net_security.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

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
