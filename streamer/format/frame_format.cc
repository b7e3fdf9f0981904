// SPDX-License-Identifier: MIT
#include "streamer/format/frame_format.h"

#include <algorithm>
#include <cstring>

#include "common/endian.h"
#include "common/hash.h"

namespace vramflow {

std::string FrameKindName(uint8_t kind) {
  switch (static_cast<FrameKind>(kind)) {
    case FrameKind::kObjectBegin:
      return "OBJECT_BEGIN";
    case FrameKind::kData:
      return "DATA";
    case FrameKind::kZeroRun:
      return "ZERO_RUN";
    case FrameKind::kObjectEnd:
      return "OBJECT_END";
    case FrameKind::kStreamEnd:
      return "STREAM_END";
    case FrameKind::kDedupRef:
      return "DEDUP_REF";
    case FrameKind::kSeekIndex:
      return "SEEK_INDEX";
    case FrameKind::kIndexBlock:
      return "INDEX_BLOCK";
    case FrameKind::kBase:
      return "BASE";
    case FrameKind::kBaseRef:
      return "BASE_REF";
    case FrameKind::kBaseDelta:
      return "BASE_DELTA";
    case FrameKind::kDigestBlock:
      return "DIGEST_BLOCK";
  }
  return "kind#" + std::to_string(kind);
}

bool IsChunkKind(uint8_t kind) {
  switch (static_cast<FrameKind>(kind)) {
    case FrameKind::kData:
    case FrameKind::kZeroRun:
    case FrameKind::kDedupRef:
    case FrameKind::kBaseRef:
    case FrameKind::kBaseDelta:
      return true;
    default:
      return false;
  }
}

void EncodeStreamHeader(const StreamHeader& h, uint8_t out[kStreamHeaderSize]) {
  std::memset(out, 0, kStreamHeaderSize);
  std::memcpy(out, kStreamMagic.data(), kStreamMagic.size());
  StoreLE16(out + 8, h.version);
  StoreLE16(out + 10, static_cast<uint16_t>(kStreamHeaderSize));
  StoreLE32(out + 12, h.flags);
  StoreLE32(out + 16, h.chunk_size);
  out[20] = static_cast<uint8_t>(h.zstd_level);
  std::memcpy(out + 24, h.producer.data(), std::min(h.producer.size(), kProducerBytes));
  StoreLE32(out + 56, h.dedup_window);
  StoreLE32(out + 60, HeaderChecksum(out, 60));
}

Status DecodeStreamHeader(const uint8_t in[kStreamHeaderSize], StreamHeader* h) {
  if (std::memcmp(in, kStreamMagic.data(), kStreamMagic.size()) != 0)
    return Status::Corruption("bad magic: not a vramflow chunk stream");
  h->version = LoadLE16(in + 8);
  if (h->version != kFormatVersion)
    return Status::NotSupported("unknown format version " + std::to_string(h->version) + " (this build reads version " +
                                std::to_string(kFormatVersion) + ")");
  uint32_t stored = LoadLE32(in + 60);
  uint32_t computed = HeaderChecksum(in, 60);
  if (stored != computed) return Status::Corruption("stream header checksum mismatch");
  if (LoadLE16(in + 10) != kStreamHeaderSize)
    return Status::Corruption("stream header size " + std::to_string(LoadLE16(in + 10)) + " is not 64");
  h->flags = LoadLE32(in + 12);
  if (h->flags & ~kKnownStreamFlags)
    return Status::NotSupported("stream header has unknown flags " + std::to_string(h->flags));
  if ((h->flags & kStreamFlagIndexBlocks) && !(h->flags & kStreamFlagSeekIndex))
    return Status::Corruption("stream header announces index blocks without a seek index");
  h->chunk_size = LoadLE32(in + 16);
  h->zstd_level = static_cast<int8_t>(in[20]);
  if (in[21] || in[22] || in[23]) return Status::Corruption("stream header reserved bytes are not zero");
  h->dedup_window = LoadLE32(in + 56);
  if (h->dedup_window != 0 && !(h->flags & kStreamFlagDedup))
    return Status::Corruption("stream header declares a dedup window of " + std::to_string(h->dedup_window) +
                              " DATA frames without the dedup flag");
  if (h->dedup_window > kMaxDedupWindow)
    return Status::Corruption("stream header declares a dedup window of " + std::to_string(h->dedup_window) +
                              " DATA frames, more than the format's limit of " + std::to_string(kMaxDedupWindow));
  const char* producer = reinterpret_cast<const char*>(in + 24);
  h->producer.assign(producer, strnlen(producer, kProducerBytes));
  return Status::Ok();
}

void EncodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]) {
  out[0] = h.kind;
  out[1] = h.codec;
  out[2] = h.transform;
  out[3] = 0;
  StoreLE32(out + 4, h.flags);
  StoreLE32(out + 8, h.object_id);
  StoreLE32(out + 12, h.payload_size);
  StoreLE64(out + 16, h.sequence);
  StoreLE64(out + 24, h.offset);
  StoreLE64(out + 32, h.raw_size);
  StoreLE64(out + 40, h.raw_hash);
  StoreLE64(out + 48, 0);
  StoreLE32(out + 56, 0);
  StoreLE32(out + 60, HeaderChecksum(out, 60));
}

