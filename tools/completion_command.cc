// SPDX-License-Identifier: MIT
#include "tools/completion_command.h"

#include <iostream>

#include "tools/cli/shell_completion.h"

namespace vramflow {

void CompletionCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand("completion", "Print the shell completion script for bash or zsh");
  cmd_->group("");
  cmd_->add_option("shell", shell_, "bash or zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));
}

Status CompletionCommand::Run(const CommandContext& context) {
  std::cout << ShellCompletion(*app_, "vramflow", shell_);
  std::cout.flush();
  return std::cout ? Status::Ok() : Status::IoError("writing the script to stdout");
}

}  // namespace vramflow
