// SPDX-License-Identifier: MIT
#include "tools/cli/exit_status.h"

#include "tools/cli/exit_codes.h"

namespace vramflow {

int ExitStatusFor(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk:
      return kExitOk;
    case Status::Code::kCorruption:
    case Status::Code::kTruncated:
      return kExitCorrupt;
    case Status::Code::kUnauthenticated:
      return kExitAuthentication;
    default:
      return kExitFailure;
  }
}

}  // namespace vramflow
