// SPDX-License-Identifier: MIT
// A regular file as a RandomAccessSource: pread at any offset, from any
// number of threads at once (pread keeps no file position).
//
// Only regular files qualify: a pipe, FIFO, socket or device cannot be read
// at offsets, and opening a FIFO would block, so those are refused with
// NotSupported before anything is opened; the caller then reads the path as
// a stream instead. The size is taken once, at opening.
#pragma once

#include <memory>
#include <string>

#include "transport/core/random_access.h"

namespace vramflow {

Result<std::unique_ptr<RandomAccessSource>> OpenFileRandomAccess(const std::string& path);

}  // namespace vramflow
