// SPDX-License-Identifier: MIT
// `vramflow completion bash|zsh` (tools/command.h; hidden from --help): the
// shell completion script, made from the command line itself
// (tools/cli/shell_completion.h), so it lists every command and flag there is.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tools/command.h"

namespace vramflow {

class CompletionCommand : public Command {
 public:
  // `app`: the whole command line, every command added by the time Run()
  // is called; it must outlive this command.
  explicit CompletionCommand(const CLI::App* app) : app_(app) {}
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "completion"; }
  Status Resolve() override { return Status::Ok(); }
  Status Run(const CommandContext& context) override;

 private:
  const CLI::App* app_;
  CLI::App* cmd_ = nullptr;
  std::string shell_;
};

}  // namespace vramflow
