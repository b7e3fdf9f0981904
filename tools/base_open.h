// SPDX-License-Identifier: MIT
// How the CLI opens the base of an incremental stream it reads (unpack,
// verify, flatten): from --base (repeatable: the first is the direct base,
// any more are links of its chain, matched by stream id), or, without one,
// from the location the stream's BASE frame records (relative to the
// directory of the stream read). Every base opens through the same
// transports as any input (files, s3:// with the S3 flags).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "streamer/base_stream.h"
#include "transport/open_uri.h"

namespace vramflow {

using OpenBaseFunction = std::function<Result<std::shared_ptr<const BaseStream>>(const BaseDescriptor&)>;

OpenBaseFunction BaseOpenerFor(const std::vector<std::string>& bases, const std::string& input,
                               const TransportOptions& transport);

}  // namespace vramflow
