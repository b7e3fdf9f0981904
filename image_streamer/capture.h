// SPDX-License-Identifier: MIT
// `vramflow streamer capture`: CRIU's dump (--stream) in, one vramflow
// stream out. Every image file CRIU writes becomes an object of the stream,
// named as CRIU names it; files arrive concurrently, each through its own
// pipe, and their chunks interleave in the stream. See docs/CLI.md.
#pragma once

#include "common/status.h"
#include "image_streamer/options.h"

namespace vramflow {

Status RunStreamerCapture(const StreamerOptions& options);

}  // namespace vramflow
