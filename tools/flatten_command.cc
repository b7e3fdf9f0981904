// SPDX-License-Identifier: MIT
#include "tools/flatten_command.h"

#include <cstdio>

#include "common/units.h"

namespace vramflow {

void FlattenCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand(
      "flatten",
      "Write an incremental stream as a self-contained one: every chunk its base holds is read from the "
      "base, checked, and stored in the output, which needs no base");
  source_.AddStream(cmd_, "incremental stream");
  source_.AddBases(cmd_,
                   "the base (a file or s3://); repeatable: more are links of its chain. Default: where the "
                   "stream's BASE frame says its base was");
  cmd_->add_option("-o,--output", options_.output, "where the flat stream goes: a file, s3://BUCKET/KEY or -")
      ->required();
  cmd_->add_flag("-f,--force", options_.force, "overwrite an existing output file");
  source_.AddNetwork(cmd_, /*sending=*/true, /*receiving=*/false);
  memory_.Add(cmd_, "the reader's buffers and records");
}

Status FlattenCommand::Resolve() {
  VF_RETURN_IF_ERROR(source_.PickStream("flatten", &options_.input));
  options_.bases = source_.bases;
  return source_.ResolveNetwork(&options_.transport);
}

Status FlattenCommand::Run(const CommandContext& context) {
  VF_RETURN_IF_ERROR(source_.LoadCredentials(&options_.transport));
  options_.transport.s3.cleanup = context.cleanup;  // an interrupt kills a credential_process, aborts the upload
  options_.max_memory = memory_.Resolve();
  FlattenReport report;
  VF_RETURN_IF_ERROR(RunFlatten(options_, &report));
  std::fprintf(stderr, "flattened %llu object(s), %s (%s from the base), into %s\n",
               static_cast<unsigned long long>(report.objects), FormatSize(report.raw_bytes).c_str(),
               FormatSize(report.resolved_bytes).c_str(), FormatSize(report.stream_bytes).c_str());
  return Status::Ok();
}

}  // namespace vramflow
