// SPDX-License-Identifier: MIT
// ExceptionBoundary: where an exception from a library we call stops.
//
// vramflow reports errors as values, but oneTBB and the standard library
// throw: std::bad_alloc when memory runs out (ulimit -v), and oneTBB rethrows
// what escaped a graph body once the graph has drained. A pipeline entry
// point runs its body through ExceptionBoundary, so such an exception
// becomes a Status naming what failed, never an abort past main().
// Thread-safe.
#pragma once

#include <cerrno>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "common/status.h"

namespace vramflow {

// Returns what `body` (a callable returning Status) returns, or an error
// naming `what` if it throws.
template <typename Body>
Status ExceptionBoundary(const std::string& what, Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const std::bad_alloc&) {
    return Status::FromErrno(what, ENOMEM);
  } catch (const std::exception& e) {
    return Status::Internal(what + ": " + e.what());
  }
}

}  // namespace vramflow
