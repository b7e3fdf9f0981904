// SPDX-License-Identifier: MIT
// How one chunk of a dump with a base is stored (docs/FORMAT.md 4.10,
// 4.11): as a BASE_REF when its bytes equal those of the base's chunk at the
// same offset and of the same size, as a BASE_DELTA (the XOR with that chunk,
// coded as a DATA payload is) when that codes smaller than the chunk on its
// own, else on its own as usual. The one decision every dump engine with a
// base makes (streamer/concurrent_dump.cc for `vramflow streamer capture`).
//
// Equality is decided by SHA-256 alone: against the base's stored digest when
// it has DIGEST_BLOCKs, else against the digest of the base chunk's bytes.
// Either way the base chunk a reference names is read and fully checked by
// BaseStream::ReadChunk against the SHA-256 the reference carries, so that a
// base whose digests or index lie fails the dump rather than yield a stream
// no restore can read. A changed chunk's base bytes are read only for a
// delta or, without stored digests, to compare.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "codecs/chunk_codec.h"
#include "common/sha256.h"
#include "common/status.h"
#include "streamer/format/base_stream.h"
#include "streamer/format/frame_format.h"
#include "streamer/machine/memory_budget.h"
#include "streamer/pipeline.h"

namespace vramflow {

// The options a dump against options.base cannot run with: a chain longer
// than kMaxBaseChain, or references only against a base without digests.
// OK without a base unless base_refs_only is set.
Status CheckDumpBase(const PipelineOptions& options);

// out[i] ^= in[i] (the same sizes), a word at a time.
void XorInto(std::span<uint8_t> out, std::span<const uint8_t> in);

struct BaseCoding {
  enum class Kind { kOwn, kRef, kDelta };
  Kind kind = Kind::kOwn;
  BaseChunkRef ref;  // kRef, kDelta: the base chunk
  // kDelta: the XOR's coding; its payload is in the coder's buffer (or its
  // XOR buffer, for codec raw), valid until the coder's next Code().
  EncodedChunk delta;
};

class BaseChunkCoder;

// One chunk of a dump with a base, coded.
struct ChunkWithBase {
  BaseCoding::Kind kind = BaseCoding::Kind::kOwn;
  BaseChunkRef ref;  // kRef, kDelta: the base chunk
  // kOwn, kDelta: the frame's coding, its payload in the caller's `payload`
  // (or, stored raw, the chunk itself); kRef: no payload. raw_hash is the
  // XXH3-64 of the chunk's bytes for every kind.
  EncodedChunk encoded;
  // The chunk's SHA-256 where it was compared with the base or asked for
  // (never for a zero run that was not compared).
  std::optional<Sha256Digest> sha256;
};

// Codes the chunk `raw` at `offset` of its object as every dump engine with
// a base does: with `base_object` (the base's object of the same name,
// BaseStream::Match) and `coder`, a BASE_REF when the base's chunk there
// equals it; else coded with `encoder` into `payload`
// (ChunkEncoder::MaxPayloadSize bytes), then, where `may_delta` (encoded
// inputs: a delta coded raw is never smaller) and the chunk is not a zero
// run, a BASE_DELTA when that codes smaller. Without a base object: coded
// on its own. `want_sha256`: the SHA-256 of every chunk but zero runs
// (DIGEST_BLOCKs).
Status EncodeChunkWithBase(std::span<const uint8_t> raw, uint64_t offset, std::span<uint8_t> payload,
                           ChunkEncoder& encoder, BaseChunkCoder* coder, const SeekIndexObject* base_object,
                           bool may_delta, bool want_sha256, ChunkWithBase* out);

// One per worker thread: its buffers are reused for every chunk.
class BaseChunkCoder {
 public:
  // Bytes Create() charges for chunks of at most `chunk_size`: the base
  // chunk's bytes and what ReadChunk needs for every level of the base's
  // chain, and with deltas (not refs only) the XOR and its coded payload.
  // (The base's index is the caller's to charge, once.)
  static uint64_t MemoryBytes(const BaseStream& base, size_t chunk_size, bool refs_only);

  // `refs_only`: the base must have stored digests (InvalidArgument
  // otherwise, naming it); chunks become references or stay as they are,
  // and only the base chunks referenced are read.
  static Result<std::unique_ptr<BaseChunkCoder>> Create(std::shared_ptr<const BaseStream> base, size_t chunk_size,
                                                        bool refs_only, MemoryBudget* budget);

  // Whether the chunk `raw` at `offset` of an object that continues base
  // object `base_object_id` (BaseStream::Match), whose SHA-256 is `sha256`,
  // equals the base's chunk there: kRef, else kOwn. The base chunk of a kRef
  // has been read and checked against `sha256`. A base chunk that cannot be
  // read or fails its checks (its stored digest among them) is an error,
  // never a silent full chunk: the base is damaged.
  Result<BaseCoding> Reference(uint32_t base_object_id, uint64_t offset, std::span<const uint8_t> raw,
                               const Sha256Digest& sha256);
  // After Reference() gave kOwn for the same chunk: kDelta when the XOR with
  // the base's chunk, coded by `encoder` (the one the chunk was coded
  // with), takes fewer bytes than `own_payload_size` (the chunk's own
  // payload); else kOwn. Always kOwn for a refs-only coder.
  Result<BaseCoding> Delta(uint32_t base_object_id, uint64_t offset, std::span<const uint8_t> raw,
                           uint64_t own_payload_size, ChunkEncoder& encoder);

 private:
  // Reads the base's chunk into base_bytes_ (checked against `stored` when
  // given) unless it is there already.
  Status Load(uint32_t base_object_id, uint64_t offset, size_t size, const std::optional<Sha256Digest>& stored);
  BaseChunkCoder(std::shared_ptr<const BaseStream> base, bool refs_only)
      : base_(std::move(base)), refs_only_(refs_only) {}

  std::shared_ptr<const BaseStream> base_;
  bool refs_only_;
  BudgetedBuffer base_bytes_;  // the base chunk
  BudgetedBuffer xor_bytes_;   // the chunk XOR the base chunk
  BudgetedBuffer delta_payload_;
  BaseScratch scratch_;
  // What base_bytes_ holds (Reference read it), so that Delta reads it once.
  bool loaded_ = false;
  uint32_t loaded_object_ = 0;
  uint64_t loaded_offset_ = 0;
  Sha256Digest loaded_sha256_{};
  MemoryBudget* budget_ = nullptr;
  uint64_t scratch_charge_ = 0;  // charged for what `scratch_` may grow to

 public:
  ~BaseChunkCoder();
  BaseChunkCoder(const BaseChunkCoder&) = delete;
  BaseChunkCoder& operator=(const BaseChunkCoder&) = delete;
};

}  // namespace vramflow
