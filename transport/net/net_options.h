// SPDX-License-Identifier: MIT
// Settings shared by the network sender (net_sink.h) and receiver
// (net_source.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/cleanup_registry.h"
#include "transport/net/base_offer.h"
#include "transport/net/connection_threads.h"
#include "transport/net/socket.h"
#include "transport/net/tls.h"

namespace vramflow {

struct NetOptions {
  unsigned streams = 4;               // parallel connections (the URI's ?streams=N wins)
  uint32_t segment_bytes = 1u << 20;  // stream bytes per DATA message
  // Sender: most unacknowledged bytes kept for resending. Receiver: its
  // memory budget for one session's received-but-unconsumed bytes, whatever
  // the sender asks for (docs/NETWORK.md, "Memory").
  uint64_t window_bytes = 64ull << 20;
  // TCP: every connection runs TLS 1.3 with these (a shared key, or a
  // certificate for mutual TLS; tls.h). Without any, a TCP sender or receiver
  // refuses to start unless `insecure` is set. UNIX sockets never use TLS:
  // the socket file is mode 0600 and the receiver takes only peers of its own
  // user (or root).
  TlsCredentials tls;
  bool insecure = false;  // TCP without TLS: anyone on the path reads and writes the stream
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
  // Sender: ask the receiver which bases it holds before the stream starts
  // (hello flag kHelloBases; docs/NETWORK.md, "Bases"). Its answer goes to
  // `on_bases` before OpenNetSink() returns; the sink is Seekable() when the
  // receiver stores the stream, so that the writer indexes it.
  bool ask_bases = false;
  std::function<void(const BaseOffer&)> on_bases;
  // Receiver: what it answers a sender that asks (NetReceiver::OfferBases
  // replaces it for later sessions). Default: no bases, not stored.
  BaseOffer base_offer;
  // Receiver: how many sessions it takes one after another, each once the
  // one before has finished (0: no limit). Senders beyond are refused.
  unsigned sessions = 1;
  // Receiver: connection threads, connections in their handshake (before
  // authentication), and how long a handshake may take.
  ConnectionLimits limits;
  // Called with the bytes done: acknowledged by the receiver (sender) or
  // handed to the consumer (receiver). From an internal thread.
  std::function<void(uint64_t)> progress;
  // Called with warnings (--insecure) and, on a receiver, with each refused
  // connection (a failed TLS handshake, a foreign UNIX peer) and its peer
  // address. From an internal thread; may be empty.
  std::function<void(const std::string&)> log;
  // If the process is interrupted (common/cleanup_registry.h), a sender
  // tells its receiver, and a receiver its sender, that it was (an ERROR
  // message with the reason), so the peer fails at once saying so instead of
  // timing out. nullptr: nothing registered.
  CleanupRegistry* cleanup = nullptr;
};

}  // namespace vramflow
