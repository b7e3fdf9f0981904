// SPDX-License-Identifier: MIT
#include "streamer/base_chunk_coding.h"

#include <cstring>

#include "common/hash.h"

namespace vramflow {
namespace {

// What BaseStream::ReadChunk may hold (BaseScratch) for chunks of at most
// `chunk_size`: a frame and its decoded bytes for every stream of the chain,
// and a decoder's state.
uint64_t ScratchBytes(const BaseStream& base, size_t chunk_size) {
  const uint64_t levels = base.DescriptorForDependent().chain_length;
  return levels * (kFrameHeaderSize + kBaseChunkRefSize + ChunkEncoder::MaxPayloadSize(chunk_size) + chunk_size +
                   ChunkDecoder::MemoryBytes(chunk_size));
}

std::string Where(const BaseStream& base, uint32_t base_object_id, uint64_t offset) {
  return "the base's chunk at offset " + std::to_string(offset) + " of its object " + std::to_string(base_object_id) +
         " (base " + HexDigest(base.id()).substr(0, 16) + ")";
}

}  // namespace

Status CheckDumpBase(const PipelineOptions& options) {
  if (!options.base) {
    if (options.base_refs_only) return Status::InvalidArgument("references only needs a base");
    return Status::Ok();
  }
  const BaseDescriptor descriptor = options.base->DescriptorForDependent();
  if (descriptor.chain_length > kMaxBaseChain)
    return Status::InvalidArgument("a stream built on the base '" + descriptor.location +
                                   "' would rest on a chain of " + std::to_string(descriptor.chain_length) +
                                   " streams, more than the " + std::to_string(kMaxBaseChain) +
                                   " allowed (write a self-contained base with `vramflow flatten`)");
  if (options.base_refs_only && !options.base->has_digests())
    return Status::InvalidArgument(
        "the base '" + descriptor.location +
        "' has no chunk digests (DIGEST_BLOCKs), which references-only matching needs: write it with --digests, "
        "or match by reading its chunks (no --base-refs-only)");
  return Status::Ok();
}

void XorInto(std::span<uint8_t> out, std::span<const uint8_t> in) {
  size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    uint64_t a, b;
    std::memcpy(&a, out.data() + i, 8);
    std::memcpy(&b, in.data() + i, 8);
    a ^= b;
    std::memcpy(out.data() + i, &a, 8);
  }
  for (; i < out.size(); ++i) out[i] ^= in[i];
}

uint64_t BaseChunkCoder::MemoryBytes(const BaseStream& base, size_t chunk_size, bool refs_only) {
  const uint64_t read = chunk_size + ScratchBytes(base, chunk_size);  // a base chunk, read to prove it
  if (refs_only) return read;
  return read + chunk_size + ChunkEncoder::MaxPayloadSize(chunk_size);
}

Result<std::unique_ptr<BaseChunkCoder>> BaseChunkCoder::Create(std::shared_ptr<const BaseStream> base,
                                                               size_t chunk_size, bool refs_only,
                                                               MemoryBudget* budget) {
  if (!base) return Status::Internal("BaseChunkCoder without a base");
  if (refs_only && !base->has_digests())
    return Status::InvalidArgument("the base '" + base->DescriptorForDependent().location +
                                   "' has no chunk digests (DIGEST_BLOCKs), which references-only matching needs");
  std::unique_ptr<BaseChunkCoder> coder(new BaseChunkCoder(std::move(base), refs_only));
  VF_ASSIGN_OR_RETURN(coder->base_bytes_, BudgetedBuffer::Allocate(budget, chunk_size, "a base chunk buffer"));
  const uint64_t scratch = ScratchBytes(*coder->base_, chunk_size);
  VF_RETURN_IF_ERROR(budget->Charge(scratch, "reading the base's chunks"));
  coder->budget_ = budget;
  coder->scratch_charge_ = scratch;
  if (refs_only) return coder;
  VF_ASSIGN_OR_RETURN(coder->xor_bytes_, BudgetedBuffer::Allocate(budget, chunk_size, "a delta buffer"));
  VF_ASSIGN_OR_RETURN(coder->delta_payload_, BudgetedBuffer::Allocate(budget, ChunkEncoder::MaxPayloadSize(chunk_size),
                                                                      "a delta payload buffer"));
  return coder;
}

BaseChunkCoder::~BaseChunkCoder() {
  if (budget_) budget_->Refund(scratch_charge_);
}

Status BaseChunkCoder::Load(uint32_t base_object_id, uint64_t offset, size_t size,
                            const std::optional<Sha256Digest>& stored) {
  if (loaded_ && loaded_object_ == base_object_id && loaded_offset_ == offset) return Status::Ok();
  loaded_ = false;
  const std::span<uint8_t> bytes(base_bytes_.data(), size);
  Status read = base_->ReadChunk(base_object_id, offset, bytes, scratch_, stored ? &*stored : nullptr);
  if (!read.ok()) return read.WithContext(Where(*base_, base_object_id, offset));
  loaded_sha256_ = stored ? *stored : Sha256(bytes);
  loaded_ = true;
  loaded_object_ = base_object_id;
  loaded_offset_ = offset;
  return Status::Ok();
}

