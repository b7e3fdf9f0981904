// SPDX-License-Identifier: MIT
#include "transport/net/connection.h"

#include <sys/socket.h>

#include "transport/net/socket.h"

namespace vramflow {

Status PlainConnection::SendAll(std::span<const uint8_t> data, std::chrono::milliseconds timeout,
                                const std::string& what) {
  return vramflow::SendAll(fd_.get(), data, timeout, what);
}

Status PlainConnection::RecvAll(std::span<uint8_t> data, std::chrono::milliseconds timeout, const std::string& what) {
  return vramflow::RecvAll(fd_.get(), data, timeout, what);
}

void PlainConnection::Shutdown() { ::shutdown(fd_.get(), SHUT_RDWR); }

}  // namespace vramflow
