// SPDX-License-Identifier: MIT
#include "tools/gen_command.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/units.h"
#include "tools/cli/cli_uri.h"
#include "tools/cli/command_flags.h"

namespace vramflow {

void GenCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand("gen", "Write model-like test data (see docs/DATA.md)");
  cmd_->add_option("-k,--kind", kind_text_, "fp32, bf16, fp16, fp8, adam-m, adam-v, zeros or random")
      ->capture_default_str();
  cmd_->add_option("-s,--size", size_text_, "bytes to write")->capture_default_str()->check(SizeValidator());
  cmd_->add_option("--seed", seed_, "seed; same seed, same bytes")->capture_default_str();
  cmd_->add_option("--step", step_,
                   "the training state after this many AdamW steps (fp32, bf16, fp16, adam-m, adam-v; 0: as generated)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 100000u));
  cmd_->add_option("-o,--output", output_, "file to write; - for stdout; s3://BUCKET/KEY")->required();
  cmd_->add_flag("-f,--force", force_, "overwrite an existing output file or S3 object");
  s3_.Add(cmd_);
}

Status GenCommand::Resolve() {
  std::optional<DataKind> kind = ParseDataKind(kind_text_);
  if (!kind) return Status::InvalidArgument("unknown data kind '" + kind_text_ + "'");
  kind_ = *kind;
  size_ = ParseSize(size_text_).value();  // checked by SizeValidator
  VF_RETURN_IF_ERROR(CheckWriteUri(output_));
  return s3_.Resolve(&sink_options_.s3);
}

Status GenCommand::Run(const CommandContext& context) {
  VF_RETURN_IF_ERROR(CheckDestination(output_, force_));
  context.MakeInterruptible(&sink_options_);  // an interrupt kills a credential_process, aborts the upload
  sink_options_.file.overwrite = force_;
  sink_options_.s3.overwrite = force_;
  VF_RETURN_IF_ERROR(s3_.LoadEncryptionKey(&sink_options_.s3));
  VF_ASSIGN_OR_RETURN(std::unique_ptr<ByteSink> sink, OpenSink(output_, sink_options_));
  std::vector<uint8_t> buf(4u << 20);
  for (uint64_t offset = 0; offset < size_;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size_ - offset));
    GenerateTrainingState(kind_, seed_, step_, offset, std::span<uint8_t>(buf.data(), n));
    VF_RETURN_IF_ERROR(sink->Write(std::span<const uint8_t>(buf.data(), n)));
    offset += n;
  }
  return sink->Commit();
}

}  // namespace vramflow
