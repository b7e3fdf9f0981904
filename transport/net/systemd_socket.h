// SPDX-License-Identifier: MIT
// systemd socket activation (`--listen systemd:`): takes the listening socket
// that systemd (or systemd-socket-activate) passed as fd 3, following
// sd_listen_fds(3) by hand (no libsystemd): LISTEN_PID must be this process
// and LISTEN_FDS at least 1. The variables are then unset, so that nothing
// this process starts takes the socket as its own, and every passed fd is
// made close-on-exec.
#pragma once

#include "common/status.h"
#include "common/unique_fd.h"

namespace vramflow {

// The first passed fd (3), checked to be a listening stream socket (TCP or
// UNIX; Listener::Adopt checks that). Fails, saying which variable is
// missing or wrong, when this process was not socket-activated. Takes the
// socket once: a second call fails (the variables are gone).
Result<UniqueFd> TakeSystemdListenSocket();

}  // namespace vramflow
