// SPDX-License-Identifier: MIT
// `vramflow criu export-upstream DIR`'s command line (tools/command.h): a
// CRIU images directory dumped with vramflow's plugin converted into
// upstream's layout (tools/criu_export.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tools/cli/command_flags.h"
#include "tools/command.h"
#include "tools/criu_export.h"

namespace vramflow {

class ExportUpstreamCommand : public Command {
 public:
  // `parent`: the `criu` group.
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "criu export-upstream"; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  ExportUpstreamOptions options_;
  RunFlags flags_;
  bool quiet_ = false;
};

}  // namespace vramflow
