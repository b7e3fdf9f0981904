// SPDX-License-Identifier: MIT
// OutputLimit: how many bytes an unpack may create, checked against what a
// stream declares before anything is written (issue 18: a 362-byte stream
// can declare exabytes of zeros).
//
// The limit is the smaller of `--max-output` (0: none) and the free space of
// the file system written to (unknown for pipes and devices: no limit from
// it). Objects claim their declared size when they begin, or, when the size
// is unknown until the end, the bytes as they arrive (sequential output) or
// the final size before the file is sized (staged files). Not thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace vramflow {

class OutputLimit {
 public:
  static constexpr uint64_t kNone = ~uint64_t{0};

  // `max_output`: 0 for none. `free_bytes`: kNone when unknown. `where`
  // names the place written to, for messages.
  OutputLimit(uint64_t max_output, uint64_t free_bytes, std::string where);

  // The free space of the file system holding `fd` when it is a regular
  // file or a directory; kNone for anything else (a pipe, /dev/null).
  static Result<uint64_t> FreeBytes(int fd, const std::string& what);

  // Adds `bytes` to what the output will take; fails (adding nothing) if
  // the total would pass the limit. `what` names the object.
  Status Claim(uint64_t bytes, const std::string& what);

  uint64_t claimed() const { return claimed_; }

 private:
  uint64_t max_output_;
  uint64_t free_bytes_;
  std::string where_;
  uint64_t claimed_ = 0;
};

}  // namespace vramflow
