// SPDX-License-Identifier: MIT
// `vramflow inspect` and `vramflow verify`'s command lines (tools/command.h):
// their flags, their checks, and the runs with their reports (the jobs:
// tools/inspect.h). Both read one stream, named by STREAM or received at
// --listen (tools/cli/source_flags.h).
#pragma once

#include <string>

#include "tools/cli/command_flags.h"
#include "tools/cli/source_flags.h"
#include "tools/command.h"
#include "tools/inspect.h"

namespace vramflow {

class InspectCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "inspect"; }
  // Also false once a report was printed: with --json it carries the failure itself.
  bool json() const override { return options_.json && !reported_; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  InspectOptions options_;
  SourceFlags source_;
  MemoryFlag memory_;
  bool reported_ = false;
};

class VerifyCommand : public Command {
 public:
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "verify"; }
  bool json() const override { return out_.json; }
  Status Resolve() override;
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  std::string input_;
  TransportOptions transport_;
  SourceFlags source_;
  OutputFlags out_;
  MemoryFlag memory_;
  unsigned threads_ = 0;
};

}  // namespace vramflow
