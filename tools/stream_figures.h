// SPDX-License-Identifier: MIT
// StreamFigures: what the commands' reports say of the stream they wrote or
// read (pack, unpack, verify, flatten, demo), held in one struct that each
// report extends, taken from the engine's PipelineStats in one place and
// written to --json under the same names everywhere (json_report.h,
// PutFigures; docs/CLI.md, "Machine output").
#pragma once

#include <cstdint>

#include "streamer/pipeline.h"

namespace vramflow {

struct StreamFigures {
  uint64_t objects = 0;
  uint64_t raw_bytes = 0;         // the objects' bytes
  uint64_t stream_bytes = 0;      // the stream's bytes
  uint64_t zero_bytes = 0;        // raw bytes stored as zero runs
  uint64_t dedup_bytes = 0;       // raw bytes stored as references to earlier chunks
  uint64_t base_ref_bytes = 0;    // raw bytes taken from the base as they are
  uint64_t base_delta_bytes = 0;  // raw bytes coded as deltas against the base
  double seconds = 0;

  // The raw bytes the stream stores as DATA frames: neither from the base,
  // nor zero runs, nor dedup references (inspect's `new`).
  uint64_t NewBytes() const { return raw_bytes - base_ref_bytes - base_delta_bytes - zero_bytes - dedup_bytes; }
};

// The figures of a dump or restore the engine ran.
StreamFigures FiguresOf(const PipelineStats& stats);

}  // namespace vramflow
