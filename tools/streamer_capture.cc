// SPDX-License-Identifier: MIT
#include "tools/streamer_capture.h"

namespace vramflow {

Status RunStreamerCapture(const StreamerOptions&) { return Status::NotSupported("streamer capture: not built yet"); }

}  // namespace vramflow
