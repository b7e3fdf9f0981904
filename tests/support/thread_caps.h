// SPDX-License-Identifier: MIT
// Checking the notes a pipeline prints when its memory budget feeds fewer
// threads than it wants. Tests that leave the budget to the machine (a
// quarter of MemAvailable or of the cgroup's limit) expect no such note, but
// a busy CI machine can leave too little memory for hundreds of threads; the
// note is then right, and must name that quarter.
#pragma once

#include <string>

namespace vramflow::testing {

// The memory a default budget is a quarter of, in MiB: MemAvailable or the
// cgroup's memory limit, the smaller.
double FittingMemoryMib();

// Adds a test failure for every line of `output` that says fewer than
// `wanted` threads run for a reason other than a default budget that is a
// quarter of the memory left (checked against FittingMemoryMib() now, within
// a factor of two). Returns true when no line says fewer threads run.
bool ExpectThreadCapsOnlyFromMemory(const std::string& output, int wanted);

}  // namespace vramflow::testing
