// SPDX-License-Identifier: MIT
#include "tools/demo_command.h"

#include <iostream>

#include "tools/cli/cli_uri.h"

namespace vramflow {

void DemoCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand("demo",
                                "Dump a simulated GPU process (model-like BOs on several simulated GPUs) through the "
                                "pipeline, restore it into fresh simulated GPUs and check every byte");
  cmd_->add_option("-g,--gpus", options_.gpus, "simulated GPUs")->capture_default_str();
  cmd_->add_option("-s,--size", size_, "VRAM per GPU")->capture_default_str()->check(SizeValidator());
  cmd_->add_option("--rings", options_.rings, "simulated SDMA rings per GPU")->capture_default_str();
  cmd_->add_option("--to", options_.destination,
                   "where the stream goes: a file or s3://BUCKET/KEY (kept, read back and restored here), or "
                   "tcp://HOST:PORT / unix:PATH where `vramflow demo --listen` restores it (default: a temporary "
                   "file, removed)");
  cmd_->add_option("--listen", options_.listen,
                   "be the receiving end: restore a stream sent by `demo --to` into fresh simulated GPUs (same "
                   "--gpus and --size) as it arrives, and check every byte");
  cmd_->add_option("--base-store", options_.base_store,
                   "with --listen: earlier streams the sender may build its stream on, offered to it");
  cmd_->add_flag("--base", options_.incremental,
                 "an incremental checkpoint: a full checkpoint, a simulated training step (low mantissa bits of "
                 "fp32 weights and Adam state change, activations and scratch are rewritten, bf16 weights stay), "
                 "then a checkpoint against the first, restored with it and checked; prints both (not with --to "
                 "or --listen)");
  cmd_->add_flag("--json", options_.json, "print the results as JSON");
  cmd_->add_flag("-f,--force", options_.force, "with --to: overwrite an existing file or S3 object");
  cmd_->add_flag("-q,--quiet", quiet_, "no progress (as --progress none)");
  cmd_->add_option("--progress", progress_,
                   "auto (a bar on a terminal, else lines), bar, lines (a line every 5 s, for logs) or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}));
  flags_.Add(cmd_);
  net_.Add(cmd_, /*sending=*/true, /*receiving=*/true);
}

Status DemoCommand::Resolve() {
  VF_RETURN_IF_ERROR(flags_.Resolve(&options_.pipeline));
  if (!options_.listen.empty()) VF_RETURN_IF_ERROR(CheckListenUri(options_.listen));
  if (!options_.destination.empty()) VF_RETURN_IF_ERROR(CheckWriteUri(options_.destination));
  if (options_.destination == "-")
    return Status::InvalidArgument(
        "--to -: demo reads its stream back to restore it; give a file, s3:// or a receiver");
  if (options_.incremental && (!options_.listen.empty() || !options_.destination.empty()))
    return Status::InvalidArgument(
        "--base keeps both checkpoints here, in temporary files: it does not combine with "
        "--to or --listen");
  VF_RETURN_IF_ERROR(net_.Resolve(&options_.transport));
  options_.bytes_per_gpu = ParseSize(size_).value();  // checked by SizeValidator
  options_.progress = quiet_ || options_.json
                          ? ProgressStyle()
                          : ProgressStyle(ParseProgressMode(progress_).value_or(ProgressStyle::Mode::kNone));
  return Status::Ok();
}

Status DemoCommand::Run(const CommandContext& context) {
  context.MakeInterruptible(&options_.transport);
  if (!options_.destination.empty()) VF_RETURN_IF_ERROR(CheckDestination(options_.destination, options_.force));
  if (!options_.listen.empty() || !options_.destination.empty())
    VF_RETURN_IF_ERROR(net_.LoadCredentials(&options_.transport));
  DemoReport report;
  Status s = RunDemo(options_, std::cout, &report);
  std::cout.flush();
  return s;
}

}  // namespace vramflow
