// SPDX-License-Identifier: MIT
// Which protection a network sender or receiver runs, decided in one place
// (docs/NETWORK.md, "Security"):
//   - tcp://: TLS 1.3 with the credentials in NetOptions::tls (a shared key
//     or certificates); none given is an error unless NetOptions::insecure,
//     which runs plaintext and warns through NetOptions::log;
//   - unix:: no TLS; the socket file is mode 0600 (socket.h) and a receiver
//     takes only peers of its own user or root (CheckUnixPeer).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "transport/core/uri.h"
#include "transport/net/net_options.h"
#include "transport/net/tls.h"

namespace vramflow {

// The TLS context for `endpoint` in `role`, or nullptr where none runs
// (unix:, or tcp:// with --insecure, after its warning). kInvalidArgument
// for tcp:// without credentials and without --insecure, for --insecure
// together with credentials, and for unusable credentials.
Result<std::unique_ptr<TlsContext>> NetTlsContext(const Endpoint& endpoint, const NetOptions& options,
                                                  TlsContext::Role role);

// A plaintext (--insecure) TCP receiver's peer must not open with a TLS
// record (a sender with credentials): waits up to `timeout` for its first
// byte, without consuming it, and fails naming `peer` when it is 0x16 (a TLS
// handshake record). Silence or a closed connection pass (the hello read
// that follows reports them).
Status CheckPeerSpeaksPlaintext(int fd, std::chrono::milliseconds timeout, const std::string& peer);

// With --ktls: what kTLS does for `connection` after its handshake, for a
// log line: in use (which directions), or why TLS runs in user space.
std::string DescribeKtls(const TlsConnection& connection);

// A UNIX socket peer must run as this process's user, or as root
// (SO_PEERCRED); kInvalidArgument naming its pid and uid otherwise.
Status CheckUnixPeer(int fd);

}  // namespace vramflow
