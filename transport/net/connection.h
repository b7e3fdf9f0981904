// SPDX-License-Identifier: MIT
// Connection: one connected stream socket as the network protocol sees it,
// either plain (UNIX sockets, or TCP with --insecure) or TLS (tls.h). The
// protocol's channels (net_protocol.h) read and write whole buffers through
// it with a deadline of no progress, and another thread may cut it short.
//
// Thread safety: SendAll() and RecvAll() may run at the same time on two
// threads (one writer, one reader); Shutdown() is safe from any thread.
#pragma once

#include <chrono>
#include <span>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

class Connection {
 public:
  virtual ~Connection() = default;
  // Sends all of `data`. kTimedOut when no byte could be sent for `timeout`,
  // kIoError on a reset or closed peer.
  virtual Status SendAll(std::span<const uint8_t> data, std::chrono::milliseconds timeout, const std::string& what) = 0;
  // Receives exactly data.size() bytes. kTruncated when the peer closes
  // first, kTimedOut when nothing arrives for `timeout`.
  virtual Status RecvAll(std::span<uint8_t> data, std::chrono::milliseconds timeout, const std::string& what) = 0;
  // Wakes any thread blocked in SendAll() or RecvAll() and makes further
  // I/O fail.
  virtual void Shutdown() = 0;
};

// A socket without encryption: socket.h's SendAll and RecvAll.
class PlainConnection final : public Connection {
 public:
  explicit PlainConnection(UniqueFd fd) : fd_(std::move(fd)) {}
  Status SendAll(std::span<const uint8_t> data, std::chrono::milliseconds timeout, const std::string& what) override;
  Status RecvAll(std::span<uint8_t> data, std::chrono::milliseconds timeout, const std::string& what) override;
  void Shutdown() override;

 private:
  UniqueFd fd_;
};

}  // namespace vramflow