Result<BaseCoding> BaseChunkCoder::Reference(uint32_t base_object_id, uint64_t offset, std::span<const uint8_t> raw,
                                             const Sha256Digest& sha256) {
  BaseCoding coding;
  if (!base_->ChunkAt(base_object_id, offset, raw.size())) return coding;
  coding.ref.base_object_id = base_object_id;
  coding.ref.base_offset = offset;
  if (const std::optional<Sha256Digest> stored = base_->StoredDigest(base_object_id, offset)) {
    // The stored digest finds an equal chunk; the base chunk's bytes,
    // checked against it as a restore checks them, prove it.
    if (*stored != sha256) return BaseCoding{};
    VF_RETURN_IF_ERROR(Load(base_object_id, offset, raw.size(), stored));
    coding.kind = BaseCoding::Kind::kRef;
    coding.ref.base_sha256 = sha256;
    return coding;
  }
  if (refs_only_) return BaseCoding{};  // Create() made sure the base has digests
  VF_RETURN_IF_ERROR(Load(base_object_id, offset, raw.size(), std::nullopt));
  if (loaded_sha256_ != sha256) return BaseCoding{};
  coding.kind = BaseCoding::Kind::kRef;
  coding.ref.base_sha256 = sha256;
  return coding;
}

Status EncodeChunkWithBase(std::span<const uint8_t> raw, uint64_t offset, std::span<uint8_t> payload,
                           ChunkEncoder& encoder, BaseChunkCoder* coder, const SeekIndexObject* base_object,
                           bool may_delta, bool want_sha256, ChunkWithBase* out) {
  *out = ChunkWithBase{};
  const bool against_base = coder != nullptr && base_object != nullptr;
  if (against_base) {
    out->sha256 = Sha256(raw);
    VF_ASSIGN_OR_RETURN(BaseCoding coding, coder->Reference(base_object->id, offset, raw, *out->sha256));
    if (coding.kind == BaseCoding::Kind::kRef) {
      out->kind = coding.kind;
      out->ref = coding.ref;
      out->encoded.raw_hash = Hash64(raw.data(), raw.size());
      return Status::Ok();
    }
  }
  VF_RETURN_IF_ERROR(encoder.EncodeInto(raw, payload, &out->encoded));
  if (want_sha256 && !out->sha256 && !out->encoded.zero_run) out->sha256 = Sha256(raw);
  if (!against_base || !may_delta || out->encoded.zero_run) return Status::Ok();
  VF_ASSIGN_OR_RETURN(BaseCoding coding,
                      coder->Delta(base_object->id, offset, raw, out->encoded.payload.size(), encoder));
  if (coding.kind != BaseCoding::Kind::kDelta) return Status::Ok();
  // The delta's payload replaces the chunk's own in `payload`.
  const uint64_t raw_hash = out->encoded.raw_hash;
  std::memmove(payload.data(), coding.delta.payload.data(), coding.delta.payload.size());
  out->encoded = coding.delta;
  out->encoded.payload = std::span<const uint8_t>(payload.data(), coding.delta.payload.size());
  out->encoded.raw_hash = raw_hash;
  out->kind = coding.kind;
  out->ref = coding.ref;
  return Status::Ok();
}

Result<BaseCoding> BaseChunkCoder::Delta(uint32_t base_object_id, uint64_t offset, std::span<const uint8_t> raw,
                                         uint64_t own_payload_size, ChunkEncoder& encoder) {
  if (refs_only_ || !base_->ChunkAt(base_object_id, offset, raw.size())) return BaseCoding{};
  VF_RETURN_IF_ERROR(Load(base_object_id, offset, raw.size(), base_->StoredDigest(base_object_id, offset)));
  uint8_t* x = xor_bytes_.data();
  std::memcpy(x, base_bytes_.data(), raw.size());
  XorInto(std::span<uint8_t>(x, raw.size()), raw);
  EncodedChunk encoded;
  VF_RETURN_IF_ERROR(encoder.EncodeInto(std::span<const uint8_t>(x, raw.size()),
                                        std::span<uint8_t>(delta_payload_.data(), delta_payload_.size()), &encoded));
  // A zero run would mean equal bytes, which Reference() ruled out.
  // FORMAT.md 4.11: the coded delta is at most raw_size bytes.
  if (encoded.zero_run || encoded.payload.size() > raw.size() ||
      kBaseChunkRefSize + encoded.payload.size() >= own_payload_size)
    return BaseCoding{};
  BaseCoding coding;
  coding.kind = BaseCoding::Kind::kDelta;
  coding.ref = BaseChunkRef{base_object_id, offset, loaded_sha256_};
  coding.delta = encoded;
  return coding;
}

}  // namespace vramflow
