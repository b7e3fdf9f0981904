// PluginOptions: the CRIU plugin's settings, read from the environment once
// at plugin init, in the style of upstream's plugin (KFD_MAX_BUFFER_SIZE,
// KFD_*_CHECK) plus vramflow's own VRAMFLOW_* variables. docs/PLUGIN.md
// lists them; a value that does not parse is an error naming the variable,
// so a typo stops the dump or restore instead of being silently ignored.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"
#include "plugin/gpu_map.h"
#include "streamer/pipeline.h"
#include "transport/open_uri.h"

namespace vramflow {

enum class Tristate { kAuto, kOff, kOn };

struct PluginOptions {
  // Codec (VRAMFLOW_CODEC), threads (VRAMFLOW_THREADS) and the memory budget
  // (KFD_MAX_BUFFER_SIZE: every buffer of the data path together).
  PipelineOptions pipeline;
  // VRAMFLOW_TARGET: where VRAM streams go instead of the images directory
  // (a directory, or a transport URI; "{name}" in it becomes the stream's
  // name). Empty: the images directory, next to the metadata images.
  std::string target;
  TransportOptions transport;  // key from VRAMFLOW_KEY_FILE (or VRAMFLOW_KEY)
  MapChecks checks;            // KFD_*_CHECK
  // VRAMFLOW_KFD_TOPOLOGY: where KFD's topology is read (tests, containers).
  std::string topology_root;
  // VRAMFLOW_SIM_KFD: the socket of a simulated KFD (sim/sim_kfd_service.h)
  // to use instead of /dev/kfd. For the CRIU host harness and tests only.
  std::string sim_kfd;
  // VRAMFLOW_PARALLEL_RESTORE: fill BOs from the main CRIU process (auto:
  // when this CRIU has the POST_FORKING hook; on without it is refused).
  Tristate parallel_restore = Tristate::kAuto;
  // VRAMFLOW_CRIU_STREAM: images through CRIU's image streamer (auto: when
  // the images directory holds the streamer's socket).
  Tristate criu_stream = Tristate::kAuto;
};

// Reads every variable through `getenv` (the plugin passes ::getenv).
Result<PluginOptions> PluginOptionsFromEnvironment(const std::function<const char*(const char*)>& getenv);

}  // namespace vramflow
