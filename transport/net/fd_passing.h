// SPDX-License-Identifier: MIT
// File descriptors over UNIX stream sockets (SCM_RIGHTS), with whole-buffer
// semantics and deadlines like transport/net/socket.h.
//
// Used where one process hands open files to another: KFD's dma-buf fds
// from a restored task to the main CRIU process (parallel restore), and the
// simulated KFD's files between the harness and the plugin.
//
// Each message carries at least one data byte, so a receiver can tell a
// message with fds from a closed peer. Received fds are close-on-exec.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

// The most fds one call sends; the kernel's SCM_MAX_FD is 253.
inline constexpr size_t kMaxFdsPerMessage = 250;

// Sends all of `data` (not empty) and, with its first byte, `fds` (at most
// kMaxFdsPerMessage; the caller keeps its copies). Fails like SendAll.
Status SendWithFds(int socket, std::span<const uint8_t> data, std::span<const int> fds,
                   std::chrono::milliseconds timeout, const std::string& what);

// Receives exactly data.size() bytes and appends every fd that arrived with
// them to *fds. Fails like RecvAll; also a Corruption error if the kernel
// truncated the fds (MSG_CTRUNC), with whatever arrived closed.
Status RecvWithFds(int socket, std::span<uint8_t> data, std::vector<UniqueFd>* fds, std::chrono::milliseconds timeout,
                   const std::string& what);

}  // namespace vramflow
