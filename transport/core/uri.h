// SPDX-License-Identifier: MIT
// Endpoint: where a stream goes or comes from, parsed from the URI that the
// CLI and the plugin accept everywhere:
//
//   PATH               a file (written through a temporary name)
//   -                  stdout / stdin
//   fd:N               an inherited file descriptor (pipe, file, socket)
//   unix:/PATH         a UNIX stream socket, vramflow's network protocol
//   tcp://HOST:PORT    TCP, vramflow's network protocol; HOST may be a name,
//                      an IPv4 address or a bracketed IPv6 address ([::1])
//   systemd:           listening only: the TCP or UNIX listening socket
//                      systemd passed (socket activation, fd 3 with
//                      LISTEN_PID/LISTEN_FDS; transport/net/systemd_socket.h)
//   s3://BUCKET/KEY    an S3 object (docs/S3.md); KEY may contain '/'
//
// Network URIs take query parameters: ?streams=N (parallel connections).
// As a sink, a network URI is a receiver to connect to; as a source
// (OpenSource), the address to listen on: the CLI only takes a listening
// address from `--listen URI`, never from a positional source.
//
// A path that reads as HOST:PORT ("10.0.0.2:7070", "host:7070/x",
// "[::1]:7070", ":7070") is refused, naming the tcp:// URI it probably
// meant: a file of that name is written "./10.0.0.2:7070".
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace vramflow {

struct Endpoint {
  enum class Kind { kPath, kStdio, kFd, kUnix, kTcp, kS3, kSystemd };
  Kind kind = Kind::kPath;
  std::string path;      // kPath, kUnix
  int fd = -1;           // kFd
  std::string host;      // kTcp, without brackets
  uint16_t port = 0;     // kTcp
  unsigned streams = 0;  // kTcp, kUnix: ?streams=N; 0 = the default
  std::string bucket;    // kS3
  std::string key;       // kS3, as given (not URI-decoded)
  std::string uri;       // as given, for messages

  bool is_network() const { return kind == Kind::kUnix || kind == Kind::kTcp || kind == Kind::kSystemd; }
};

// Parses `uri`; errors name the URI and what is wrong with it.
Result<Endpoint> ParseEndpoint(const std::string& uri);

}  // namespace vramflow
