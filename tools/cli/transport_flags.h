// SPDX-License-Identifier: MIT
// Command-line flags for transports, shared by every command that opens a
// sink or source by URI (pack, unpack, send, recv, demo, inspect, verify).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tools/cli/s3_flags.h"
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
  S3Flags s3;  // --endpoint-url, --region, --profile, --ca-bundle, --sse, --sse-kms-key-id, --sse-c-key
  // Receivers: the connection limits (ConnectionLimits, connection_threads.h).
  size_t max_connections = ConnectionLimits{}.max_threads;
  size_t max_handshakes = ConnectionLimits{}.max_handshakes;
  double handshake_timeout_s = ConnectionLimits{}.handshake_deadline.count() / 1000.0;

  // `sending` and `receiving` pick which of the network flags apply.
  void Add(CLI::App* cmd, bool sending, bool receiving);
  // Fills the network part of `options` from the flags (warnings go to
  // stderr); an error is a bad command line.
  Status Resolve(TransportOptions* options) const;
  // Loads the shared key (--key-file, $VRAMFLOW_KEY_FILE, $VRAMFLOW_KEY)
  // and --sse-c-key's key into `options`, after Resolve: a key that is missing or cannot be used
  // is a failure of the job (exit status 1), as a missing input is.
  Status LoadCredentials(TransportOptions* options) const;
};

}  // namespace vramflow
