// SPDX-License-Identifier: MIT
#include "tools/unpack_command.h"

#include <cstdio>

#include "common/printable.h"
#include "common/units.h"
#include "tools/json_report.h"
#include "transport/core/uri.h"

namespace vramflow {

void UnpackCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand(
      "unpack",
      "Unpack a chunk stream into files. OUT ending in / or an existing directory receives every object; otherwise a "
      "one-object stream becomes the file OUT and a stream of several objects the directory OUT. Files appear only "
      "once the whole stream has been verified and written. With -o - the single object is written to stdout as it "
      "is read (a failure then leaves partial output and a non-zero exit status)");
  source_.AddStreamOrListen(cmd_, "unpack what a sender sends, as it arrives");
  cmd_->add_option("-o,--output", options_.output, "directory, file, or - (stdout, one object)")->required();
  cmd_->add_option("--object", options_.select.names,
                   "restore only the object of this name (repeatable); a file or s3:// stream with a seek "
                   "index is then read only where those objects' frames are");
  cmd_->add_option("--gpu", options_.select.gpus,
                   "restore only the objects of this GPU (attribute gpu, or gpu-id; repeatable), as --object");
  cmd_->add_flag("-f,--force", options_.force, "overwrite existing files");
  source_.AddBaseStore(cmd_);
  source_.AddBases(cmd_,
                   "the base of an incremental stream (a file or s3://); repeatable: more are links of its "
                   "chain. Default: where the stream's BASE frame says its base was");
  cmd_->add_option("--max-output", max_output_,
                   "refuse a stream whose objects declare more than SIZE bytes in all (they must also fit in "
                   "the free space where files are written)")
      ->check(SizeValidator());
  fsync_.Add(cmd_, "on with --listen (the sender is told the files are safe), else off");
  out_.Add(cmd_, /*with_json=*/true);
  run_.Add(cmd_);
  source_.AddNetwork(cmd_, /*sending=*/false, /*receiving=*/true);
}

Status UnpackCommand::Resolve() {
  VF_RETURN_IF_ERROR(source_.PickStream("unpack", &options_.input));
  VF_RETURN_IF_ERROR(out_.CheckStdout(options_.output));
  VF_RETURN_IF_ERROR(run_.Resolve(&options_.pipeline));
  VF_RETURN_IF_ERROR(source_.ResolveNetwork(&options_.transport));
  options_.bases = source_.bases;
  options_.base_store = source_.base_store;
  if (!max_output_.empty()) {
    VF_ASSIGN_OR_RETURN(options_.max_output, ParseSize(max_output_));
  }
  VF_ASSIGN_OR_RETURN(Endpoint out, ParseEndpoint(options_.output));
  if (out.kind == Endpoint::Kind::kS3 || out.is_network() || out.kind == Endpoint::Kind::kFd)
    return Status::InvalidArgument("-o '" + options_.output +
                                   "': unpack writes files (a directory, a file or -); to "
                                   "store a stream as it is, use `vramflow send STREAM " +
                                   options_.output + "`");
  return Status::Ok();
}

Status UnpackCommand::Run(const CommandContext& context) {
  context.MakeInterruptible(&options_.transport);
  VF_RETURN_IF_ERROR(source_.LoadCredentials(&options_.transport));
  options_.fsync = fsync_.Resolve(/*default_on=*/!source_.listen.empty());
  options_.progress = out_.Style();
  options_.note = [](const std::string& note) { std::fprintf(stderr, "vramflow unpack: %s\n", note.c_str()); };
  UnpackReport report;
  VF_RETURN_IF_ERROR(RunUnpack(options_, &report));
  if (out_.json) PrintJson(UnpackJson(report, options_.input, options_.output));
  if (out_.summary()) PrintSummary(report);
  return Status::Ok();
}

void UnpackCommand::PrintSummary(const UnpackReport& report) {
  std::fprintf(stderr, "unpacked %llu object(s), %s, verified\n", static_cast<unsigned long long>(report.objects),
               FormatSize(report.raw_bytes).c_str());
  if (!report.through_index) return;
  std::fprintf(stderr,
               "  read %s of the %s stream (%.1f%%, %llu of %llu bytes): its seek index and the frames of %llu "
               "of its %llu objects%s, in %llu ranges\n",
               FormatSize(report.bytes_read).c_str(), FormatSize(report.stream_bytes).c_str(),
               report.stream_bytes ? 100.0 * report.bytes_read / report.stream_bytes : 0.0,
               static_cast<unsigned long long>(report.bytes_read), static_cast<unsigned long long>(report.stream_bytes),
               static_cast<unsigned long long>(report.objects), static_cast<unsigned long long>(report.stream_objects),
               report.moved_refs ? " (with the DATA frames their dedup references name)" : "",
               static_cast<unsigned long long>(report.ranges));
  for (const std::string& path : report.written) std::fprintf(stderr, "  %s\n", EscapedText(path).c_str());
}

}  // namespace vramflow
