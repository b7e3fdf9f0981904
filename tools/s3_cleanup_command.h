// SPDX-License-Identifier: MIT
// `vramflow s3 cleanup`'s command line (tools/command.h): aborts the S3
// multipart uploads that a killed vramflow left pending, as its journal
// (transport/s3/s3_journal.h) records them.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tools/cli/s3_flags.h"
#include "tools/command.h"
#include "transport/s3/s3_options.h"

namespace vramflow {

class S3CleanupCommand : public Command {
 public:
  // `parent`: the `s3` group.
  void Add(CLI::App* parent) override;
  bool chosen() const override { return cmd_ && cmd_->parsed(); }
  std::string name() const override { return "s3 cleanup"; }
  Status Resolve() override;
  // Every upload that could not be aborted is listed on stderr, and the
  // failure then has an empty message: main.cc prints no error line of its
  // own, only exits with status 1.
  Status Run(const CommandContext& context) override;

 private:
  CLI::App* cmd_ = nullptr;
  std::string journal_;
  bool all_ = false;
  S3Flags s3_;
  S3Options options_;
};

}  // namespace vramflow
