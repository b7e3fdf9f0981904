// SPDX-License-Identifier: MIT
// The dump side of the CRIU plugin: a KFD file becomes amdgpu-kfd-<id>.img
// (upstream's criu_kfd message, so either plugin restores it) plus one
// vramflow chunk stream per GPU holding its VRAM and GTT BO contents
// (amdgpu-vram-<id>-<gpu_id>.img, in the images directory or at
// VRAMFLOW_TARGET); a render-node file becomes amdgpu-renderD-<id>.img.
//
// KFD's order (plugin/kfd/kfd_ops.h): PROCESS_INFO pauses the process's queues,
// CHECKPOINT hands out the BOs' dma-buf fds, the contents move through the
// dump graph, and UNPAUSE lets the queues run again — at the end of the
// dump of that file, or later (DUMP_DEVICES_LATE) when the caller keeps the
// paused file.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"
#include "plugin/plugin_context.h"

namespace vramflow {

struct KfdDumpResult {
  // The process's GPUs: actual gpu_id -> the gpu_id it knows (render-node
  // images are written under the latter).
  std::map<uint32_t, uint32_t> user_gpu_ids;
  PipelineStats stats;  // all GPUs' streams together
};

// DUMP_EXT_FILE for `kfd_fd` (the target's /dev/kfd, drained into the
// dumper), CRIU file id `id`. With `unpause_now` the queues run again before
// this returns, success or not; otherwise the process stays paused after a
// success and the caller unpauses it through ctx.backend->Kfd().Unpause.
// Each BO's GEM handle goes into the image as upstream's; a BO already
// dumped (ctx.dumped_bos: by another process, shared through a dma-buf)
// fails the dump with NotSupported naming both. On failure nothing under the
// image names is complete-looking.
Result<KfdDumpResult> DumpKfdFile(const PluginContext& ctx, int kfd_fd, int id, bool unpause_now);

// DUMP_EXT_FILE for `render_fd`, a render node of GPU `gpu_id` (actual),
// as the process knows it through `user_gpu_ids` (from the KFD dump; empty:
// as it is). NotSupported when the file holds DRM BOs (GpuBackend::
// ListDrmBos), which vramflow does not save; on a kernel that cannot list
// them, they are not seen, as with upstream's plugin.
Status DumpRenderNodeFile(const PluginContext& ctx, int render_fd, int id, uint32_t gpu_id,
                          const std::map<uint32_t, uint32_t>& user_gpu_ids);

// After a dump into an images directory (`images_dir`, CRIU's fd of it):
// removes the plugin's images there that this dump did not write
// (`written`, by name), an earlier dump's amdgpu-kfd-*, amdgpu-renderD-*,
// amdgpu-vram-* and upstream's amdgpu-pages-* files, and its KFD file list
// (a dump without KFD files writes none, and restore would wait for them). CRIU numbers a dump's
// files anew (a restored process holds more files than it did), so an
// earlier dump's KFD image may carry the id of this dump's render-node
// file, and would be taken for it at restore; and every cycle would add
// images. Other files (CRIU's, temporary ones) are left alone.
Status RemoveEarlierDumpsImages(int images_dir, const std::set<std::string>& written);

}  // namespace vramflow
