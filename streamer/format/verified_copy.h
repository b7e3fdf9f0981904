// SPDX-License-Identifier: MIT
// CopyVerifiedStream: stores a chunk stream only once it has been verified.
//
// `recv` (one stream, or one after another into a directory) and `send` to a
// storing destination pass the bytes through the reference reader
// (streamer/format/stream_reader.h, ReadStream with decoding: every check that
// `vramflow verify` applies) on their way to the sink. The sink is committed
// only when the reader has seen STREAM_END, its totals matched and no byte
// followed it; anything else (a stream that breaks off, a corrupt frame,
// bytes that are not a vramflow stream at all) is an error and the sink is
// left uncommitted, so nothing appears under the final name.
//
// Memory: what `verify` uses (one frame's payload and its decoded bytes, the
// reader's records, the stream's dedup window), within `max_memory`, on top
// of the sink's own buffers; a stream that needs more is refused.
// Not thread-safe: one call per source and sink.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/progress.h"
#include "common/status.h"
#include "streamer/format/base_stream.h"
#include "transport/core/byte_stream.h"

namespace vramflow {

// Copies every byte of `source` to `sink` while verifying it, then commits
// the sink; adds the bytes read to `*bytes`. A progress bar labelled `label`
// when `progress`. The sink is committed only after a clean verdict.
// `open_base` opens the base of an incremental stream (the receiver's store,
// base_store.h), so that its references are checked against the base's
// bytes too; unset, such a stream fails ("needs its base").
Status CopyVerifiedStream(ByteSource& source, ByteSink& sink, const std::string& label, ProgressStyle progress,
                          uint64_t max_memory, uint64_t* bytes, const OpenBaseFn& open_base = {});

}  // namespace vramflow
