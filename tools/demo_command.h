// SPDX-License-Identifier: MIT
// `vramflow demo`'s command line (tools/command.h): the simulated GPU process
// dumped, restored and checked by RunDemo (tools/demo.h), here, across the
// network (--to, --listen) or as an incremental pair (--base).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tools/cli/command_flags.h"
#include "tools/cli/transport_flags.h"
#include "tools/command.h"
#include "tools/demo.h"

namespace vramflow {

class DemoCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "demo"; }
  bool json() const override { return options_.json; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  DemoOptions options_;
  DumpFlags flags_;
  TransportFlags net_;
  std::string size_ = "1G";
  bool quiet_ = false;
  std::string progress_ = "auto";
};

}  // namespace vramflow
