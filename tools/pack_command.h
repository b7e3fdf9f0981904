// SPDX-License-Identifier: MIT
// `vramflow pack`'s command line (tools/command.h): its flags, their checks,
// and the run with its summary or --json report (the job: tools/pack.h).
#pragma once

#include <string>

#include "tools/cli/command_flags.h"
#include "tools/cli/transport_flags.h"
#include "tools/command.h"
#include "tools/pack.h"

namespace vramflow {

class PackCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "pack"; }
  bool json() const override { return out_.json; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  // The text summary on stderr.
  static void PrintSummary(const PackReport& report);

  CLI::App* cmd_ = nullptr;
  PackOptions options_;
  DumpFlags dump_;
  FsyncFlags fsync_;
  TransportFlags net_;
  OutputFlags out_;
};

}  // namespace vramflow
