// SPDX-License-Identifier: MIT
// The exit status a failed command returns for a Status (tools/cli/exit_codes.h;
// docs/CLI.md, "Exit status"): one mapping for every command, so that a
// script can tell corrupt data and refused credentials from other failures.
#pragma once

#include "common/status.h"

namespace vramflow {

// kCorruption, kTruncated: kExitCorrupt (the bytes are wrong or missing);
// kUnauthenticated: kExitAuthentication; any other failure: kExitFailure;
// OK: kExitOk. Usage errors are found before a Status exists (kExitUsage).
int ExitStatusFor(const Status& status);

}  // namespace vramflow
