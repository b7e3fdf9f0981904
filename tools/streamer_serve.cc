// SPDX-License-Identifier: MIT
#include "tools/streamer_serve.h"

namespace vramflow {

Status RunStreamerServe(const StreamerOptions&) { return Status::NotSupported("streamer serve: not built yet"); }
Status RunStreamerExtract(const StreamerOptions&) { return Status::NotSupported("streamer extract: not built yet"); }

}  // namespace vramflow
