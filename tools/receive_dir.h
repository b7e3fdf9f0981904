// SPDX-License-Identifier: MIT
// `vramflow recv --output-dir DIR`: takes streams one after another on one
// listening address (never closed and re-bound between them, so a sender's
// next connect cannot race the receiver) and stores each in DIR under the
// name its sender gave it (NetOptions::name; the plugin names each GPU's
// stream after its image, amdgpu-vram-<id>-<gpu_id>.img).
//
// A name comes from the network, so it is checked as one plain file name
// (safe_path.h: CheckSafeFileName) before anything is written; an unnamed
// stream, a refused name (one shaped like a temporary file's, ".vf-tmp-",
// too) or an existing file (without `overwrite`, unless both are the
// plugin's VRAM streams, amdgpu-vram-<id>-<gpu_id>.img, which a later dump
// replaces) fails that stream, its sender is told why, and the receiver goes
// on with the next one. Each stream is verified as it arrives (verified_copy.h), written
// under a temporary name in DIR and renamed once complete and valid; a
// failed, invalid or interrupted one leaves nothing behind.
#pragma once

#include <cstdint>
#include <string>

#include "common/progress.h"
#include "common/status.h"
#include "transport/open_uri.h"

namespace vramflow {

struct ReceiveDirOptions {
  std::string listen;          // tcp://HOST:PORT or unix:PATH
  std::string dir;             // an existing directory
  unsigned count = 0;          // stop after this many stored streams; 0: only on SIGINT or SIGTERM
  TransportOptions transport;  // file.overwrite, file.fsync, net (keys, timeouts), accept_timeout (per stream)
  ProgressStyle progress = ProgressStyle(true);  // on stderr
  bool notes = true;                             // the listening address and a line per stored stream, on stderr
  // --max-memory: the receive window (a quarter, at most 64 MiB) and the
  // verification of each stream (the rest).
  uint64_t max_memory = 256ull << 20;
  // Where earlier streams are that a sender may build its stream on
  // (base_store.h; docs/NETWORK.md, "Bases"); empty: `dir`. Offered to
  // senders that ask, scanned again after each stored stream (so the stream
  // just stored can be the next one's base). A stream built on a base is
  // verified against it (every reference's bytes from the store) before it
  // is stored, as it arrived: still incremental, with its index.
  std::string base_store;
};

struct ReceiveDirReport {
  unsigned stored = 0;
  unsigned failed = 0;  // refused, or broken off, and not stored
  uint64_t bytes = 0;   // of the stored streams
};

// Runs until `count` streams are stored or SIGINT/SIGTERM arrives (SIGINT
// and SIGTERM are blocked in this process meanwhile: call it before any
// other thread starts). OK only if every stream that arrived was stored and
// no signal cut one short; failures are also printed on stderr as they
// happen.
Status RunReceiveDirectory(const ReceiveDirOptions& options, ReceiveDirReport* report);

}  // namespace vramflow
