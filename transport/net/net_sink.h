// SPDX-License-Identifier: MIT
// The network sender: a ByteSink that carries a stream to a vramflow
// receiver (`vramflow recv`, or any source opened on a tcp:// or unix: URI)
// over several connections at once.
//
// Write() cuts the stream into segments; each connection sends the next
// unsent one, so the segments of one stream travel in parallel and the
// receiver puts them back in order by their offsets. Segments are kept until
// the receiver acknowledges them (at most NetOptions::window_bytes, which is
// also the back-pressure): when a connection breaks, the sender reconnects
// and resends from the receiver's position, up to NetOptions::retries times.
// Commit() returns only when the receiver reports the stream complete and
// stored (or restored); destroying the sink uncommitted tells the receiver
// to discard everything.
#pragma once

#include <memory>

#include "transport/core/byte_stream.h"
#include "transport/core/uri.h"
#include "transport/net/net_options.h"

namespace vramflow {

Result<std::unique_ptr<ByteSink>> OpenNetSink(const Endpoint& endpoint, const NetOptions& options);

}  // namespace vramflow
