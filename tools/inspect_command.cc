// SPDX-License-Identifier: MIT
#include "tools/inspect_command.h"

#include <iostream>

#include "tools/json_report.h"

namespace vramflow {

void InspectCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand(
      "inspect",
      "Show a stream's objects, chunks, codec mix, ratio and detected word sizes (framing is checked; add "
      "--decode to check payloads too). A file or s3:// stream with a seek index: its objects from the "
      "index alone, reading only the stream's ends (--full reads every frame)");
  source_.AddStreamOrListen(cmd_, "inspect what a sender sends");
  source_.AddNetwork(cmd_, /*sending=*/false, /*receiving=*/true);
  cmd_->add_flag("--json", options_.json, "print JSON");
  cmd_->add_flag("--full", options_.full,
                 "read every frame (codec mix, word sizes) even when the stream has a seek index; without it "
                 "a file or s3:// stream with an index is read only at its ends");
  cmd_->add_flag("--decode", options_.decode, "also decode every payload and check its hash (implies --full)");
  memory_.Add(cmd_,
              "reading every frame: the reader's buffers and records, the report's summary of each "
              "object, a network receive window");
}

Status InspectCommand::Resolve() {
  VF_RETURN_IF_ERROR(source_.PickStream("inspect", &options_.input));
  return source_.ResolveNetwork(&options_.transport);
}

Status InspectCommand::Run(const CommandContext& context) {
  context.MakeInterruptible(&options_.transport);
  VF_RETURN_IF_ERROR(source_.LoadCredentials(&options_.transport));
  options_.max_memory = memory_.Resolve();
  Status s = RunInspect(options_, std::cout, &reported_);
  std::cout.flush();
  return s;
}

void VerifyCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand(
      "verify",
      "Check a stream completely: framing, checksums, ranges, payload hashes, object digests, totals. Exit "
      "status 0 means the stream is complete and intact");
  source_.AddStreamOrListen(cmd_, "verify what a sender sends");
  source_.AddNetwork(cmd_, /*sending=*/false, /*receiving=*/true);
  out_.Add(cmd_, /*with_json=*/true);
  memory_.Add(cmd_, "the reader's buffers and records, and a network receive window");
  source_.AddBases(cmd_,
                   "the base of an incremental stream (a file or s3://), whose bytes are then checked too; "
                   "repeatable, as for unpack");
  source_.AddBaseStore(cmd_);
  cmd_->add_option("-j,--threads", threads_,
                   "threads decoding and hashing, a few frames ahead of the checks made in order (0: the CPUs this "
                   "process may use: affinity mask and cgroup CPU quota)")
      ->capture_default_str();
}

Status VerifyCommand::Resolve() {
  VF_RETURN_IF_ERROR(source_.PickStream("verify", &input_));
  return source_.ResolveNetwork(&transport_);
}

Status VerifyCommand::Run(const CommandContext& context) {
  context.MakeInterruptible(&transport_);
  VF_RETURN_IF_ERROR(source_.LoadCredentials(&transport_));
  VerifyReport report;
  Status s = RunVerify(input_, !out_.summary(), memory_.Resolve(), transport_, std::cout, &report, source_.bases,
                       threads_, source_.base_store);
  std::cout.flush();
  VF_RETURN_IF_ERROR(s);
  if (out_.json) PrintJson(VerifyJson(report, input_));
  return Status::Ok();
}

}  // namespace vramflow