Status DecodeFrameHeader(const uint8_t in[kFrameHeaderSize], FrameHeader* h) {
  uint32_t stored = LoadLE32(in + 60);
  uint32_t computed = HeaderChecksum(in, 60);
  if (stored != computed)
    return Status::Corruption("frame header checksum mismatch (stored " + std::to_string(stored) + ", computed " +
                              std::to_string(computed) + ")");
  h->kind = in[0];
  h->codec = in[1];
  h->transform = in[2];
  h->flags = LoadLE32(in + 4);
  h->object_id = LoadLE32(in + 8);
  h->payload_size = LoadLE32(in + 12);
  h->sequence = LoadLE64(in + 16);
  h->offset = LoadLE64(in + 24);
  h->raw_size = LoadLE64(in + 32);
  h->raw_hash = LoadLE64(in + 40);
  if (in[3] || LoadLE64(in + 48) || LoadLE32(in + 56))
    return Status::Corruption("frame header reserved bytes are not zero");
  if (h->flags & ~kKnownFlags) return Status::Corruption("frame header has reserved flag bits set");
  return Status::Ok();
}

const std::string* ObjectMetadata::Find(const std::string& key) const {
  for (const auto& [k, v] : attributes)
    if (k == key) return &v;
  return nullptr;
}

namespace {

void PutString(std::vector<uint8_t>& out, const std::string& s) {
  uint8_t len[2];
  StoreLE16(len, static_cast<uint16_t>(s.size()));
  out.insert(out.end(), len, len + 2);
  out.insert(out.end(), s.begin(), s.end());
}

// Reads a u16-length-prefixed string at *pos.
bool GetString(std::span<const uint8_t> in, size_t* pos, std::string* s) {
  if (in.size() - *pos < 2) return false;
  size_t len = LoadLE16(in.data() + *pos);
  *pos += 2;
  if (in.size() - *pos < len) return false;
  s->assign(reinterpret_cast<const char*>(in.data() + *pos), len);
  *pos += len;
  return true;
}

}  // namespace

Result<std::vector<uint8_t>> EncodeObjectMetadata(const ObjectMetadata& m) {
  if (m.name.empty() || m.name.size() > kMaxObjectNameBytes)
    return Status::InvalidArgument("object name must be 1.." + std::to_string(kMaxObjectNameBytes) + " bytes");
  if (m.name.find('\0') != std::string::npos) return Status::InvalidArgument("object name contains a NUL byte");
  if (m.attributes.size() > 0xffff) return Status::InvalidArgument("too many object attributes");
  std::vector<uint8_t> out;
  PutString(out, m.name);
  uint8_t count[2];
  StoreLE16(count, static_cast<uint16_t>(m.attributes.size()));
  out.insert(out.end(), count, count + 2);
  for (const auto& [k, v] : m.attributes) {
    if (k.size() > 0xffff || v.size() > 0xffff) return Status::InvalidArgument("object attribute too long");
    PutString(out, k);
    PutString(out, v);
  }
  if (out.size() > kMaxMetadataSize)
    return Status::InvalidArgument("object metadata is " + std::to_string(out.size()) + " bytes, limit " +
                                   std::to_string(kMaxMetadataSize));
  return out;
}

