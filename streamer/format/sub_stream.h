// SPDX-License-Identifier: MIT
// SubStream: some objects of a stored stream, as a chunk stream of their own.
//
// Given a stored stream that can be read at any offset and its seek index
// (seek_index.h), OpenSubStream() returns a ByteSource that yields a valid
// chunk stream holding only the selected objects, while fetching only their
// frames: the stream header (seek-index flag cleared), each selected
// object's OBJECT_BEGIN, chunk and OBJECT_END frames in their original
// stream order, renumbered, then a fresh STREAM_END with the totals of the
// selection. Object ids, names, offsets, hashes and digests stay as stored.
//
// A DEDUP_REF whose DATA frame lies in an object left out is replaced by
// that DATA frame, moved to the reference's object and offset (same size and
// hash, so the object digest still holds); a later reference to the same
// bytes then names the moved frame. References within the selection stay,
// unless the frames moved in before them put their DATA frame out of the
// stream's dedup window: those are replaced the same way.
//
// Nothing is trusted: every fetched header must pass its checksum and match
// the index entry it was fetched for (kind, object, offset, sizes; an
// OBJECT_BEGIN also its name and attributes), or the read fails naming the
// object, the frame and its offset in the stored stream. Payloads pass through unchanged; the reader of the sub-stream
// (ReadStream, the restore graph) decodes and hash-checks every one, so a
// restore through a sub-stream is verified exactly as a full one. Its error
// messages then count frames and offsets in the sub-stream, while object ids
// and chunk offsets are the stored stream's.
//
// Frames adjacent in the stored stream are fetched as one range (up to
// max_range bytes), and ranges are fetched in parallel ahead of the reader
// within a memory budget (transport/core/range_reader.h).
#pragma once

#include <cstdint>
#include <memory>
#include <set>

#include "streamer/format/seek_index.h"
#include "transport/core/byte_stream.h"
#include "transport/core/random_access.h"
#include "transport/core/range_reader.h"

namespace vramflow {

struct SubStreamOptions {
  RangeReaderOptions fetch;  // parallel ranged reads: budget, request size, concurrency
  // Adjacent frames are merged into ranges of at most this many bytes (a
  // single larger frame is a range of its own).
  uint64_t max_range = 8ull << 20;
};

// What a sub-stream costs, known before its first byte is read.
struct SubStreamPlan {
  uint64_t objects = 0;
  uint64_t raw_bytes = 0;        // sum of the selected objects' sizes
  uint64_t frames = 0;           // frames of the sub-stream before its STREAM_END
  uint64_t fetch_bytes = 0;      // bytes of the stored stream fetched
  uint64_t ranges = 0;           // ranges fetched (after merging adjacent frames)
  uint64_t moved_refs = 0;       // DEDUP_REFs replaced by the DATA frame they name
  uint64_t redirected_refs = 0;  // DEDUP_REFs now naming a moved DATA frame
  uint64_t kept_refs = 0;        // DEDUP_REFs within the selection, as stored
  uint64_t stream_bytes = 0;     // of the sub-stream, STREAM_END included
};

// `stored` comes from ReadSeekIndex(*source); `objects` are ids it lists
// (InvalidArgument otherwise, or when empty). The source is shared with the
// returned reader's fetch threads.
Result<std::unique_ptr<ByteSource>> OpenSubStream(std::shared_ptr<RandomAccessSource> source,
                                                  const StoredStreamIndex& stored, const std::set<uint32_t>& objects,
                                                  const SubStreamOptions& options, SubStreamPlan* plan = nullptr);

}  // namespace vramflow
