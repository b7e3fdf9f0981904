// SPDX-License-Identifier: MIT
// PluginContext: what the plugin's dump and restore code works with — the
// machine (GpuBackend), the settings, and where images go. The hooks in
// plugin/criu_plugin.cc build one per CRIU run; tests build their own.
#pragma once

#include <string>

#include "plugin/dumped_bos.h"
#include "plugin/image_store.h"
#include "plugin/kfd/gpu_backend.h"
#include "plugin/plugin_options.h"

namespace vramflow {

struct PluginContext {
  GpuBackend* backend = nullptr;
  const PluginOptions* options = nullptr;
  ImageStore* images = nullptr;  // the metadata images (CRIU's images directory or streamer)
  ImageStore* vram = nullptr;    // VRAM streams: `images`, or VRAMFLOW_TARGET
  // CRIU's find_unused_fd_pid (exported by CRIU 4.x): in a restored task, the
  // lowest fd number above every fd CRIU will install in task `pid`. Null
  // outside CRIU or where CRIU lacks it; kept fds then stay where they open.
  int (*find_unused_fd_pid)(int pid) = nullptr;
  // Dump: the BOs of every KFD file dumped so far in this CRIU run, to
  // recognise BOs shared between processes. Null: each file on its own.
  DumpedBos* dumped_bos = nullptr;
  // The dump's id (plugin/kfd_file_list.h). Dump: made once per CRIU dump,
  // recorded in every image and stream; empty: none recorded. Restore, main
  // process: the one the dump's KFD file list names, which every stream the
  // parallel-restore worker reads must carry; empty: not checked there.
  std::string dump_id;
};

}  // namespace vramflow
