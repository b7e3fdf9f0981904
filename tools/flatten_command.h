// SPDX-License-Identifier: MIT
// `vramflow flatten`'s command line (tools/command.h): its flags, their
// checks, and the run with its summary (the job: tools/flatten.h).
#pragma once

#include <string>

#include "tools/cli/command_flags.h"
#include "tools/cli/source_flags.h"
#include "tools/command.h"
#include "tools/flatten.h"

namespace vramflow {

class FlattenCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "flatten"; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  FlattenOptions options_;
  SourceFlags source_;
  MemoryFlag memory_;
};

}  // namespace vramflow
