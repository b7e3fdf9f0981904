// SPDX-License-Identifier: MIT
// Command-line flags for the stream a command reads (unpack, inspect, verify,
// flatten): STREAM or --listen, the --base and --base-store of an incremental
// stream, and the network and S3 flags of its transport, declared once here.
// Each Add* adds its flags where the command's --help lists them, so the
// commands keep their own order and help texts.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/cli/transport_flags.h"
#include "transport/open_uri.h"

namespace vramflow {

struct SourceFlags {
  std::string stream;              // STREAM: a file, -, fd:N or s3://BUCKET/KEY
  std::string listen;              // --listen URI: receive the stream from a sender instead
  std::vector<std::string> bases;  // --base (streamer/base/base_opener.h)
  std::string base_store;          // --base-store DIR: bases offered to a sender
  TransportFlags net;

  // STREAM, or instead --listen tcp://HOST:PORT or unix:PATH and `what` ("inspect what a sender sends").
  void AddStreamOrListen(CLI::App* cmd, const std::string& what);
  // STREAM alone, required: `what` it is ("incremental stream").
  void AddStream(CLI::App* cmd, const std::string& what);
  // --base, repeatable, with the command's own `help`.
  void AddBases(CLI::App* cmd, const std::string& help);
  // --base-store DIR (with --listen).
  void AddBaseStore(CLI::App* cmd);
  // The network and S3 flags (TransportFlags::Add).
  void AddNetwork(CLI::App* cmd, bool sending, bool receiving) { net.Add(cmd, sending, receiving); }

  // The URI the command opens: with --listen added, STREAM or --listen,
  // checked as `vramflow COMMAND` reads them (cli_uri.h: one of them, a
  // network address only to --listen); else STREAM as it is. An error is a
  // bad command line.
  Status PickStream(const std::string& command, std::string* uri) const;
  // The transport's settings from the network and S3 flags; an error is a bad command line.
  Status ResolveNetwork(TransportOptions* transport) const { return net.Resolve(transport); }
  // Keys and certificates, after Resolve (TransportFlags::LoadCredentials).
  Status LoadCredentials(TransportOptions* transport) const { return net.LoadCredentials(transport); }

 private:
  bool with_listen_ = false;
};

}  // namespace vramflow
