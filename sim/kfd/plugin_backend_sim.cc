// SPDX-License-Identifier: MIT
// The test plugin's backend (plugin/plugin_backend.h): the simulated KFD
// served at VRAMFLOW_SIM_KFD when that is set, else the real machine.
#include <cstdlib>

#include "plugin/plugin_backend.h"
#include "sim/kfd/sim_kfd_service.h"

namespace vramflow {

Result<std::unique_ptr<GpuBackend>> OpenPluginBackend(const PluginOptions& options) {
  const char* socket = std::getenv("VRAMFLOW_SIM_KFD");
  if (socket && *socket) return ConnectSimGpuBackend(socket, options.topology_root);
  return OpenAmdgpuBackend(options.topology_root);
}

}  // namespace vramflow
