// SPDX-License-Identifier: MIT
// The command lines (tools/command.h) of the `vramflow bench` group: `bench
// codecs` (single-core codec figures beside zstd and lz4, tools/codec_bench.h)
// and `bench pipeline` (the flow graphs' throughput on a simulated GPU
// process, tools/pipeline_bench.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tools/cli/command_flags.h"
#include "tools/codec_bench.h"
#include "tools/command.h"
#include "tools/pipeline_bench.h"

namespace vramflow {

class CodecBenchCommand : public Command {
 public:
  // `parent`: the `bench` group.
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "bench codecs"; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  CodecBenchOptions options_;
  std::string size_ = "64M";
  std::string chunk_ = "1M";
  std::string kinds_;
  std::string codecs_;
  bool no_peers_ = false;
};

class PipelineBenchCommand : public Command {
 public:
  // `parent`: the `bench` group.
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "bench pipeline"; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  PipelineBenchOptions options_;
  DumpFlags flags_;
  std::string size_ = "512M";
  bool no_scaling_ = false;
};

}  // namespace vramflow
