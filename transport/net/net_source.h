// SPDX-License-Identifier: MIT
// The network receiver: listens on a tcp:// or unix: address, takes
// senders' sessions (see net_sink.h), one after another on the same socket
// (NetOptions::sessions, default one), and presents each stream, back in
// order, as a ByteSource.
//
// Read() returns end of input only after the sender's END and every byte
// before it; a session whose connections break waits up to
// NetOptions::resume_timeout for the sender to reconnect and resume. Other
// senders that arrive meanwhile are refused with the reason ("busy"); the
// next session may start once the consumer has finished the current one.
// Senders are not authenticated when they are refused, so they are told
// "busy" and nothing about the destination or the active sender.
//
// Everything an unauthenticated peer can make the receiver hold is bounded:
// connection threads and handshakes (NetOptions::limits, see
// connection_threads.h) and, per session, the memory of its reorder buffer
// (NetOptions::window_bytes plus one segment).
// The consumer must call Finish() with its outcome: the sender's Commit()
// returns that outcome, so a sender only succeeds once the receiver has
// stored or restored the whole stream.
//
// A stream may carry a name (NetOptions::name on the sender). It is only as
// trustworthy as the sender: a consumer that uses it as a file name must
// check it first.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "transport/core/byte_stream.h"
#include "transport/core/uri.h"
#include "transport/net/net_options.h"

namespace vramflow {

// A sender's stream, the name it gave it (empty: none), and the bases this
// receiver offered it when it asked (nullopt: it did not ask, so it was
// offered none and its stream may be built on none of them).
struct NetStream {
  std::unique_ptr<ByteSource> source;
  std::string name;
  std::optional<BaseOffer> offered;
};

class NetReceiver {
 public:
  // Starts listening (bound when this returns).
  static Result<std::unique_ptr<NetReceiver>> Listen(const Endpoint& endpoint, const NetOptions& options);
  virtual ~NetReceiver() = default;
  // The address actually listened on (tcp://0.0.0.0:PORT after port 0).
  virtual std::string uri() const = 0;
  // Waits for the next sender (negative timeout: forever) and returns its
  // stream once its name, if it has one, has arrived. A name other than
  // NetOptions::name (when set) is refused: the sender is told, and the
  // error returned. kTimedOut: no sender within `timeout`; kCancelled:
  // Shutdown(); kIoError: a sender failed before its name arrived. The
  // source keeps what it needs alive.
  virtual Result<NetStream> AcceptStream(std::chrono::milliseconds timeout) = 0;
  // The same, for consumers that have no use for the name.
  Result<std::unique_ptr<ByteSource>> Accept(std::chrono::milliseconds timeout) {
    VF_ASSIGN_OR_RETURN(NetStream stream, AcceptStream(timeout));
    return std::move(stream.source);
  }
  // The offer made to senders of sessions that start from now on (a store
  // that gained a stream). Safe from any thread.
  virtual void OfferBases(BaseOffer offer) = 0;
  // Stops listening and fails the active session (its sender is not told
  // it succeeded); AcceptStream() then returns kCancelled. Safe from any
  // thread, also while another one reads the stream.
  virtual void Shutdown() = 0;
};

}  // namespace vramflow
