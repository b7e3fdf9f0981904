// Command-line flags for transports, shared by every command that opens a
// sink or source by URI (pack, unpack, send, recv, demo, inspect, verify).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "transport/open_uri.h"

namespace vramflow {

struct TransportFlags {
  std::string key_file;
  std::string cert_file;
  std::string cert_key_file;
  std::string ca_file;
  bool insecure = false;
  bool ktls = false;
  unsigned streams = 4;
  double timeout_s = 30;
  double connect_timeout_s = 10;
  unsigned retries = 3;
  double resume_timeout_s = 30;
  double accept_timeout_s = -1;
  // Receivers: the connection limits (ConnectionLimits, connection_threads.h).
  size_t max_connections = ConnectionLimits{}.max_threads;
  size_t max_handshakes = ConnectionLimits{}.max_handshakes;
  double handshake_timeout_s = ConnectionLimits{}.handshake_deadline.count() / 1000.0;

  // `sending` and `receiving` pick which of the network flags apply.
  void Add(CLI::App* cmd, bool sending, bool receiving);
  // Fills the network part of `options` (TLS credentials included; warnings
  // go to stderr). A key file that cannot be used is an error here.
  Status Resolve(TransportOptions* options) const;
};

}  // namespace vramflow
