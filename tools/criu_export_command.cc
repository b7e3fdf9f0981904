// SPDX-License-Identifier: MIT
#include "tools/criu_export_command.h"

#include <cstdio>

#include "common/units.h"
#include "tools/cli/cli_uri.h"

namespace vramflow {

void ExportUpstreamCommand::Add(CLI::App* parent) {
  cmd_ = parent->add_subcommand(
      "export-upstream",
      "Convert a CRIU images directory dumped with vramflow's amdgpu plugin into upstream's layout (raw "
      "amdgpu-pages-<id>-<gpu_id>.img files beside the metadata images), so upstream's amdgpu_plugin.so can restore "
      "it. Every stream is verified while it is decoded; files appear only once all are complete");
  cmd_->add_option("dir", options_.dir, "the CRIU images directory (criu dump -D DIR)")->required();
  cmd_->add_flag("-f,--force", options_.force, "replace existing amdgpu-pages files");
  cmd_->add_flag("--remove-streams", options_.remove_streams,
                 "delete the converted amdgpu-vram streams once every pages file is in place (default: keep "
                 "them, so vramflow's plugin still restores from them)");
  cmd_->add_flag("-q,--quiet", quiet_, "print nothing on success");
  flags_.Add(cmd_);
}

Status ExportUpstreamCommand::Resolve() {
  VF_RETURN_IF_ERROR(flags_.Resolve(&options_.pipeline));
  return RefuseDash("DIR", options_.dir);
}

Status ExportUpstreamCommand::Run(const CommandContext& context) {
  options_.cleanup = context.cleanup;
  ExportUpstreamReport report;
  VF_RETURN_IF_ERROR(RunExportUpstream(options_, &report));
  if (quiet_) return Status::Ok();
  for (const ExportedGpu& gpu : report.gpus) {
    if (gpu.written)
      std::fprintf(stderr, "wrote %s: %llu BO(s), %s, from %s (verified)\n", gpu.pages.c_str(),
                   static_cast<unsigned long long>(gpu.bos), FormatSize(gpu.bytes).c_str(), gpu.stream.c_str());
    else
      std::fprintf(stderr, "kept %s: no stream for GPU 0x%x, the pages file was there already (not checked)\n",
                   gpu.pages.c_str(), gpu.gpu_id);
  }
  for (const std::string& stream : report.removed) std::fprintf(stderr, "removed %s\n", stream.c_str());
  std::fprintf(stderr,
               "upstream's amdgpu_plugin.so can now restore %s (the metadata images are upstream's "
               "already)\n",
               options_.dir.c_str());
  return Status::Ok();
}

}  // namespace vramflow
