// SPDX-License-Identifier: MIT
// `vramflow unpack`'s command line (tools/command.h): its flags, their
// checks, and the run with its summary or --json report (the job:
// tools/unpack.h).
#pragma once

#include <string>

#include "tools/cli/command_flags.h"
#include "tools/cli/source_flags.h"
#include "tools/command.h"
#include "tools/unpack.h"

namespace vramflow {

class UnpackCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "unpack"; }
  bool json() const override { return out_.json; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  // The text summary on stderr.
  static void PrintSummary(const UnpackReport& report);

  CLI::App* cmd_ = nullptr;
  UnpackOptions options_;
  SourceFlags source_;
  std::string max_output_;
  FsyncFlags fsync_;
  OutputFlags out_;
  RunFlags run_;
};

}  // namespace vramflow
