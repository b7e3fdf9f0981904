// SPDX-License-Identifier: MIT
#include "tools/cli/transport_flags.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "tools/cli/cli_uri.h"
#include "transport/net/shared_key.h"

namespace vramflow {
namespace {

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

void TransportFlags::Add(CLI::App* cmd, bool sending, bool receiving) {
  auto* group = cmd->add_option_group("network", "tcp://HOST:PORT and unix:PATH transports");
  group->add_option("--key-file", key_file,
                    "tcp://: shared key for TLS 1.3 (PSK with ECDHE; default: $VRAMFLOW_KEY_FILE, else the secret in "
                    "$VRAMFLOW_KEY; make one with `vramflow keygen`)");
  group->add_option("--cert", cert_file, "tcp://: this end's certificate (PEM) for mutual TLS, with --key and --ca");
  group->add_option("--key", cert_key_file, "tcp://: the private key (PEM) of --cert");
  group->add_option("--ca", ca_file, "tcp://: the CA certificates (PEM) that sign the peers' certificates");
  group->add_flag("--insecure", insecure,
                  "tcp://: no TLS: the stream crosses the network readable and unauthenticated (warns)");
  group->add_flag("--ktls", ktls, "tcp://: let the kernel do the TLS record layer where OpenSSL and the kernel can");
  group->add_option("--timeout", timeout_s, "seconds without progress before a peer counts as gone")
      ->capture_default_str();
  if (sending) {
    group->add_option("--streams", streams, "parallel connections (or ?streams=N in the URI)")->capture_default_str();
    group->add_option("--connect-timeout", connect_timeout_s, "seconds to wait for the receiver to answer")
        ->capture_default_str();
    group
        ->add_option("--retries", retries,
                     "reconnect and resume this many times after a broken connection (and try a first connection "
                     "cut off in its handshake again as often)")
        ->capture_default_str();
  }
  if (receiving) {
    group
        ->add_option("--resume-timeout", resume_timeout_s,
                     "seconds to wait for a disconnected sender to come back and resume")
        ->capture_default_str();
    group->add_option("--accept-timeout", accept_timeout_s, "seconds to wait for a sender (default: forever)");
    group
        ->add_option("--max-connections", max_connections,
                     "connections served at once (a thread each), handshakes included; more wait to be accepted")
        ->capture_default_str();
    group
        ->add_option("--max-handshakes", max_handshakes,
                     "of those, connections still in their handshake (not authenticated); a new one past it cuts "
                     "the oldest off")
        ->capture_default_str();
    group
        ->add_option("--handshake-timeout", handshake_timeout_s,
                     "seconds a connection may take from accept to the end of its handshake")
        ->capture_default_str();
  }
  s3.Add(cmd);
}

Status TransportFlags::Resolve(TransportOptions* options) const {
  for (const auto& [flag, value] : {std::pair<const char*, const std::string&>{"--key-file", key_file},
                                    {"--cert", cert_file},
                                    {"--key", cert_key_file},
                                    {"--ca", ca_file}})
    VF_RETURN_IF_ERROR(RefuseDash(flag, value));
  VF_RETURN_IF_ERROR(s3.Resolve(&options->s3));
  NetOptions& net = options->net;
  net.insecure = insecure;
  net.tls.cert_file = cert_file;
  net.tls.key_file = cert_key_file;
  net.tls.ca_file = ca_file;
  net.tls.ktls = ktls;
  net.log = [](const std::string& line) { std::fprintf(stderr, "vramflow: %s\n", line.c_str()); };
  if (streams == 0 || streams > 64) return Status::InvalidArgument("--streams must be 1 .. 64");
  net.streams = streams;
  if (timeout_s <= 0 || connect_timeout_s <= 0) return Status::InvalidArgument("timeouts must be positive");
  if (resume_timeout_s < 0) return Status::InvalidArgument("--resume-timeout cannot be negative");
  net.socket.io_timeout = Millis(timeout_s);
  net.socket.connect_timeout = Millis(connect_timeout_s);
  net.retries = retries;
  net.resume_timeout = Millis(resume_timeout_s);
  if (max_connections == 0 || max_handshakes == 0)
    return Status::InvalidArgument("--max-connections and --max-handshakes must be at least 1");
  if (max_handshakes > max_connections)
    return Status::InvalidArgument("--max-handshakes (" + std::to_string(max_handshakes) +
                                   ") cannot exceed --max-connections (" + std::to_string(max_connections) + ")");
  if (handshake_timeout_s <= 0) return Status::InvalidArgument("--handshake-timeout must be positive");
  net.limits.max_threads = max_connections;
  net.limits.max_handshakes = max_handshakes;
  net.limits.handshake_deadline = std::max(Millis(handshake_timeout_s), std::chrono::milliseconds(1));
  options->accept_timeout = accept_timeout_s < 0 ? std::chrono::milliseconds(-1) : Millis(accept_timeout_s);
  return Status::Ok();
}

Status TransportFlags::LoadCredentials(TransportOptions* options) const {
  VF_RETURN_IF_ERROR(s3.LoadEncryptionKey(&options->s3));
  // $VRAMFLOW_KEY_FILE and $VRAMFLOW_KEY stand in for --key-file, not for
  // certificates or --insecure given on the command line.
  bool explicit_other = !cert_file.empty() || !cert_key_file.empty() || !ca_file.empty() || insecure;
  if (!key_file.empty() || !explicit_other) {
    VF_ASSIGN_OR_RETURN(options->net.tls.key, ResolveKey(key_file));
  }
  return Status::Ok();
}

}  // namespace vramflow
