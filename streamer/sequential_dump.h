// SPDX-License-Identifier: MIT
// Dumping inputs that have no size and cannot be read at offsets (stdin,
// pipes, S3 objects) as objects of unknown size (FORMAT.md:
// kUnknownObjectSize, the size given at OBJECT_END), on every thread.
//
// One thread reads each input chunk by chunk, in order; the chunks are
// encoded in parallel and written in order, so the stream is the same for any
// thread count. Each chunk in flight holds one buffer of the raw chunk and
// one of its payload, taken from a fixed set charged to the memory budget
// (with the codec state of each thread): nothing queues without bound, and
// reading waits when every buffer is in use. No dedup: a reference would have
// to name an offset that the reader cannot seek back to check.
//
// A base (options.base; FORMAT.md 4.9 to 4.11): each input is matched to the
// base's object of the same name, and each chunk to the base's chunk at the
// same offset and of the same size (base_chunk_coding.h), as `streamer
// capture` does: equal, a BASE_REF; else, unless options.base_refs_only, a
// BASE_DELTA where that is smaller. The base's index and each thread's
// buffers for its chunks are charged to the budget.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "streamer/pipeline.h"
#include "transport/core/byte_stream.h"

namespace vramflow {

struct SequentialInput {
  ObjectMetadata metadata;
  // Opens the input when its turn comes (one is open at a time).
  std::function<Result<std::unique_ptr<ByteSource>>()> open;
};

// Dumps `inputs` as one stream into `sink` (not committed). Uses
// options.chunk_size, encoder, threads (0: fit to the machine; fewer when
// the budget cannot feed them, said through options.note), max_memory,
// seek_index, chunk_digests, base, base_location, base_refs_only, producer
// and progress.
Status RunSequentialDump(const std::vector<SequentialInput>& inputs, ByteSink* sink, const PipelineOptions& options,
                         PipelineStats* stats);

}  // namespace vramflow
