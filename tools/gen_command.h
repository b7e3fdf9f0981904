// SPDX-License-Identifier: MIT
// `vramflow gen`'s command line (tools/command.h): model-like test data
// (datagen/model_data.h, docs/DATA.md) written to a file, stdout, an fd or an
// S3 object.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "datagen/model_data.h"
#include "tools/cli/s3_flags.h"
#include "tools/command.h"
#include "transport/open_uri.h"

namespace vramflow {

class GenCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "gen"; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  std::string kind_text_ = "bf16";
  std::string size_text_ = "64M";
  std::string output_;
  uint64_t seed_ = 1;
  uint32_t step_ = 0;
  bool force_ = false;
  S3Flags s3_;
  // Resolved: what to write, and the sink's options (a file, -, fd:N or s3://BUCKET/KEY).
  DataKind kind_ = DataKind::kBf16Weights;
  uint64_t size_ = 0;
  TransportOptions sink_options_;
};

}  // namespace vramflow
