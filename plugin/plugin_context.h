// PluginContext: what the plugin's dump and restore code works with — the
// machine (GpuBackend), the settings, and where images go. The hooks in
// plugin/criu_plugin.cc build one per CRIU run; tests build their own.
#pragma once

#include "plugin/gpu_backend.h"
#include "plugin/image_store.h"
#include "plugin/plugin_options.h"

namespace vramflow {

struct PluginContext {
  GpuBackend* backend = nullptr;
  const PluginOptions* options = nullptr;
  ImageStore* images = nullptr;  // the metadata images (CRIU's images directory or streamer)
  ImageStore* vram = nullptr;    // VRAM streams: `images`, or VRAMFLOW_TARGET
};

}  // namespace vramflow