Status DecodeObjectMetadata(std::span<const uint8_t> in, ObjectMetadata* m) {
  size_t pos = 0;
  *m = ObjectMetadata{};
  if (!GetString(in, &pos, &m->name)) return Status::Corruption("object metadata: name runs past the payload");
  if (m->name.empty() || m->name.size() > kMaxObjectNameBytes)
    return Status::Corruption("object metadata: name length " + std::to_string(m->name.size()) + " is out of range");
  if (m->name.find('\0') != std::string::npos) return Status::Corruption("object metadata: name contains a NUL byte");
  if (in.size() - pos < 2) return Status::Corruption("object metadata: attribute count runs past the payload");
  size_t count = LoadLE16(in.data() + pos);
  pos += 2;
  for (size_t i = 0; i < count; ++i) {
    std::string k, v;
    if (!GetString(in, &pos, &k) || !GetString(in, &pos, &v))
      return Status::Corruption("object metadata: attribute " + std::to_string(i) + " runs past the payload");
    m->attributes.emplace_back(std::move(k), std::move(v));
  }
  if (pos != in.size())
    return Status::Corruption("object metadata: " + std::to_string(in.size() - pos) + " unexplained trailing bytes");
  return Status::Ok();
}

namespace {
// Low 32 bits of XXH3-64 over the payload with its checksum field zeroed.
uint32_t DedupRefChecksum(const uint8_t in[kDedupRefPayloadSize]) {
  uint8_t copy[kDedupRefPayloadSize];
  std::memcpy(copy, in, sizeof(copy));
  StoreLE32(copy + 4, 0);
  return HeaderChecksum(copy, sizeof(copy));
}
}  // namespace

void EncodeDedupRef(const DedupRef& ref, uint8_t out[kDedupRefPayloadSize]) {
  StoreLE32(out, ref.source_object_id);
  StoreLE32(out + 4, 0);
  StoreLE64(out + 8, ref.source_offset);
  StoreLE64(out + 16, ref.content.low);
  StoreLE64(out + 24, ref.content.high);
  StoreLE32(out + 4, DedupRefChecksum(out));
}

Status DecodeDedupRef(const uint8_t in[kDedupRefPayloadSize], DedupRef* ref) {
  ref->source_object_id = LoadLE32(in);
  if (LoadLE32(in + 4) != DedupRefChecksum(in)) return Status::Corruption("DEDUP_REF payload checksum mismatch");
  ref->source_offset = LoadLE64(in + 8);
  ref->content = Hash128{LoadLE64(in + 16), LoadLE64(in + 24)};
  return Status::Ok();
}

Result<std::vector<uint8_t>> EncodeBaseDescriptor(const BaseDescriptor& base) {
  if (base.location.size() > kMaxBaseLocationBytes || base.location.find('\0') != std::string::npos)
    return Status::InvalidArgument("base location is longer than " + std::to_string(kMaxBaseLocationBytes) +
                                   " bytes or holds a NUL byte");
  if (base.chain_length == 0 || base.chain_length > kMaxBaseChain)
    return Status::InvalidArgument("a base chain of " + std::to_string(base.chain_length) + " streams (at most " +
                                   std::to_string(kMaxBaseChain) + ")");
  std::vector<uint8_t> out(kBaseDescriptorFixedSize + base.location.size(), 0);
  std::memcpy(out.data(), base.base_id.data(), base.base_id.size());
  StoreLE64(out.data() + 32, base.base_bytes);
  StoreLE64(out.data() + 40, base.base_raw_bytes);
  StoreLE32(out.data() + 48, base.chain_length);
  StoreLE16(out.data() + 52, static_cast<uint16_t>(base.location.size()));
  std::memcpy(out.data() + kBaseDescriptorFixedSize, base.location.data(), base.location.size());
  return out;
}

