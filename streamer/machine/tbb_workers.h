// SPDX-License-Identifier: MIT
// oneTBB's worker threads: making sure they can start (CheckWorkersCanStart)
// and ending them (JoinTbbWorkerThreads).
//
// JoinTbbWorkerThreads ends oneTBB's worker threads in this process and
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

// Whether `workers` threads with oneTBB's worker stack size can run at once
// in this process right now: starts them (each waits until all are started),
// then lets them return and joins them. oneTBB starts its workers lazily, inside its scheduler, and one that
// it cannot start aborts the process ("pthread_create has failed") or leaves
// a graph without the threads it waits for; a graph calls this before its
// arena runs, so that a process short of threads (ulimit -u) or of address
// space for their stacks (ulimit -v) fails with an error value instead. The
// check is a snapshot: it cannot reserve what it found for oneTBB, and it
// counts workers that oneTBB may already keep as if they were still needed.
// Thread-safe.
Status CheckWorkersCanStart(unsigned workers);

}  // namespace vramflow
