// The network receiver: listens on a tcp:// or unix: address, takes one
// sender's session (see net_sink.h) and presents its stream, back in order,
// as a ByteSource.
//
// Read() returns end of input only after the sender's END and every byte
// before it; a session whose connections break waits up to
// NetOptions::resume_timeout for the sender to reconnect and resume. Other
// senders that arrive meanwhile are refused with the reason ("busy"). The
// consumer must call Finish() with its outcome: the sender's Commit() returns
// that outcome, so a sender only succeeds once the receiver has stored or
// restored the whole stream.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "transport/byte_stream.h"
#include "transport/net_options.h"
#include "transport/uri.h"

namespace vramflow {

class NetReceiver {
 public:
  // Starts listening. `destination` names where the stream goes, for
  // messages to refused senders ("file 'ckpt.vfs'").
  static Result<std::unique_ptr<NetReceiver>> Listen(const Endpoint& endpoint, const NetOptions& options,
                                                     std::string destination);
  virtual ~NetReceiver() = default;
  // The address actually listened on (tcp://0.0.0.0:PORT after port 0).
  virtual std::string uri() const = 0;
  // Waits for a sender (negative timeout: forever) and returns its stream.
  // One session per receiver; the source keeps what it needs alive.
  virtual Result<std::unique_ptr<ByteSource>> Accept(std::chrono::milliseconds timeout) = 0;
};

}  // namespace vramflow
