// SPDX-License-Identifier: MIT
// StartThread: std::thread creation as an error value.
//
// Creating a thread fails when the process is out of threads (RLIMIT_NPROC,
// kernel.threads-max) or out of address space for its stack (RLIMIT_AS,
// `ulimit -v`). std::thread then throws std::system_error, which in a
// pipeline stage or a graph body would escape, abort the process or leave a
// graph waiting for work that never comes. Every thread vramflow starts goes
// through StartThread instead, and the caller turns the Status into a clean
// failure. Thread-safe.
#pragma once

#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "common/status.h"

namespace vramflow {

// Starts `body` on a new thread stored in `*thread` (which must not hold a
// running one). On failure `*thread` stays empty and the error says what the
// thread was for ("`what`") and why it could not be created.
template <typename Body>
Status StartThread(std::thread* thread, const std::string& what, Body&& body) {
  try {
    *thread = std::thread(std::forward<Body>(body));
    return Status::Ok();
  } catch (const std::system_error& e) {
    return Status::FromErrno("cannot start a thread for " + what, e.code().value());
  } catch (const std::bad_alloc&) {
    return Status::FromErrno("cannot start a thread for " + what, ENOMEM);
  }
}

}  // namespace vramflow
