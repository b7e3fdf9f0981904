// SPDX-License-Identifier: MIT
// PluginBackend: which machine the CRIU plugin's hooks talk to, chosen once
// at plugin init. The product plugin (plugin/plugin_backend_amdgpu.cc) knows
// only the real one: /dev/kfd, KFD's sysfs topology, libdrm_amdgpu SDMA. The
// test-only build of the plugin links sim/kfd/plugin_backend_sim.cc instead,
// which also serves a simulated KFD (VRAMFLOW_SIM_KFD) for the tests and
// the CRIU host harness; nothing installed can be pointed at a simulator.
#pragma once

#include <memory>

#include "common/status.h"
#include "plugin/kfd/gpu_backend.h"
#include "plugin/plugin_options.h"

namespace vramflow {

Result<std::unique_ptr<GpuBackend>> OpenPluginBackend(const PluginOptions& options);

}  // namespace vramflow
