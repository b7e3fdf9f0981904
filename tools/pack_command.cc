// SPDX-License-Identifier: MIT
#include "tools/pack_command.h"

#include <cstdio>

#include "common/units.h"
#include "tools/cli/cli_uri.h"
#include "tools/cli/cli_util.h"
#include "tools/json_report.h"

namespace vramflow {

void PackCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand("pack", "Pack files (or - for stdin) into one chunk stream");
  cmd_->add_option("inputs", options_.inputs,
                   "files to pack; - reads stdin, s3://BUCKET/KEY an S3 object; legacy "
                   "CRIU amdgpu-pages-*.img images are recognised and restored byte for "
                   "byte by unpack")
      ->required();
  cmd_->add_option("-o,--output,--to", options_.output,
                   "where the stream goes: a file, - (stdout), fd:N, tcp://HOST:PORT or unix:PATH (connects to a "
                   "vramflow receiver there), or s3://BUCKET/KEY (an S3 object, uploaded in parallel parts)")
      ->required();
  cmd_->add_option("--name", options_.stdin_name, "object name for stdin")->capture_default_str();
  cmd_->add_flag("-f,--force", options_.force, "overwrite an existing output file or S3 object");
  cmd_->add_option("--base", options_.bases,
                   "an incremental stream against this stored, indexed stream (a file or s3://BUCKET/KEY): chunks "
                   "it holds become references, changed ones deltas; repeat to name further streams of the "
                   "base's own chain. To a receiver (tcp://, unix:): candidates, preferred first, of which the "
                   "first the receiver holds is used (none: a full stream)")
      ->allow_extra_args(false);  // one stream per --base: the inputs follow
  cmd_->add_option("--base-store", options_.base_store,
                   "to a receiver: a directory of earlier streams, candidates after --base, newest first");
  cmd_->add_flag("--base-refs-only", options_.base_refs_only,
                 "match by the base's chunk digests (the base must have them: --digests), reading only the base "
                 "chunks that become references, to prove them; no deltas");
  cmd_->add_flag("--digests", options_.digests,
                 "write each chunk's SHA-256 (DIGEST_BLOCKs), so that the stream can be a --base-refs-only base; "
                 "always on with --base");
  fsync_.Add(cmd_, "off; with --to a receiver, the receiver's own setting counts");
  dump_.Add(cmd_);
  net_.Add(cmd_, /*sending=*/true, /*receiving=*/false);
  out_.Add(cmd_, /*with_json=*/true);
}

Status PackCommand::Resolve() {
  VF_RETURN_IF_ERROR(dump_.Resolve(&options_.pipeline));
  VF_RETURN_IF_ERROR(out_.CheckStdout(options_.output));
  for (const std::string& input : options_.inputs) VF_RETURN_IF_ERROR(CheckReadUri(input, "vramflow recv"));
  for (const std::string& base : options_.bases) VF_RETURN_IF_ERROR(CheckReadUri(base, "vramflow recv"));
  if (options_.base_refs_only && options_.bases.empty())
    return Status::InvalidArgument("--base-refs-only needs --base");
  VF_RETURN_IF_ERROR(CheckWriteUri(options_.output));
  return net_.Resolve(&options_.transport);
}

Status PackCommand::Run(const CommandContext& context) {
  context.MakeInterruptible(&options_.transport);
  VF_RETURN_IF_ERROR(CheckDestination(options_.output, options_.force));
  VF_RETURN_IF_ERROR(net_.LoadCredentials(&options_.transport));
  options_.fsync = fsync_.Resolve(false);
  options_.progress = out_.Style();
  PackReport report;
  VF_RETURN_IF_ERROR(RunPack(options_, &report));
  if (out_.json) PrintJson(PackJson(report, options_.output));
  if (out_.summary()) PrintSummary(report);
  return Status::Ok();
}

void PackCommand::PrintSummary(const PackReport& report) {
  // How much of the time the ordered writer was busy: near 100% means the
  // destination (or the copy into it), not compression, set the pace.
  char writer[64] = "";
  if (report.seconds > 0)
    std::snprintf(writer, sizeof writer, " (writer busy %.0f%%)", 100.0 * report.writer_seconds / report.seconds);
  const std::string in_order =
      " read in order (stdin, pipe or s3:// input) on " + std::to_string(report.threads) + " thread(s)";
  std::fprintf(stderr, "packed %llu object(s)%s%s: %s -> %s (ratio %s) in %.2f s, %s%s\n",
               static_cast<unsigned long long>(report.objects),
               report.legacy_images ? " (legacy amdgpu-pages images recognised)" : "",
               report.sequential ? in_order.c_str() : "", FormatSize(report.raw_bytes).c_str(),
               FormatSize(report.stream_bytes).c_str(), FormatRatio(report.raw_bytes, report.stream_bytes).c_str(),
               report.seconds, FormatRate(report.raw_bytes, report.seconds).c_str(), writer);
  if (!report.incremental) return;
  // What is neither from the base nor new, said where there is any.
  std::string rest;
  if (report.zero_bytes) rest += ", " + FormatSize(report.zero_bytes) + " zeros";
  if (report.dedup_bytes) rest += ", " + FormatSize(report.dedup_bytes) + " deduplicated";
  std::fprintf(stderr, "against base %s: %s new, %s referenced, %s delta-coded%s\n",
               report.base_id.substr(0, 16).c_str(), FormatSize(report.NewBytes()).c_str(),
               FormatSize(report.base_ref_bytes).c_str(), FormatSize(report.base_delta_bytes).c_str(), rest.c_str());
}

}  // namespace vramflow
