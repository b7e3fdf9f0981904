// SPDX-License-Identifier: MIT
#include "streamer/format/base_location.h"

namespace vramflow {

std::string ResolveBaseLocation(const std::string& location, const std::string& naming_stream) {
  if (location.empty() || location[0] == '/' || location.find("://") != std::string::npos) return location;
  const size_t slash = naming_stream.rfind('/');
  if (slash == std::string::npos) return location;  // the naming stream is in the working directory
  return naming_stream.substr(0, slash + 1) + location;
}

}  // namespace vramflow
