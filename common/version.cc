// SPDX-License-Identifier: MIT
#include "common/version.h"

#include "vramflow_revision.h"  // generated in the build tree: VRAMFLOW_GIT_REVISION

namespace vramflow {

std::string VersionString() {
  std::string version = VRAMFLOW_VERSION;
  const std::string revision = VRAMFLOW_GIT_REVISION;
  if (!revision.empty()) version += " (git " + revision + ")";
  return version;
}

std::string ProducerString() { return std::string("vramflow ") + VRAMFLOW_VERSION; }

}  // namespace vramflow
