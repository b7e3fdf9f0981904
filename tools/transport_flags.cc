#include "tools/transport_flags.h"

namespace vramflow {
namespace {

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

void TransportFlags::Add(CLI::App* cmd, bool sending, bool receiving) {
  auto* group = cmd->add_option_group("network", "tcp://HOST:PORT and unix:PATH transports");
  group->add_option("--key-file", key_file,
                    "shared secret for mutual authentication and encryption (default: $VRAMFLOW_KEY_FILE, else the "
                    "secret in $VRAMFLOW_KEY; make one with `vramflow keygen`)");
  group->add_option("--timeout", timeout_s, "seconds without progress before a peer counts as gone")->capture_default_str();
  if (sending) {
    group->add_flag("--no-encrypt", no_encrypt, "with a key: authenticate the stream but send it unencrypted");
    group->add_option("--streams", streams, "parallel connections (or ?streams=N in the URI)")->capture_default_str();
    group->add_option("--connect-timeout", connect_timeout_s, "seconds to wait for the receiver to answer")
        ->capture_default_str();
    group->add_option("--retries", retries, "reconnect and resume this many times after a broken connection")
        ->capture_default_str();
  }
  if (receiving) {
    group->add_option("--resume-timeout", resume_timeout_s,
                      "seconds to wait for a disconnected sender to come back and resume")
        ->capture_default_str();
    group->add_option("--accept-timeout", accept_timeout_s, "seconds to wait for a sender (default: forever)");
  }
}

Status TransportFlags::Resolve(TransportOptions* options) const {
  NetOptions& net = options->net;
  VF_ASSIGN_OR_RETURN(net.key, ResolveKey(key_file));
  net.encrypt = !no_encrypt;
  if (streams == 0 || streams > 64) return Status::InvalidArgument("--streams must be 1 .. 64");
  net.streams = streams;
  if (timeout_s <= 0 || connect_timeout_s <= 0) return Status::InvalidArgument("timeouts must be positive");
  if (resume_timeout_s < 0) return Status::InvalidArgument("--resume-timeout cannot be negative");
  net.socket.io_timeout = Millis(timeout_s);
  net.socket.connect_timeout = Millis(connect_timeout_s);
  net.retries = retries;
  net.resume_timeout = Millis(resume_timeout_s);
  options->accept_timeout = accept_timeout_s < 0 ? std::chrono::milliseconds(-1) : Millis(accept_timeout_s);
  return Status::Ok();
}

}  // namespace vramflow
