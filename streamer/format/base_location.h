// SPDX-License-Identifier: MIT
// Where a base named by a BASE frame is: its recorded location is taken as it
// is when it is absolute (a URI with a scheme, or a path from /), and
// otherwise relative to the directory of the stream that names it, so that a
// directory of checkpoints can move as a whole (FORMAT.md 4.9).
#pragma once

#include <string>

namespace vramflow {

// `location` as recorded in the BASE frame of the stream at `naming_stream`.
std::string ResolveBaseLocation(const std::string& location, const std::string& naming_stream);

}  // namespace vramflow
