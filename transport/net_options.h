// Settings shared by the network sender (net_sink.h) and receiver
// (net_source.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "transport/connection_threads.h"
#include "transport/net_crypto.h"
#include "transport/socket.h"

namespace vramflow {

struct NetOptions {
  unsigned streams = 4;                // parallel connections (the URI's ?streams=N wins)
  uint32_t segment_bytes = 1u << 20;   // stream bytes per DATA message
  // Sender: most unacknowledged bytes kept for resending. Receiver: its
  // memory budget for one session's received-but-unconsumed bytes, whatever
  // the sender asks for (docs/NETWORK.md, "Memory").
  uint64_t window_bytes = 64ull << 20;
  std::optional<SharedKey> key;        // authenticate (and encrypt) when set
  bool encrypt = true;                 // with a key: encrypt payloads, not only authenticate them
  SocketOptions socket;
  // Sender: how often a broken transfer is resumed before giving up.
  unsigned retries = 3;
  // Receiver: how long a session whose connections broke waits for its
  // sender to come back before it fails.
  std::chrono::milliseconds resume_timeout{30000};
  // Sender: the stream's name (at most kMaxStreamName bytes), sent
  // authenticated so that a receiver taking several streams can store each
  // under it; empty: an unnamed stream. Receiver: when set, a named stream
  // must carry exactly this name (an unnamed one is taken), so that the
  // wrong stream is refused instead of restored.
  std::string name;
  // Receiver: how many sessions it takes one after another, each once the
  // one before has finished (0: no limit). Senders beyond are refused.
  unsigned sessions = 1;
  // Receiver: connection threads, connections in their handshake (before
  // authentication), and how long a handshake may take.
  ConnectionLimits limits;
  // Called with the bytes done: acknowledged by the receiver (sender) or
  // handed to the consumer (receiver). From an internal thread.
  std::function<void(uint64_t)> progress;
};

}  // namespace vramflow
