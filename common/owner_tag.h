// SPDX-License-Identifier: MIT
// Owner tags: the writing process's pid and start time, put in the names of
// temporary files and staging directories ("out.vfs.vf-tmp-4711.98765-3fa2c1")
// so that what a SIGKILLed run left behind (no handler runs then) can be told
// from the work of a live process and swept by the next run in that
// directory. The start time (clock ticks since boot, /proc/PID/stat field 22)
// tells a dead writer from a new process that got its pid.
#pragma once

#include <string>
#include <string_view>

namespace vramflow {

// "PID.STARTTIME" of this process.
std::string OwnerTag();

// Whether the process a tag names is still running. Unknown (no /proc, a
// pid that exists but whose start time cannot be read) counts as alive:
// sweeping never removes what might be in use.
bool OwnerAlive(std::string_view tag);

// Removes the entries of `dir` whose name contains `marker` directly followed
// by an owner tag of a dead process (then '-', '.' or the end of the name);
// directories with their contents. Best effort: returns how many were
// removed, ignores what cannot be.
int SweepDeadTemporaries(const std::string& dir, std::string_view marker);

// The directory part of `path` ("." when it has none).
std::string DirectoryOf(const std::string& path);

}  // namespace vramflow
