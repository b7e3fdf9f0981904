// SPDX-License-Identifier: MIT
// The chunk-stream wire format: constants, header layouts, encode/decode.
//
// This header and docs/FORMAT.md are the single definition of the format;
// the writer and reader include it and nothing else knows byte positions.
// A stream is: a 64-byte stream header, then frames, each a 64-byte frame
// header followed by `payload_size` payload bytes, the last frame being a
// STREAM_END. All integers are little-endian.
//
// DO NOT CHANGE the values below: they are recorded in streams on disk.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "codecs/codec_ids.h"
#include "common/hash.h"
#include "common/sha256.h"
#include "common/status.h"

namespace vramflow {

inline constexpr std::array<uint8_t, 8> kStreamMagic = {0x89, 'V', 'F', 'S', '\r', '\n', 0x1a, '\n'};
inline constexpr uint16_t kFormatVersion = 1;
inline constexpr size_t kStreamHeaderSize = 64;
inline constexpr size_t kFrameHeaderSize = 64;
inline constexpr size_t kProducerBytes = 32;

// Limits a reader enforces before allocating anything.
inline constexpr uint64_t kMaxChunkSize = 64ull << 20;   // raw bytes of one DATA frame
inline constexpr uint32_t kMaxMetadataSize = 64u << 10;  // OBJECT_BEGIN payload
inline constexpr size_t kMaxObjectNameBytes = 4096;
// Stream header dedup_window: DATA frames a reference may reach back, at
// most (each costs a reader up to kDedupWindowEntryBytes, dedup_window.h).
inline constexpr uint32_t kMaxDedupWindow = 1u << 20;
inline constexpr uint32_t kStreamEndPayloadSize = 32;
// OBJECT_BEGIN size of an object whose size is only known at its end (stdin);
// its OBJECT_END then carries the real size.
inline constexpr uint64_t kUnknownObjectSize = ~uint64_t{0};
// Largest object size and end offset a stream may describe.
inline constexpr uint64_t kMaxObjectSize = uint64_t{1} << 62;

enum class FrameKind : uint8_t {
  kObjectBegin = 1,
  kData = 2,
  kZeroRun = 3,
  kObjectEnd = 4,
  kStreamEnd = 5,
  kDedupRef = 6,      // the same bytes as an earlier DATA frame (dedup)
  kSeekIndex = 7,     // where every object's frames are, for random access (seek_index.h)
  kIndexBlock = 8,    // where some chunk frames of one object are (seek_index.h)
  kBase = 9,          // the base stream of an incremental stream: its first frame
  kBaseRef = 10,      // the same bytes as a chunk of the base
  kBaseDelta = 11,    // a chunk coded as the XOR with a chunk of the base
  kDigestBlock = 12,  // SHA-256 of the chunks the INDEX_BLOCK before it lists (skippable)
};
// DATA, ZERO_RUN, DEDUP_REF, BASE_REF and BASE_DELTA: the frames that carry
// an object's bytes (and count in its digest and its index).
bool IsChunkKind(uint8_t kind);
std::string FrameKindName(uint8_t kind);

// Stream header flags. Every bit not defined here is reserved and must be zero.
inline constexpr uint32_t kStreamFlagDedup = 1u << 0;      // DEDUP_REF frames may appear
inline constexpr uint32_t kStreamFlagSeekIndex = 1u << 1;  // a SEEK_INDEX frame comes just before STREAM_END
// INDEX_BLOCK frames list the chunk frames as the stream goes, and the
// SEEK_INDEX names the blocks. Only with kStreamFlagSeekIndex; a stream with
// that flag alone has the version 1 index of earlier writers, which this
// build reads past without using it.
inline constexpr uint32_t kStreamFlagIndexBlocks = 1u << 2;
// An incremental stream: a BASE frame comes first, and BASE_REF and
// BASE_DELTA frames may appear (FORMAT.md 4.9 to 4.11). Readers that do not
// know the flag refuse the stream as not supported.
inline constexpr uint32_t kStreamFlagBase = 1u << 3;
inline constexpr uint32_t kKnownStreamFlags =
    kStreamFlagDedup | kStreamFlagSeekIndex | kStreamFlagIndexBlocks | kStreamFlagBase;

// DEDUP_REF payload: the DATA frame whose bytes these are, the content key
// the writer matched on, and a checksum over both (nothing else covers them).
inline constexpr uint32_t kDedupRefPayloadSize = 32;
struct DedupRef {
  uint32_t source_object_id = 0;
  uint64_t source_offset = 0;
  Hash128 content;  // XXH3-128 of the bytes, the key the writer matched on
};
void EncodeDedupRef(const DedupRef& ref, uint8_t out[kDedupRefPayloadSize]);
Status DecodeDedupRef(const uint8_t in[kDedupRefPayloadSize], DedupRef* ref);

// A stored stream's id: SHA-256 over its header, index and totals
// (FORMAT.md 4.12). What a BASE frame names its base by.
using StreamId = Sha256Digest;

// BASE payload (FORMAT.md 4.9): which stream an incremental stream is built on.
inline constexpr uint32_t kBaseDescriptorFixedSize = 56;
inline constexpr size_t kMaxBaseLocationBytes = 4096;
inline constexpr uint32_t kMaxBaseChain = 8;  // streams from an incremental one to its first full base
struct BaseDescriptor {
  StreamId base_id{};
  uint64_t base_bytes = 0;      // the base's size
  uint64_t base_raw_bytes = 0;  // its STREAM_END raw_bytes
  uint32_t chain_length = 1;    // 1: the base has no base
  std::string location;         // where the writer found it; a hint only
  bool operator==(const BaseDescriptor&) const = default;
};
Result<std::vector<uint8_t>> EncodeBaseDescriptor(const BaseDescriptor& base);
Status DecodeBaseDescriptor(std::span<const uint8_t> payload, BaseDescriptor* base);

// A chunk of the base, as BASE_REF and BASE_DELTA name it (FORMAT.md 4.10):
// the payload of a BASE_REF, the head of a BASE_DELTA's.
inline constexpr uint32_t kBaseChunkRefSize = 48;
struct BaseChunkRef {
  uint32_t base_object_id = 0;
  uint64_t base_offset = 0;
  Sha256Digest base_sha256{};  // of the base chunk's decoded bytes
  bool operator==(const BaseChunkRef&) const = default;
};
void EncodeBaseChunkRef(const BaseChunkRef& ref, uint8_t out[kBaseChunkRefSize]);
Status DecodeBaseChunkRef(const uint8_t in[kBaseChunkRefSize], BaseChunkRef* ref);

// DIGEST_BLOCK entries (FORMAT.md 4.12): one SHA-256 per INDEX_BLOCK record.
inline constexpr uint32_t kDigestEntrySize = 32;

// Frame flags. Every bit not defined here is reserved and must be zero.
inline constexpr uint32_t kFlagSkippable = 1u << 0;  // a reader may skip this frame if it does not know its kind
inline constexpr uint32_t kKnownFlags = kFlagSkippable;

struct StreamHeader {
  uint16_t version = kFormatVersion;
  uint32_t flags = 0;
  uint32_t chunk_size = 0;  // raw bytes per DATA frame the producer aimed for (informational)
  int8_t zstd_level = 0;    // the producer's default zstd level (informational)
  // Dedup streams: a DEDUP_REF names one of the last `dedup_window` DATA
  // frames (dedup_window.h). 0 only in dedup streams of earlier writers,
  // where it may name any earlier one; always 0 without kStreamFlagDedup.
  uint32_t dedup_window = 0;
  std::string producer;  // e.g. "vramflow 0.1.0", at most 32 bytes
};

struct FrameHeader {
  uint8_t kind = 0;
  uint8_t codec = 0;
  uint8_t transform = 0;
  uint32_t flags = 0;
  uint32_t object_id = 0;
  uint32_t payload_size = 0;
  uint64_t sequence = 0;
  uint64_t offset = 0;
  uint64_t raw_size = 0;
  uint64_t raw_hash = 0;
};

void EncodeStreamHeader(const StreamHeader& header, uint8_t out[kStreamHeaderSize]);
// Checks magic, version, checksum and reserved fields.
Status DecodeStreamHeader(const uint8_t in[kStreamHeaderSize], StreamHeader* header);

void EncodeFrameHeader(const FrameHeader& header, uint8_t out[kFrameHeaderSize]);
// Checks the header checksum and reserved fields only; meaning is checked by
// the StreamValidator.
Status DecodeFrameHeader(const uint8_t in[kFrameHeaderSize], FrameHeader* header);

// OBJECT_BEGIN payload: the object's name and small key/value attributes.
struct ObjectMetadata {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;
  const std::string* Find(const std::string& key) const;
};
Result<std::vector<uint8_t>> EncodeObjectMetadata(const ObjectMetadata& metadata);
Status DecodeObjectMetadata(std::span<const uint8_t> payload, ObjectMetadata* metadata);

// STREAM_END payload: totals that let a reader prove nothing went missing.
struct StreamTotals {
  uint64_t object_count = 0;
  uint64_t frame_count = 0;   // frames before the STREAM_END frame
  uint64_t raw_bytes = 0;     // sum of object sizes
  uint64_t stream_bytes = 0;  // bytes before the STREAM_END frame, stream header included
  bool operator==(const StreamTotals&) const = default;
};
void EncodeStreamTotals(const StreamTotals& totals, uint8_t out[kStreamEndPayloadSize]);
StreamTotals DecodeStreamTotals(const uint8_t in[kStreamEndPayloadSize]);

// The object digest carried by OBJECT_END: the wrapping sum, over the
// object's DATA and ZERO_RUN frames, of XXH3-64(offset, raw_size, raw_hash)
// (three little-endian u64). Order-independent, so frames may interleave.
uint64_t ObjectDigestTerm(uint64_t offset, uint64_t raw_size, uint64_t raw_hash);

}  // namespace vramflow
