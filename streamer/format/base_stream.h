// SPDX-License-Identifier: MIT
// BaseStream: an earlier stored stream that an incremental stream is built on
// (docs/FORMAT.md 4.9 to 4.12), opened for matching (a dump) and for
// resolving references (a restore, verify, flatten).
//
// Opening reads only the base's two ends and its index blocks (and, where
// present, its DIGEST_BLOCKs): never its chunk frames. It computes the
// base's stream id, and, when the base is itself incremental, opens the base's
// own base (from the locations the caller allows, else from its BASE frame's
// location), to at most kMaxBaseChain streams, refusing loops and any stream
// whose id, size or totals differ from what the stream built on it names.
//
// ReadChunk() fetches one chunk frame of the base by a ranged read, decodes
// it, resolves what it points at (a DEDUP_REF's DATA frame in the same
// stream, a BASE_REF or BASE_DELTA's chunk in the next base), checks every
// hash on the way (XXH3 raw_hash, and SHA-256 wherever a base's bytes stand
// in for a chunk), and returns the bytes. Thread-safe: the dump and restore
// graphs call it from their parallel stages.
//
// Memory: the index of every stream of the chain (48 bytes per chunk, plus
// 32 per chunk with digests) is held for the BaseStream's lifetime;
// memory_bytes() says how much, for the caller's budget. Each ReadChunk needs
// the caller's scratch (BaseScratch), sized for one chunk per level of the
// chain, so that nothing grows with the stream.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/sha256.h"
#include "common/status.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/seek_index.h"
#include "transport/core/random_access.h"

namespace vramflow {

class BaseStream;

// Opens a base (or a base of a base) named by a location: a path or URI as the
// user or a BASE frame gave it. The CLI supplies one that knows every
// transport (file, s3://) and its flags; tests supply files.
using BaseOpener = std::function<Result<std::shared_ptr<RandomAccessSource>>(const std::string& location)>;

// Opens the base a stream's BASE frame names (PipelineOptions::open_base, a
// reader's): how a command, the plugin or a receiver's store finds it is
// theirs (streamer/base/base_opener.h); what it returns must be that base.
using OpenBaseFn = std::function<Result<std::shared_ptr<const BaseStream>>(const BaseDescriptor&)>;

struct BaseOpenOptions {
  BaseOpener open;
  // Streams the user named (--base, repeatable), besides the first: any
  // link of the chain is taken from here first (matched by stream id), then
  // from the location its dependent's BASE frame records.
  std::vector<std::string> more_locations;
  // Where a link of the chain is, by its stream id, for a caller that knows
  // its streams' ids before opening any (a receiver's base store, a sender's
  // candidates): a location, or empty when unknown. Asked after
  // more_locations and before the location a BASE frame records; unlike
  // more_locations (each opened up front), only the links the chain needs
  // are read.
  std::function<std::string(const StreamId&)> locate;
  // Most bytes the chain's indexes may take, counted from each SEEK_INDEX
  // before its records are read (NotSupported beyond: refused, not held).
  // Every command sets its memory budget (-m) here; the default serves
  // tests and callers without one.
  uint64_t max_index_bytes = 256ull << 20;
};

// Per-thread scratch for ReadChunk: buffers for the frames and decoded bytes
// of every level of the chain. Reused across calls; grows to the largest
// chunk read, never more than kMaxChunkSize per level.
struct BaseScratch {
  std::vector<std::vector<uint8_t>> frames;
  std::vector<std::vector<uint8_t>> decoded;
  ChunkDecoder decoder;  // codec state (not thread-safe, hence per caller)
};

class BaseStream {
 public:
  virtual ~BaseStream() = default;

  // The base's stream id, and the BASE frame a stream built on it carries
  // (chain_length = this stream's own + 1; location as opened).
  virtual const StreamId& id() const = 0;
  virtual BaseDescriptor DescriptorForDependent() const = 0;
  virtual const StoredStreamIndex& index() const = 0;
  // Whether every chunk of the base has a stored SHA-256 (DIGEST_BLOCKs).
  virtual bool has_digests() const = 0;

  // The object of the base that a new object continues, or null: GPU buffers
  // (attributes gpu-id and gpu-va) by the GPU's place in order of first
  // appearance, the virtual address and the size; anything else by name.
  // `gpu_ordinal` is the new object's GPU's place in its own stream.
  virtual const SeekIndexObject* Match(const ObjectMetadata& metadata, uint64_t size,
                                       std::optional<uint32_t> gpu_ordinal) const = 0;
  // The chunk frame of base object `object_id` at exactly [offset, offset +
  // size) that a reference may name (not a ZERO_RUN), or null.
  virtual const SeekIndexChunk* ChunkAt(uint32_t object_id, uint64_t offset, uint64_t size) const = 0;
  // Its SHA-256 from the base's DIGEST_BLOCKs (has_digests()), or nullopt.
  virtual std::optional<Sha256Digest> StoredDigest(uint32_t object_id, uint64_t offset) const = 0;

  // Reads the chunk ChunkAt names into `out` (exactly its raw_size), fully
  // checked as described above; if `sha256` is given the bytes must hash to
  // it (a reference's base_sha256), else Corruption naming the base, object
  // and offset.
  virtual Status ReadChunk(uint32_t object_id, uint64_t offset, std::span<uint8_t> out, BaseScratch& scratch,
                           const Sha256Digest* sha256 = nullptr) const = 0;

  // Bytes held (the chain's indexes and digests), for the caller's budget.
  virtual uint64_t memory_bytes() const = 0;
  // How many ReadChunk calls a reader should keep in flight: 1 where the
  // chain's streams are files, more where a read waits on a request (S3),
  // the most any link asks for (RandomAccessSource::ConcurrentReads).
  virtual unsigned concurrent_reads() const = 0;
};

// Opens `location` as a base: reads its index (it must have index blocks),
// computes its id, opens its chain. `expected`, when given (a restore knows
// the BASE frame of the stream it restores), must match: otherwise
// InvalidArgument "wrong base" naming both ids.
Result<std::shared_ptr<const BaseStream>> OpenBaseStream(const std::string& location, const BaseOpenOptions& options,
                                                         const BaseDescriptor* expected = nullptr);

// The BASE frame of a stored incremental stream (its first frame), read and
// checked (header, payload hash, descriptor); `location` names it in errors.
Result<BaseDescriptor> ReadBaseFrame(RandomAccessSource& source, const std::string& location);

}  // namespace vramflow
