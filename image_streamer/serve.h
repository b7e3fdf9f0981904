// SPDX-License-Identifier: MIT
// `vramflow streamer serve` and `extract`: one vramflow stream in; serve
// answers CRIU's restore (--stream) with the stream's objects as image
// files, extract writes them into the images directory. See docs/CLI.md.
#pragma once

#include "common/status.h"
#include "image_streamer/options.h"

namespace vramflow {

Status RunStreamerServe(const StreamerOptions& options);
Status RunStreamerExtract(const StreamerOptions& options);

}  // namespace vramflow
