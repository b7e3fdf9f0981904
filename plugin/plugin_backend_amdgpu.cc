// SPDX-License-Identifier: MIT
// The product plugin's backend: the real machine only (plugin/plugin_backend.h).
#include "plugin/plugin_backend.h"

namespace vramflow {

Result<std::unique_ptr<GpuBackend>> OpenPluginBackend(const PluginOptions& options) {
  return OpenAmdgpuBackend(options.topology_root);
}

}  // namespace vramflow
