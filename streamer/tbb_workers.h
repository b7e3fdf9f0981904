// JoinTbbWorkerThreads: ends oneTBB's worker threads in this process and
// waits until they have exited.
//
// oneTBB keeps its workers alive after a graph or arena is done, for the
// next one. Code that runs inside a host process which later pulls the
// ground from under them must end them first: CRIU dlcloses its plugins at
// the end of a run (their libraries are then unmapped under running
// threads), and in a restored task CRIU's restorer replaces the whole
// address space. The next graph starts new workers as needed.
//
// Call it from a thread outside any oneTBB parallel region, with no graph
// or arena of this process running. Fails (and ends nothing) when oneTBB
// reports that its scheduler is still in use.
#pragma once

#include "common/status.h"

namespace vramflow {

Status JoinTbbWorkerThreads();

}  // namespace vramflow
