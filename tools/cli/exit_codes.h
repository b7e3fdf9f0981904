// SPDX-License-Identifier: MIT
// The `vramflow` command's exit statuses, one place for every command, so that
// a script can tell a broken command line from a corrupt stream, a refused
// peer or an operator's Ctrl-C. docs/CLI.md lists them.
#pragma once

namespace vramflow {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;         // anything not listed below (I/O, network, a full disk, ...)
constexpr int kExitUsage = 2;           // the command line was wrong
constexpr int kExitCorrupt = 3;         // the stream (or image) fails its checks: bytes are wrong or missing
constexpr int kExitAuthentication = 4;  // a peer or endpoint refused our credentials, or we refused its
// Interrupted by a signal, as shells report it (128 + the signal's number).
constexpr int kExitSighup = 129;
constexpr int kExitSigint = 130;
constexpr int kExitSigterm = 143;

}  // namespace vramflow
