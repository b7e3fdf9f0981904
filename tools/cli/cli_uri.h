// SPDX-License-Identifier: MIT
// Checks of the URIs a command line names, made before any work starts, so
// that no URI can be misread: a network address is listened on only when
// given to --listen, a positional source never listens, and `-` either
// means stdin/stdout or is refused (docs/CLI.md, "URIs").
#pragma once

#include <string>

#include "common/status.h"

namespace vramflow {

// A stream or file the command reads (a positional SOURCE): any URI but a
// network address. tcp:// or unix: is refused, naming the command that
// receives there (`receiver`, e.g. "vramflow unpack") with --listen URI.
Status CheckReadUri(const std::string& uri, const std::string& receiver);

// The value of --listen: tcp://HOST:PORT, unix:PATH or systemd: (socket activation).
Status CheckListenUri(const std::string& uri);

// A destination the command writes: any URI but systemd: (tcp:// and unix:
// connect to a receiver there). Otherwise only checks that it parses.
Status CheckWriteUri(const std::string& uri);

// Before the work starts: a destination file that exists is refused
// without `force` (AlreadyExists), and a directory there is refused even
// with it (a stream file cannot replace it). Devices and FIFOs are written
// as they are; other URIs are checked when they are opened.
Status CheckDestination(const std::string& uri, bool force);

// `flag`'s value names a file or directory that cannot be stdin or stdout
// (a key file, a directory): `-` is refused, saying so.
Status RefuseDash(const std::string& flag, const std::string& value);

}  // namespace vramflow
