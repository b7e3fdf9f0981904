// SPDX-License-Identifier: MIT
// PluginMachine: what the plugin's dump and restore code (plugin/criu_dump.h,
// criu_restore.h) runs against in a test without the hooks: a simulated KFD
// served in this process, a backend connected to it, images in a temporary
// directory, and a small pipeline budget.
#pragma once

#include <memory>

#include "plugin/image_store.h"
#include "plugin/kfd/gpu_backend.h"
#include "plugin/plugin_context.h"
#include "plugin/plugin_options.h"
#include "sim/kfd/sim_kfd.h"
#include "sim/kfd/sim_kfd_service.h"
#include "tests/support/test_util.h"

namespace vramflow {

struct PluginMachine {
  explicit PluginMachine(SimKfdOptions kfd_options = {}) : kfd(kfd_options) {
    EXPECT_TRUE(kfd.WriteSysfsTopology(dir.File("topology")).ok());
    server = SimKfdServer::Start(&kfd, dir.File("kfd.sock")).value();
    backend = ConnectSimGpuBackend(dir.File("kfd.sock"), dir.File("topology")).value();
    options.pipeline.max_memory = 32 << 20;
    options.pipeline.chunk_size = 256 << 10;
    ctx.backend = backend.get();
    ctx.options = &options;
    ctx.images = images.get();
    ctx.vram = images.get();
  }

  testing::TempDir dir;
  SimKfd kfd;
  std::unique_ptr<SimKfdServer> server;
  std::unique_ptr<GpuBackend> backend;
  PluginOptions options;
  std::unique_ptr<ImageStore> images = DirectoryStore(dir.path());
  PluginContext ctx;
};

}  // namespace vramflow
