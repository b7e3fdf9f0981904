// SPDX-License-Identifier: MIT
#include "tools/bench_command.h"

#include <iostream>
#include <optional>
#include <vector>

#include "common/units.h"
#include "tools/cli/cli_uri.h"

namespace vramflow {

void CodecBenchCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand(
      "codecs", "Single-core ratio and speed per codec and data kind, beside zstd -1, zstd --fast=1 and lz4 -1");
  cmd_->add_option("-s,--size", size_, "bytes per data kind")->capture_default_str()->check(SizeValidator());
  cmd_->add_option("--chunk-size", chunk_, "chunk size")->capture_default_str()->check(SizeValidator());
  cmd_->add_option("--kinds", kinds_, "comma-separated data kinds (default: all)");
  cmd_->add_option("--codecs", codecs_, "comma-separated vramflow codec specs (default: auto,zstd:1,zstd:-1,lz4)");
  cmd_->add_option("--min-seconds", options_.min_seconds, "time per measurement")->capture_default_str();
  cmd_->add_flag("--no-peers", no_peers_, "skip the zstd/lz4 command-line tools");
  cmd_->add_option("--json", options_.json_path, "also write results as JSON to this file");
}

Status CodecBenchCommand::Resolve() {
  VF_RETURN_IF_ERROR(RefuseDash("--json", options_.json_path));
  options_.size = ParseSize(size_).value();  // checked by SizeValidator
  const uint64_t chunk = ParseSize(chunk_).value();
  if (chunk == 0 || chunk > (64u << 20)) return Status::InvalidArgument("--chunk-size must be 1 .. 64M");
  options_.chunk_size = static_cast<uint32_t>(chunk);
  options_.peers = !no_peers_;
  if (!kinds_.empty()) {
    options_.kinds.clear();
    for (const std::string& k : CLI::detail::split(kinds_, ',')) {
      std::optional<DataKind> kind = ParseDataKind(k);
      if (!kind) return Status::InvalidArgument("unknown data kind '" + k + "'");
      options_.kinds.push_back(*kind);
    }
  }
  if (!codecs_.empty()) options_.codecs = CLI::detail::split(codecs_, ',');
  return Status::Ok();
}

Status CodecBenchCommand::Run(const CommandContext& context) {
  std::vector<CodecBenchRow> rows;
  return RunCodecBench(options_, std::cout, &rows);
}

void PipelineBenchCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand(
      "pipeline",
      "Dump and restore throughput of the flow graphs on a simulated GPU process, with 1 thread and with N "
      "(bench/compare.sh runs this beside pzstd, zstd and lz4)");
  cmd_->add_option("-g,--gpus", options_.gpus, "simulated GPUs")->capture_default_str();
  cmd_->add_option("-s,--size-per-gpu", size_, "VRAM per GPU")->capture_default_str()->check(SizeValidator());
  cmd_->add_option("--layout", options_.layout, "model (the demo's BOs) or zeros (one zero-filled BO per GPU)")
      ->capture_default_str();
  cmd_->add_flag("--no-scaling", no_scaling_, "skip the 1-thread run");
  cmd_->add_option("--repeat", options_.repeat, "runs per thread count; the fastest is reported")
      ->capture_default_str();
  cmd_->add_option("--work-dir", options_.work_dir, "where the stream is written (default: /dev/shm)");
  cmd_->add_option("--export-raw", options_.export_raw, "also write the raw VRAM bytes to this file");
  cmd_->add_option("--json", options_.json_path, "also write results as JSON to this file");
  cmd_->add_option("--dma-cpus", options_.dma_cpus,
                   "run the simulated rings' copies on these CPUs only (comma-separated); with the bench itself on "
                   "other CPUs (taskset), copies cost the pipeline no CPU, as with SDMA")
      ->delimiter(',');
  flags_.Add(cmd_);
}

Status PipelineBenchCommand::Resolve() {
  VF_RETURN_IF_ERROR(flags_.Resolve(&options_.pipeline));
  VF_RETURN_IF_ERROR(RefuseDash("--json", options_.json_path));
  VF_RETURN_IF_ERROR(RefuseDash("--work-dir", options_.work_dir));
  VF_RETURN_IF_ERROR(RefuseDash("--export-raw", options_.export_raw));
  options_.bytes_per_gpu = ParseSize(size_).value();  // checked by SizeValidator
  options_.single_thread_too = !no_scaling_;
  return Status::Ok();
}

Status PipelineBenchCommand::Run(const CommandContext& context) {
  Status s = RunPipelineBench(options_, std::cout);
  std::cout.flush();
  return s;
}

}  // namespace vramflow
