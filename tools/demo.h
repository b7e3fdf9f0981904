// SPDX-License-Identifier: MIT
// `vramflow demo`: the whole data path on a simulated GPU process.
//
// Builds a simulated process (model-like BOs on several simulated GPUs),
// dumps it through the dump graph to a file, restores the file into fresh
// simulated GPUs through the restore graph, checks every byte and prints a
// table: sizes, ratio, dump and restore speed, peak memory, dedup and zero
// savings.
//
// Live migration in two halves: `--to tcp://HOST:PORT` (or unix:PATH) dumps
// the process straight into the network, and `--listen` on the other end
// restores it into fresh simulated GPUs as the frames arrive and checks every
// byte; the sender reports success only after the receiver has.
//
// Incremental (`--base`): a full checkpoint, a simulated training step, and a
// second checkpoint against the first (BASE_REF and BASE_DELTA frames),
// restored with its base and checked; both checkpoints' sizes and times.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "common/progress.h"
#include "common/status.h"
#include "streamer/pipeline.h"
#include "tools/stream_figures.h"
#include "transport/open_uri.h"

namespace vramflow {

struct DemoOptions {
  uint32_t gpus = 2;
  uint64_t bytes_per_gpu = 1ull << 30;
  uint32_t rings = 2;                // simulated SDMA rings per GPU
  double ring_bytes_per_second = 0;  // 0: memcpy speed
  PipelineOptions pipeline;
  // Where the stream goes: a file (kept), a network receiver, -, fd:N; empty:
  // a temporary file (in /dev/shm when writable), restored and removed.
  std::string destination;
  std::string listen;  // receive the stream here and restore it instead of dumping
  // With --listen: earlier streams the sender may build its stream on
  // (streamer/base/base_store.h; docs/NETWORK.md, "Bases"), offered and resolved here.
  std::string base_store;
  TransportOptions transport;
  ProgressStyle progress = ProgressStyle(true);
  bool json = false;
  bool force = false;  // --to: replace an existing file or S3 object
  // --base: an incremental checkpoint. A full checkpoint first (with chunk
  // digests), a simulated training step (sim/gpu/training_step.h), then a
  // checkpoint against the first, restored with it into fresh GPUs and
  // checked; both streams are temporary. Not with --to or --listen.
  bool incremental = false;
};

// The dump's stream figures (StreamFigures; its seconds are the dump's), and:
struct DemoReport : StreamFigures {
  double restore_seconds = 0;
  uint64_t dump_peak_anon = 0;     // RssAnon peak while dumping
  uint64_t restore_peak_anon = 0;  // RssAnon peak while restoring
  uint64_t budget_peak = 0;
  unsigned threads = 0;
  bool restored_here = false;  // false when the stream went to another process
  // --base: the full checkpoint (the base); StreamFigures has what the
  // incremental one took from it.
  uint64_t base_stream_bytes = 0;
  double base_dump_seconds = 0;
  uint64_t changed_bytes = 0;  // bytes the training step perturbed or rewrote
};

Status RunDemo(const DemoOptions& options, std::ostream& out, DemoReport* report);

}  // namespace vramflow
