// SPDX-License-Identifier: MIT
// The restore side of the CRIU plugin.
//
// RESTORE_EXT_FILE runs in each restored task: for a KFD image it maps the
// checkpointed GPUs onto this machine's (plugin/gpu_map.h), runs KFD's
// restore op (BOs recreated at their GPU addresses, new mmap offsets, a
// dma-buf fd per VRAM/GTT BO), fills the BOs' contents — in the task, or by
// handing the fds to the main CRIU process (plugin/parallel_restore.h) — and
// remembers the new mmap offsets for UPDATE_VMA_MAP. Contents come from
// vramflow's chunk streams or, where none exists, from upstream's raw
// amdgpu-pages images. RESUME_DEVICES_LATE (main process) resumes KFD once
// the contents are known to be complete.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "plugin/gpu_map.h"
#include "plugin/parallel_restore.h"
#include "plugin/plugin_context.h"
#include "plugin/vram_io.h"

namespace vramflow {

// A device mapping whose mmap offset changed.
struct RestoredVma {
  uint64_t addr = 0;
  uint64_t old_offset = 0;
  uint64_t new_offset = 0;
  uint32_t gpu_id = 0;  // the local GPU of its BO
};

// The render node of one GPU that KFD's restore was given (KFD grants mmap
// rights through that DRM file). The plugin holds it until the task's own
// render-node file of that GPU is restored, and then hands it over as that
// file: an fd the plugin kept beside the task's files would be dumped at
// the next checkpoint as one of the application's, and a new one added at
// every restore. Afterwards the task's fd table has it.
struct RestoredRenderNode {
  UniqueFd kept;  // the plugin's own fd; invalid once handed to the task
  dev_t dev = 0;  // the file, found again in the task's fd table (FindOpenFile)
  ino_t ino = 0;
};

// What one restored task keeps between its hooks.
struct TaskRestoreState {
  std::optional<GpuMap> gpu_map;                        // image gpu_id -> local gpu_id, once a KFD image was restored
  std::map<uint32_t, RestoredRenderNode> render_nodes;  // local gpu_id -> its render node
  std::vector<RestoredVma> vmas;
  int next_kept_fd = -1;  // where the next fd the plugin keeps goes (KeepAboveTaskFds); -1: not known yet
};

struct RestoreFileResult {
  enum class Outcome {
    kNotOurs,   // no image of ours has this id: -ENOTSUP
    kRestored,  // `fd` is the file for CRIU to install
    kRetry,     // needs a KFD image of the task restored first
  };
  Outcome outcome = Outcome::kNotOurs;
  UniqueFd fd;
  bool kfd = false;  // kRestored: a KFD file (its BOs filled or handed to the main process)
};

// RESTORE_EXT_FILE for CRIU file id `id`. `parallel_server` names the main
// process's ParallelRestoreServer; empty: fill BOs here. When the server
// cannot be reached, the task fills them itself (and says so on stderr).
Result<RestoreFileResult> RestoreFile(const PluginContext& ctx, int id, TaskRestoreState* task,
                                      const std::string& parallel_server);

// Fills one GPU's BOs from the image files of KFD file `id`: the VRAM stream
// of `image_gpu_id`, else upstream's pages image; neither is an error. A
// non-empty `dump_id` (the images' dump) refuses a stream of another dump
// (RestoreVram); upstream's pages images carry no id and are not checked.
Status RestoreGpuContents(const PluginContext& ctx, int id, uint32_t image_gpu_id, const KfdNode& local_gpu,
                          const std::vector<VramBo>& bos, const std::string& dump_id);

// The main process's side of parallel restore: one job from a task.
Status RunParallelRestoreJob(const PluginContext& ctx, ParallelRestoreJob job);

// UPDATE_VMA_MAP: the new offset of the mapping at (addr, old_offset), and
// the fd CRIU should map it through (a dup of the render node for
// /dev/dri/renderD* paths, -1 to let CRIU reopen the path). nullopt: not a
// mapping of ours.
struct VmaUpdate {
  uint64_t new_offset = 0;
  int fd = -1;  // owned by the caller
};
Result<std::optional<VmaUpdate>> UpdateVma(const TaskRestoreState& task, const std::string& path, uint64_t addr,
                                           uint64_t old_offset);

// RESUME_DEVICES_LATE for `pid`: KFD's resume op. false when KFD has no
// restored state for `pid` (not ours).
Result<bool> ResumeProcess(const PluginContext& ctx, int pid);

}  // namespace vramflow
