// SPDX-License-Identifier: MIT
// Dumping many inputs that arrive at once, each read in order as it comes,
// into one stream: CRIU's image files under `criu dump --stream`, which one
// CRIU thread writes turn by turn (pages-N and pagemap-N), several open at
// a time. Each input becomes an object of unknown size (FORMAT.md 4.1,
// kUnknownObjectSize, the size given at OBJECT_END); the chunks of different
// objects interleave in the stream (FORMAT.md section 7).
//
// Each input has a reader thread of its own, so no input ever waits for
// another: a writer that blocks on a full pipe of one input never stops the
// reading of the others. The chunks of all inputs are encoded on `threads`
// workers and written by one writer thread, each object's chunks in order.
// Every chunk in flight holds one raw and one payload buffer from a fixed set
// charged to the memory budget (ordered_dump_plan.h); a reader waits for a
// free one, so memory stays bounded whatever the inputs' sizes. A reader takes
// a buffer only once its input has bytes to give, and one that holds a partly
// filled buffer hands it on as a short chunk when its input has nothing more
// for a moment while another reader waits for a buffer: readers can never
// hold every buffer while they wait for bytes that will only come once
// another input moves on.
//
// Dedup (options.dedup): a DATA chunk of an encoded input whose bytes equal
// a DATA chunk written earlier in the same object, still in the stream's
// dedup window, becomes a DEDUP_REF to it. Only within one object: a reader
// that hands each object on whole and lets it go (`streamer serve`) can
// always resolve such a reference. Keys are XXH3-128 of the content, as the
// dump graph's.
//
// Chunks start at multiples of the chunk size in each input: a part handed
// on early (above) is followed by the rest of that chunk, so the same input
// is cut the same way whatever the timing.
//
// A base (options.base; docs/FORMAT.md 4.9 to 4.11): an input is matched to
// the base's object of the same name, and each chunk to the base's chunk at
// the same offset and of the same size (base_chunk_coding.h): equal, it
// becomes a BASE_REF; else, for an encoded input and unless
// options.base_refs_only, a BASE_DELTA where that is smaller. The base's
// index and each worker's buffers for the base's chunks are charged to the
// budget. This is the only incremental path for CRIU's own images (CPU
// pages): CRIU's incremental dumps need soft-dirty tracking.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "streamer/format/frame_format.h"
#include "streamer/pipeline.h"
#include "transport/core/byte_stream.h"

namespace vramflow {

// How many inputs may be open (read, not yet at their end) at once by
// default: each has a thread. CRIU keeps a few dozen open at most.
inline constexpr size_t kDefaultMaxOpenInputs = 256;

// How every chunk of an input is stored.
enum class ChunkStorage {
  kEncoded,  // with options.encoder
  kRaw,      // as it is: codec raw, no transform, no zero runs
};

struct ConcurrentInput {
  ObjectMetadata metadata;
  // Read until its end (a pipe, a file); when not valid, `content` is the input.
  UniqueFd fd;
  std::vector<uint8_t> content;
  // Called on the input's reader with its first chunk (`whole`: the input
  // ended within it; empty for an empty input) to pick how all its chunks
  // are stored. Not set: kEncoded.
  std::function<ChunkStorage(std::span<const uint8_t> first_chunk, bool whole)> choose_storage;
};

// An object of the finished stream, in the order the inputs were added.
struct ConcurrentObject {
  std::string name;
  uint64_t size = 0;
};

class ConcurrentDump {
 public:
  // Writes the stream header to `sink` (which must outlive the dump) and
  // starts the workers. Uses options.chunk_size, encoder, threads (0: fit
  // to the machine), max_memory, seek_index, base, base_refs_only, producer,
  // progress and note.
  // More than `max_open_inputs` inputs open at once is an error (Add).
  static Result<std::unique_ptr<ConcurrentDump>> Start(ByteSink* sink, const PipelineOptions& options,
                                                       size_t max_open_inputs = kDefaultMaxOpenInputs);
  // Stops reading and joins every thread; without Finish(), the stream has
  // no end and the sink is not committed.
  ~ConcurrentDump();
  ConcurrentDump(const ConcurrentDump&) = delete;
  ConcurrentDump& operator=(const ConcurrentDump&) = delete;

  // Starts reading `input` as the next object. Fails (closing the input)
  // once the dump has failed, with the first error, or when it would be
  // one input too many open at once (which fails the dump).
  Status Add(ConcurrentInput input);
  // The first error so far (OK while all goes well); does not wait.
  Status status() const;
  // Takes no more inputs and waits until every input has ended and all of
  // it is written; gives the objects (to check before the stream ends).
  // Returns the first error of any input, worker or write instead.
  Status Drain(std::vector<ConcurrentObject>* objects);
  // After Drain(): ends the stream (SEEK_INDEX, STREAM_END). Does not
  // commit the sink.
  Status Finish(PipelineStats* stats);
  // Stops everything with `why` (a protocol error, a signal): readers close
  // their inputs, Drain() returns `why`.
  void Abort(const Status& why);

 private:
  class Engine;
  explicit ConcurrentDump(std::unique_ptr<Engine> engine);
  std::unique_ptr<Engine> engine_;
};

}  // namespace vramflow
