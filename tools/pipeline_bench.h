// SPDX-License-Identifier: MIT
// `vramflow bench pipeline`: dump and restore figures of the flow graphs on a
// simulated GPU process, with one thread and with N, and optionally the raw
// VRAM bytes exported so peer tools (bench/compare.sh) can be run on the
// same data.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "common/status.h"
#include "streamer/pipeline.h"

namespace vramflow {

struct PipelineBenchOptions {
  uint32_t gpus = 2;
  uint64_t bytes_per_gpu = 512ull << 20;
  std::string layout = "model";  // "model" (demo layout) or "zeros" (one zero-filled BO per GPU)
  PipelineOptions pipeline;
  bool single_thread_too = true;  // also measure with 1 thread (scaling)
  unsigned repeat = 3;            // runs per thread count; the fastest dump and restore are reported
  std::string work_dir;           // where the stream goes (default: /dev/shm or $TMPDIR)
  std::string export_raw;         // write the raw VRAM bytes here
  std::string json_path;
  // Pins the simulated rings' threads to these CPUs. Run the bench on other
  // CPUs (taskset) to see the pipeline with copies that cost it no CPU, as
  // with SDMA.
  std::vector<int> dma_cpus;
};

Status RunPipelineBench(const PipelineBenchOptions& options, std::ostream& out);

}  // namespace vramflow
