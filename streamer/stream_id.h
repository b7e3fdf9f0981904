// SPDX-License-Identifier: MIT
// What a stored stream is known by beyond its index (FORMAT.md 4.12): its
// stream id, SHA-256 over its header, SEEK_INDEX payload, INDEX_BLOCK
// payloads and STREAM_END payload, and, where the writer stored them, the
// SHA-256 of every chunk from the DIGEST_BLOCK after each INDEX_BLOCK. One
// ranged read per INDEX_BLOCK gets both; no chunk frame is read.
#pragma once

#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "streamer/frame_format.h"
#include "streamer/seek_index.h"
#include "transport/random_access.h"

namespace vramflow {

struct StreamIdAndDigests {
  StreamId id{};
  bool has_digests = false;
  // With digests: per object of the index (same order), one per chunk in the
  // order of SeekIndexObject::chunks (by object offset); zeros for ZERO_RUNs.
  std::vector<std::vector<Sha256Digest>> digests;
};

// Reads what ReadSeekIndex found again, hashing it into the id; with
// `want_digests` also reads and checks the DIGEST_BLOCKs: each right after
// its INDEX_BLOCK (next sequence), of the same object, skippable, 32 bytes
// per record, its raw_hash right; all blocks have one or none does.
Result<StreamIdAndDigests> ReadStreamIdAndDigests(RandomAccessSource& source, const StoredStreamIndex& stored,
                                                  bool want_digests);

}  // namespace vramflow
