// SPDX-License-Identifier: MIT
// `vramflow send`, `vramflow recv` and `vramflow keygen`: moving a stream
// between any two transports as it is, and making keys for the network.
#pragma once

#include <cstdint>
#include <string>

#include "common/cleanup_registry.h"
#include "common/progress.h"
#include "common/status.h"
#include "transport/open_uri.h"

namespace vramflow {

struct TransferOptions {
  std::string source;  // URI; a network URI is listened on
  std::string sink;    // URI
  TransportOptions transport;
  ProgressStyle progress = ProgressStyle(true);
  // --max-memory: a network source's receive window (its share, streamer/budget_plan.h)
  // and the verification of a stream stored here (the rest).
  uint64_t max_memory = 256ull << 20;
  // recv: earlier streams a sender may build its stream on (base_store.h;
  // docs/NETWORK.md, "Bases"); empty: none offered. A receiver whose output
  // is seekable (a file, s3://) tells a sender that asks that it stores the
  // stream, with or without a store.
  std::string base_store;
};

struct TransferReport {
  uint64_t bytes = 0;
  double seconds = 0;
  std::string peer;  // the other end, for messages
};

// Copies every byte from `source` to `sink` unchecked and commits the sink;
// adds the bytes to `*bytes`. A progress bar labelled `label` when `progress`.
Status CopyStream(ByteSource& source, ByteSink& sink, const std::string& label, ProgressStyle progress,
                  uint64_t* bytes);

// Copies every byte from the source to the sink, commits the sink, and
// reports the outcome back to the source (a network sender learns whether
// the receiver stored the stream). Used by both send and recv. Where the
// stream is stored here (any sink but a network receiver, which verifies it
// itself) it must verify first (verified_copy.h): only a complete, valid
// stream is committed, and only then is a sender told DONE.
Status RunTransfer(const TransferOptions& options, const std::string& label, TransferReport* report);

// Writes a new random key to `path` (mode 0600, never over an existing file),
// or to stdout for "-".
Status RunKeygen(const std::string& path, CleanupRegistry* cleanup = nullptr);

}  // namespace vramflow
