// SPDX-License-Identifier: MIT
// The version of this build, from one place: the project version in
// CMakeLists.txt (the package's version too) and, when built from a git
// checkout, the revision it was built from (cmake/write_revision.cmake,
// refreshed on every build). `vramflow --version` prints it; the plugin
// writes it into CRIU's log.
#pragma once

#include <string>

namespace vramflow {

// "0.1.0", or "0.1.0 (git 33c9f31)", "0.1.0 (git 33c9f31-dirty)" when built
// from a git checkout (with changes not committed).
std::string VersionString();

// "vramflow 0.1.0", as recorded in stream headers.
std::string ProducerString();

}  // namespace vramflow
