// SPDX-License-Identifier: MIT
// `vramflow pack`: files (or stdin) in, one chunk stream out.
//
// Regular files ride the dump graph (streamer/pipeline.h) through a file
// device: parallel reads, encoding and dedup inside the memory budget.
// Inputs that are not regular files (stdin, pipes, s3://) have no size up
// front and cannot be read at offsets; a command with any of them reads its
// inputs in order and encodes their chunks on every thread
// (streamer/sequential_dump.h), without dedup.
//
// With a base (--base, docs/FORMAT.md 4.9 to 4.12) the stream is
// incremental: chunks equal to the base's chunk at the same place of the
// matched object become references to it, changed ones deltas where smaller;
// the base is opened by index (file or s3://), never read whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/progress.h"
#include "common/status.h"
#include "streamer/base/net_base_choice.h"
#include "streamer/pipeline.h"
#include "tools/stream_figures.h"
#include "transport/open_uri.h"

namespace vramflow {

struct PackOptions {
  std::vector<std::string> inputs;   // paths, "-" for stdin, or s3://BUCKET/KEY
  std::string output;                // any sink URI: path, -, fd:N, tcp://HOST:PORT, unix:PATH
  std::string stdin_name = "stdin";  // object name for "-"
  PipelineOptions pipeline;          // codec, chunk size, threads, budget, dedup
  bool force = false;                // overwrite an existing output file or S3 object
  bool fsync = false;                // make the output durable before reporting success
  TransportOptions transport;        // network settings for tcp:// and unix: outputs
  ProgressStyle progress;            // on stderr
  // The base of an incremental stream, then further streams of its chain
  // (BaseOpenOptions::more_locations); empty: a full stream. To a network
  // receiver they are candidates: the stream is built on the first one the
  // receiver holds, then on base_store's streams, newest first
  // (net_base_choice.h; docs/NETWORK.md, "Bases"). A network output always
  // asks, so that a receiver that stores the stream gets it with its index
  // and digests (the next one's base).
  std::vector<std::string> bases;
  std::string base_store;       // to a network receiver: a directory of candidate bases
  bool base_refs_only = false;  // match by the base's digests alone; no deltas, no base chunk read
  bool digests = false;         // write DIGEST_BLOCKs (always with a base)
};

// The stream's figures (zero_bytes, dedup_bytes and the base's bytes included), and:
struct PackReport : StreamFigures {
  uint64_t legacy_images = 0;
  bool sequential = false;    // inputs read in order (stdin, pipe or s3:// inputs), without dedup
  unsigned threads = 0;       // encoding threads used
  double writer_seconds = 0;  // the ordered writer (PipelineStats::serial_seconds)
  // With a base: its stream id (StreamFigures has the raw bytes taken from
  // it as they are and coded as deltas against it).
  bool incremental = false;
  std::string base_id;  // hex
};

Status RunPack(const PackOptions& options, PackReport* report);

}  // namespace vramflow