Status DecodeBaseDescriptor(std::span<const uint8_t> in, BaseDescriptor* base) {
  if (in.size() < kBaseDescriptorFixedSize)
    return Status::Corruption("BASE payload of " + std::to_string(in.size()) + " bytes is shorter than " +
                              std::to_string(kBaseDescriptorFixedSize));
  std::memcpy(base->base_id.data(), in.data(), base->base_id.size());
  base->base_bytes = LoadLE64(in.data() + 32);
  base->base_raw_bytes = LoadLE64(in.data() + 40);
  base->chain_length = LoadLE32(in.data() + 48);
  const uint16_t location_length = LoadLE16(in.data() + 52);
  if (LoadLE16(in.data() + 54) != 0) return Status::Corruption("BASE payload reserved bytes are not zero");
  if (base->chain_length == 0 || base->chain_length > kMaxBaseChain)
    return Status::Corruption("BASE frame declares a base chain of " + std::to_string(base->chain_length) +
                              " streams; the format allows 1 to " + std::to_string(kMaxBaseChain));
  if (location_length > kMaxBaseLocationBytes || in.size() != kBaseDescriptorFixedSize + location_length)
    return Status::Corruption("BASE payload of " + std::to_string(in.size()) + " bytes does not fit its location of " +
                              std::to_string(location_length) + " bytes");
  base->location.assign(reinterpret_cast<const char*>(in.data()) + kBaseDescriptorFixedSize, location_length);
  if (base->location.find('\0') != std::string::npos) return Status::Corruption("BASE location holds a NUL byte");
  return Status::Ok();
}

namespace {
uint32_t BaseChunkRefChecksum(const uint8_t in[kBaseChunkRefSize]) {
  uint8_t copy[kBaseChunkRefSize];
  std::memcpy(copy, in, sizeof(copy));
  StoreLE32(copy + 4, 0);
  return HeaderChecksum(copy, sizeof(copy));
}
}  // namespace

void EncodeBaseChunkRef(const BaseChunkRef& ref, uint8_t out[kBaseChunkRefSize]) {
  StoreLE32(out, ref.base_object_id);
  StoreLE32(out + 4, 0);
  StoreLE64(out + 8, ref.base_offset);
  std::memcpy(out + 16, ref.base_sha256.data(), ref.base_sha256.size());
  StoreLE32(out + 4, BaseChunkRefChecksum(out));
}

Status DecodeBaseChunkRef(const uint8_t in[kBaseChunkRefSize], BaseChunkRef* ref) {
  if (LoadLE32(in + 4) != BaseChunkRefChecksum(in)) return Status::Corruption("base chunk reference checksum mismatch");
  ref->base_object_id = LoadLE32(in);
  ref->base_offset = LoadLE64(in + 8);
  std::memcpy(ref->base_sha256.data(), in + 16, ref->base_sha256.size());
  if (ref->base_object_id == 0) return Status::Corruption("base chunk reference names object 0");
  return Status::Ok();
}

void EncodeStreamTotals(const StreamTotals& t, uint8_t out[kStreamEndPayloadSize]) {
  StoreLE64(out, t.object_count);
  StoreLE64(out + 8, t.frame_count);
  StoreLE64(out + 16, t.raw_bytes);
  StoreLE64(out + 24, t.stream_bytes);
}

StreamTotals DecodeStreamTotals(const uint8_t in[kStreamEndPayloadSize]) {
  return StreamTotals{LoadLE64(in), LoadLE64(in + 8), LoadLE64(in + 16), LoadLE64(in + 24)};
}

uint64_t ObjectDigestTerm(uint64_t offset, uint64_t raw_size, uint64_t raw_hash) {
  uint8_t buf[24];
  StoreLE64(buf, offset);
  StoreLE64(buf + 8, raw_size);
  StoreLE64(buf + 16, raw_hash);
  return Hash64(buf, sizeof(buf));
}

}  // namespace vramflow
