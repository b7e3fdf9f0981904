// SPDX-License-Identifier: MIT
#include "streamer/format/seek_index.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "common/hash.h"
#include "common/printable.h"
#include "common/units.h"
#include "streamer/format/base_stream.h"
#include "streamer/format/digest_block.h"
#include "transport/core/range_reader.h"

namespace vramflow {
namespace {

// Byte layout (FORMAT.md 4.7).
constexpr uint32_t kIndexVersion = 2;
constexpr size_t kIndexHeaderBytes = 16;
constexpr size_t kObjectRecordBytes = 56;
constexpr size_t kChunkRecordBytes = kChunkRecordSize;
constexpr size_t kBlockRefBytes = 16;
constexpr size_t kFooterBytes = 16;
constexpr std::array<uint8_t, 8> kFooterMagic = {'V', 'F', 'S', 'I', 'N', 'D', 'E', 'X'};
// How much of a stream's tail ReadSeekIndex fetches first: STREAM_END, the
// footer and, for most streams, the whole index in one read.
constexpr uint64_t kTailGuess = 256u << 10;
// Bytes of INDEX_BLOCKs (and their DIGEST_BLOCKs) read ahead at once.
constexpr uint64_t kBlockReadBudget = 4u << 20;
// What checking the index takes per chunk record while it is checked
// (CheckIndex's extent of the frame, and a DATA frame's offset for the
// dedup window), besides the record itself.
constexpr uint64_t kCheckBytesPerChunk = 32;

void Put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void Put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void PutChunk(std::vector<uint8_t>& out, const SeekIndexChunk& c) {
  Put64(out, c.stream_offset);
  Put64(out, c.object_offset);
  Put64(out, c.raw_size);
  Put32(out, c.payload_size);
  Put32(out, static_cast<uint8_t>(c.kind));  // kind, then three reserved zero bytes
  Put32(out, c.source_object_id);
  Put32(out, 0);
  Put64(out, c.source_offset);
}

std::string ObjectName(const SeekIndexObject& o) {
  return "object " + std::to_string(o.id) + " " + Printable(o.metadata.name);
}

std::string ChunkName(const SeekIndexObject& o, const SeekIndexChunk& c) {
  return ObjectName(o) + ", " + FrameKindName(static_cast<uint8_t>(c.kind)) + " at object offset " +
         std::to_string(c.object_offset) + " (stream offset " + std::to_string(c.stream_offset) + ")";
}

// The rules of FORMAT.md 4.7 that a chunk record must follow on its own.
Status CheckChunk(const SeekIndexChunk& c) {
  if (c.raw_size == 0) return Status::Corruption("zero length");
  switch (c.kind) {
    case FrameKind::kData:
      if (c.raw_size > kMaxChunkSize) return Status::Corruption("larger than the chunk limit");
      if (c.payload_size > c.raw_size) return Status::Corruption("payload larger than the raw bytes");
      break;
    case FrameKind::kZeroRun:
      if (c.payload_size != 0) return Status::Corruption("ZERO_RUN with a payload");
      break;
    case FrameKind::kDedupRef:
      if (c.raw_size > kMaxChunkSize) return Status::Corruption("larger than the chunk limit");
      if (c.payload_size != kDedupRefPayloadSize) return Status::Corruption("DEDUP_REF payload is not 32 bytes");
      if (c.source_object_id == 0) return Status::Corruption("DEDUP_REF without a source object");
      return Status::Ok();
    case FrameKind::kBaseRef:
      if (c.raw_size > kMaxChunkSize) return Status::Corruption("larger than the chunk limit");
      if (c.payload_size != kBaseChunkRefSize) return Status::Corruption("BASE_REF payload is not 48 bytes");
      if (c.source_object_id == 0) return Status::Corruption("BASE_REF without a base object");
      return Status::Ok();
    case FrameKind::kBaseDelta:
      if (c.raw_size > kMaxChunkSize) return Status::Corruption("larger than the chunk limit");
      if (c.payload_size <= kBaseChunkRefSize || c.payload_size - kBaseChunkRefSize > c.raw_size)
        return Status::Corruption("BASE_DELTA payload is not 49 .. 48 + raw_size bytes");
      if (c.source_object_id == 0) return Status::Corruption("BASE_DELTA without a base object");
      return Status::Ok();
    default:
      return Status::Corruption("kind " + FrameKindName(static_cast<uint8_t>(c.kind)) + " is not a chunk");
  }
  if (c.source_object_id != 0 || c.source_offset != 0)
    return Status::Corruption("source fields set on a frame that names no other chunk");
  return Status::Ok();
}

// Sorts an object's chunks by object offset, keeping equal offsets in
// stream order, and its digests (one per chunk, if given) with them.
void SortByObjectOffset(std::vector<SeekIndexChunk>* chunks, std::vector<Sha256Digest>* digests) {
  const auto by_offset = [](const SeekIndexChunk& a, const SeekIndexChunk& b) {
    return a.object_offset < b.object_offset;
  };
  if (std::is_sorted(chunks->begin(), chunks->end(), by_offset)) return;  // as writers write them: no copies
  std::vector<size_t> order(chunks->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return (*chunks)[a].object_offset < (*chunks)[b].object_offset; });
  std::vector<SeekIndexChunk> sorted_chunks(order.size());
  for (size_t i = 0; i < order.size(); ++i) sorted_chunks[i] = (*chunks)[order[i]];
  *chunks = std::move(sorted_chunks);
  if (!digests) return;
  std::vector<Sha256Digest> sorted_digests(order.size());
  for (size_t i = 0; i < order.size(); ++i) sorted_digests[i] = (*digests)[order[i]];
  *digests = std::move(sorted_digests);
}

// A frame's bytes in the stream, for CheckIndex.
struct Extent {
  uint64_t begin, end;
  const SeekIndexObject* object;
};

// CheckIndex for one object's entry: its fields, its INDEX_BLOCKs inside its
// frames, its chunks covering it exactly. Adds the extents of its frames.
Status CheckObjectEntry(const SeekIndexObject& o, std::vector<Extent>* extents) {
  if (o.size > kMaxObjectSize)
    return Status::Corruption("seek index: " + ObjectName(o) + " is larger than the format allows");
  if (o.begin_payload_size == 0 || o.begin_payload_size > kMaxMetadataSize)
    return Status::Corruption("seek index: " + ObjectName(o) + " has a metadata size out of range");
  // Offsets stay far from 2^64, so the sums below cannot wrap.
  constexpr uint64_t kMaxOffset = uint64_t{1} << 62;
  if (o.begin_offset < kStreamHeaderSize || o.end_offset <= o.begin_offset || o.end_offset > kMaxOffset)
    return Status::Corruption("seek index: " + ObjectName(o) + " begins at " + std::to_string(o.begin_offset) +
                              " and ends at " + std::to_string(o.end_offset));
  extents->push_back({o.begin_offset, o.begin_offset + kFrameHeaderSize + o.begin_payload_size, &o});
  extents->push_back({o.end_offset, o.end_offset + kFrameHeaderSize, &o});
  for (const IndexBlockRef& b : o.blocks) {
    if (b.stream_offset <= o.begin_offset || b.stream_offset >= o.end_offset)
      return Status::Corruption("seek index: an INDEX_BLOCK of " + ObjectName(o) + " at stream offset " +
                                std::to_string(b.stream_offset) + " lies outside its object's frames");
    extents->push_back({b.stream_offset, b.stream_offset + b.frame_bytes(), &o});
  }
  uint64_t covered = 0;
  for (const SeekIndexChunk& c : o.chunks) {
    Status s = CheckChunk(c);
    if (!s.ok()) return s.WithContext("seek index: " + ChunkName(o, c));
    if (c.object_offset != covered)
      return Status::Corruption("seek index: " + ChunkName(o, c) + " does not start where the previous chunk ended (" +
                                std::to_string(covered) + ")");
    if (c.raw_size > o.size - covered)
      return Status::Corruption("seek index: " + ChunkName(o, c) + " runs past the object size " +
                                std::to_string(o.size));
    covered += c.raw_size;
    if (c.stream_offset <= o.begin_offset || c.stream_offset >= o.end_offset)
      return Status::Corruption("seek index: " + ChunkName(o, c) + " lies outside its object's frames");
    extents->push_back({c.stream_offset, c.stream_offset + c.frame_bytes(), &o});
  }
  if (covered != o.size)
    return Status::Corruption("seek index: the chunks of " + ObjectName(o) + " cover " + std::to_string(covered) +
                              " of " + std::to_string(o.size) + " bytes");
  return Status::Ok();
}

// CheckIndex for DEDUP_REFs: each names an earlier DATA frame of its size,
// within the stream's dedup window (0: any earlier one).
Status CheckDedupSources(const SeekIndex& index, uint32_t dedup_window) {
  std::vector<uint64_t> data_offsets;  // of every DATA frame, in stream order; only to check a window
  if (dedup_window != 0) {
    for (const SeekIndexObject& o : index.objects)
      for (const SeekIndexChunk& c : o.chunks)
        if (c.kind == FrameKind::kData) data_offsets.push_back(c.stream_offset);
    std::sort(data_offsets.begin(), data_offsets.end());
  }
  auto data_frames_before = [&](uint64_t stream_offset) {
    return static_cast<uint64_t>(std::lower_bound(data_offsets.begin(), data_offsets.end(), stream_offset) -
                                 data_offsets.begin());
  };
  for (const SeekIndexObject& o : index.objects) {
    for (const SeekIndexChunk& c : o.chunks) {
      if (c.kind != FrameKind::kDedupRef) continue;
      const SeekIndexChunk* source = index.FindData(c.source_object_id, c.source_offset);
      if (!source || source->raw_size != c.raw_size || source->stream_offset >= c.stream_offset)
        return Status::Corruption("seek index: " + ChunkName(o, c) + " names object " +
                                  std::to_string(c.source_object_id) + " offset " + std::to_string(c.source_offset) +
                                  ", where no earlier DATA frame of " + std::to_string(c.raw_size) + " bytes is");
      if (dedup_window == 0) continue;  // an earlier writer's stream: any earlier DATA frame
      const uint64_t back = data_frames_before(c.stream_offset) - data_frames_before(source->stream_offset);
      if (back > dedup_window)
        return Status::Corruption(
            "seek index: " + ChunkName(o, c) + " names the DATA frame of object " + std::to_string(c.source_object_id) +
            " offset " + std::to_string(c.source_offset) + ", " + std::to_string(back) +
            " DATA frames back, outside the stream's dedup window of " + std::to_string(dedup_window));
    }
  }
  return Status::Ok();
}

// Checks the index as a whole: each object covered exactly by its chunks,
// every frame inside the stream before `limit` and none overlapping another,
// DEDUP_REF sources naming earlier DATA frames of the same size, within the
// stream's dedup window (0: any earlier one).
Status CheckIndex(const SeekIndex& index, uint64_t limit, uint32_t dedup_window) {
  std::vector<Extent> extents;
  size_t frames = 0;
  for (const SeekIndexObject& o : index.objects) frames += 2 + o.blocks.size() + o.chunks.size();
  extents.reserve(frames);  // charged by ReadSeekIndex (kCheckBytesPerChunk)
  std::unordered_set<uint32_t> ids;
  for (const SeekIndexObject& o : index.objects) {
    if (o.id == 0) return Status::Corruption("seek index: object id 0");
    if (!ids.insert(o.id).second) return Status::Corruption("seek index: " + ObjectName(o) + " listed twice");
    VF_RETURN_IF_ERROR(CheckObjectEntry(o, &extents));
  }
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < extents.size(); ++i) {
    if (extents[i].end > limit)
      return Status::Corruption("seek index: a frame of " + ObjectName(*extents[i].object) + " at stream offset " +
                                std::to_string(extents[i].begin) + " runs past the index itself (" +
                                std::to_string(limit) + ")");
    if (i > 0 && extents[i].begin < extents[i - 1].end)
      return Status::Corruption("seek index: frames at stream offsets " + std::to_string(extents[i - 1].begin) +
                                " and " + std::to_string(extents[i].begin) + " overlap");
  }
  return CheckDedupSources(index, dedup_window);
}

}  // namespace

const SeekIndexObject* SeekIndex::Find(uint32_t id) const {
  for (const SeekIndexObject& o : objects)
    if (o.id == id) return &o;
  return nullptr;
}

const SeekIndexChunk* SeekIndex::FindData(uint32_t object_id, uint64_t offset) const {
  const SeekIndexObject* o = Find(object_id);
  if (!o) return nullptr;
  auto it = std::lower_bound(o->chunks.begin(), o->chunks.end(), offset,
                             [](const SeekIndexChunk& c, uint64_t off) { return c.object_offset < off; });
  if (it == o->chunks.end() || it->object_offset != offset || it->kind != FrameKind::kData) return nullptr;
  return &*it;
}

Result<std::vector<uint8_t>> EncodeSeekIndex(const SeekIndex& index) {
  std::vector<uint8_t> out;
  uint64_t chunk_count = 0;
  for (const SeekIndexObject& o : index.objects) chunk_count += o.chunk_count;
  if (index.objects.size() > UINT32_MAX) return Status::InvalidArgument("too many objects for a seek index");
  Put32(out, kIndexVersion);
  Put32(out, static_cast<uint32_t>(index.objects.size()));
  Put64(out, chunk_count);
  for (const SeekIndexObject& o : index.objects) {
    VF_ASSIGN_OR_RETURN(std::vector<uint8_t> metadata, EncodeObjectMetadata(o.metadata));
    if (metadata.size() != o.begin_payload_size)
      return Status::Internal("seek index: the metadata of " + ObjectName(o) + " encodes to " +
                              std::to_string(metadata.size()) + " bytes, its OBJECT_BEGIN has " +
                              std::to_string(o.begin_payload_size));
    Put32(out, o.id);
    Put32(out, o.begin_payload_size);
    Put64(out, o.size);
    Put64(out, o.digest);
    Put64(out, o.begin_offset);
    Put64(out, o.end_offset);
    Put64(out, o.chunk_count);
    Put64(out, o.blocks.size());
    out.insert(out.end(), metadata.begin(), metadata.end());
    for (const IndexBlockRef& b : o.blocks) {
      Put64(out, b.stream_offset);
      Put32(out, b.chunk_count);
      Put32(out, 0);
    }
  }
  uint64_t total = out.size() + kFooterBytes;
  if (total > UINT32_MAX) return Status::InvalidArgument("seek index larger than a frame payload can be");
  Put64(out, total);
  out.insert(out.end(), kFooterMagic.begin(), kFooterMagic.end());
  return out;
}

Result<SeekIndex> DecodeSeekIndex(std::span<const uint8_t> p) {
  if (p.size() < kIndexHeaderBytes + kFooterBytes)
    return Status::Corruption("seek index of " + std::to_string(p.size()) + " bytes is too short");
  const uint8_t* footer = p.data() + p.size() - kFooterBytes;
  if (std::memcmp(footer + 8, kFooterMagic.data(), kFooterMagic.size()) != 0)
    return Status::Corruption("seek index footer magic is wrong");
  if (Get64(footer) != p.size())
    return Status::Corruption("seek index footer gives " + std::to_string(Get64(footer)) + " bytes, the payload has " +
                              std::to_string(p.size()));
  if (Get32(p.data()) != kIndexVersion)
    return Status::NotSupported("seek index version " + std::to_string(Get32(p.data())) + " (this vramflow reads 2)");
  const uint32_t object_count = Get32(p.data() + 4);
  const uint64_t chunk_count = Get64(p.data() + 8);
  size_t pos = kIndexHeaderBytes;
  const size_t end = p.size() - kFooterBytes;
  // Every count is checked against the bytes left before anything is sized by it.
  if (object_count > (end - pos) / kObjectRecordBytes)
    return Status::Corruption("seek index lists " + std::to_string(object_count) + " objects in " +
                              std::to_string(p.size()) + " bytes");
  SeekIndex index;
  index.objects.reserve(object_count);
  std::unordered_set<uint32_t> seen;  // object ids
  uint64_t chunks_seen = 0;
  for (uint32_t i = 0; i < object_count; ++i) {
    if (end - pos < kObjectRecordBytes)
      return Status::Corruption("seek index ends inside object record " + std::to_string(i));
    const uint8_t* r = p.data() + pos;
    SeekIndexObject o;
    o.id = Get32(r);
    o.begin_payload_size = Get32(r + 4);
    o.size = Get64(r + 8);
    o.digest = Get64(r + 16);
    o.begin_offset = Get64(r + 24);
    o.end_offset = Get64(r + 32);
    o.chunk_count = Get64(r + 40);
    const uint64_t blocks = Get64(r + 48);
    pos += kObjectRecordBytes;
    if (o.id == 0) return Status::Corruption("seek index: object id 0");
    if (!seen.insert(o.id).second) return Status::Corruption("seek index: " + ObjectName(o) + " listed twice");
    if (o.begin_payload_size == 0 || o.begin_payload_size > kMaxMetadataSize || o.begin_payload_size > end - pos)
      return Status::Corruption("seek index: the metadata of object record " + std::to_string(i) +
                                " is empty, too large or runs past the end");
    Status s = DecodeObjectMetadata(p.subspan(pos, o.begin_payload_size), &o.metadata);
    if (!s.ok()) return s.WithContext("seek index, object " + std::to_string(o.id));
    pos += o.begin_payload_size;
    if (blocks > (end - pos) / kBlockRefBytes)
      return Status::Corruption("seek index: " + ObjectName(o) + " lists " + std::to_string(blocks) +
                                " blocks, more than the bytes left hold");
    o.blocks.resize(blocks);
    uint64_t listed = 0;
    for (IndexBlockRef& b : o.blocks) {
      const uint8_t* q = p.data() + pos;
      b.stream_offset = Get64(q);
      b.chunk_count = Get32(q + 8);
      if (Get32(q + 12) != 0)
        return Status::Corruption("seek index: reserved bytes set in a block of " + ObjectName(o));
      if (b.chunk_count == 0 || b.chunk_count > kMaxUnlistedChunks)
        return Status::Corruption("seek index: a block of " + ObjectName(o) + " lists " +
                                  std::to_string(b.chunk_count) + " chunks (1.." + std::to_string(kMaxUnlistedChunks) +
                                  " allowed)");
      listed += b.chunk_count;
      pos += kBlockRefBytes;
    }
    if (listed != o.chunk_count)
      return Status::Corruption("seek index: the blocks of " + ObjectName(o) + " list " + std::to_string(listed) +
                                " chunks, its entry says " + std::to_string(o.chunk_count));
    chunks_seen += o.chunk_count;
    index.objects.push_back(std::move(o));
  }
  if (pos != end)
    return Status::Corruption("seek index has " + std::to_string(end - pos) + " bytes after its last object");
  if (chunks_seen != chunk_count)
    return Status::Corruption("seek index announces " + std::to_string(chunk_count) + " chunks and lists " +
                              std::to_string(chunks_seen));
  return index;
}

std::vector<uint8_t> EncodeIndexBlock(std::span<const SeekIndexChunk> chunks) {
  std::vector<uint8_t> out;
  out.reserve(chunks.size() * kChunkRecordBytes);
  for (const SeekIndexChunk& c : chunks) PutChunk(out, c);
  return out;
}

Result<std::vector<SeekIndexChunk>> DecodeIndexBlock(std::span<const uint8_t> p) {
  if (p.empty() || p.size() % kChunkRecordBytes != 0 || p.size() / kChunkRecordBytes > kMaxUnlistedChunks)
    return Status::Corruption("INDEX_BLOCK payload of " + std::to_string(p.size()) + " bytes is not 1.." +
                              std::to_string(kMaxUnlistedChunks) + " records of " + std::to_string(kChunkRecordBytes));
  std::vector<SeekIndexChunk> chunks(p.size() / kChunkRecordBytes);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const uint8_t* q = p.data() + i * kChunkRecordBytes;
    SeekIndexChunk& c = chunks[i];
    c.stream_offset = Get64(q);
    c.object_offset = Get64(q + 8);
    c.raw_size = Get64(q + 16);
    c.payload_size = Get32(q + 24);
    c.kind = static_cast<FrameKind>(q[28]);
    if (q[29] || q[30] || q[31] || Get32(q + 36) != 0)
      return Status::Corruption("INDEX_BLOCK record " + std::to_string(i) + ": reserved bytes set");
    c.source_object_id = Get32(q + 32);
    c.source_offset = Get64(q + 40);
    Status s = CheckChunk(c);
    if (!s.ok())
      return s.WithContext("INDEX_BLOCK record " + std::to_string(i) + " (object offset " +
                           std::to_string(c.object_offset) + ")");
  }
  return chunks;
}

void SeekIndexBuilder::ObjectBegin(uint32_t id, const ObjectMetadata& metadata, uint64_t stream_offset,
                                   uint32_t payload_size) {
  open_[id].position = objects_.size();
  SeekIndexObject& o = objects_.emplace_back();
  o.id = id;
  o.metadata = metadata;
  o.begin_offset = stream_offset;
  o.begin_payload_size = payload_size;
}

void SeekIndexBuilder::Chunk(uint32_t object_id, const SeekIndexChunk& chunk) {
  auto it = open_.find(object_id);
  if (it == open_.end()) return;
  it->second.unlisted.push_back(chunk);
  ++unlisted_;
}

uint32_t SeekIndexBuilder::FullestObject() const {
  uint32_t fullest = 0;
  size_t most = 0;
  for (const auto& [id, open] : open_) {
    if (open.unlisted.size() > most) {
      most = open.unlisted.size();
      fullest = id;
    }
  }
  return fullest;
}

std::span<const SeekIndexChunk> SeekIndexBuilder::Unlisted(uint32_t object_id) const {
  auto it = open_.find(object_id);
  if (it == open_.end()) return {};
  return it->second.unlisted;
}

void SeekIndexBuilder::BlockWritten(uint32_t object_id, uint64_t stream_offset) {
  auto it = open_.find(object_id);
  if (it == open_.end() || it->second.unlisted.empty()) return;
  std::vector<SeekIndexChunk>& unlisted = it->second.unlisted;
  SeekIndexObject& o = objects_[it->second.position];
  o.blocks.push_back({stream_offset, static_cast<uint32_t>(unlisted.size())});
  o.chunk_count += unlisted.size();
  unlisted_ -= unlisted.size();
  unlisted.clear();
}

void SeekIndexBuilder::ObjectEnd(uint32_t id, uint64_t size, uint64_t digest, uint64_t stream_offset) {
  auto it = open_.find(id);
  if (it == open_.end()) return;
  SeekIndexObject& o = objects_[it->second.position];
  o.size = size;
  o.digest = digest;
  o.end_offset = stream_offset;
  unlisted_ -= it->second.unlisted.size();
  open_.erase(it);
}

namespace {

// STREAM_END: its frame header and totals, the last bytes of every stream.
constexpr uint64_t kStreamEndBytes = kFrameHeaderSize + kStreamEndPayloadSize;

// One ReadSeekIndex, step by step: the tail and the stream header, STREAM_END,
// the SEEK_INDEX frame, where its INDEX_BLOCKs lie, the blocks themselves,
// and the checks of the whole. Holds what was read and what holding the
// index costs so far (`held_`, against options.max_bytes).
class SeekIndexReading {
 public:
  SeekIndexReading(RandomAccessSource& source, const SeekIndexReadOptions& options)
      : source_(source), options_(options), size_(source.Size()) {
    result_.stream_size = size_;
  }
  Result<StoredStreamIndex> Run();

 private:
  // Reads exactly `length` bytes at `offset`, counting them.
  Status Read(uint64_t offset, uint64_t length, std::vector<uint8_t>* out);
  std::string Where(uint64_t offset) const { return source_.Describe() + ", stream offset " + std::to_string(offset); }
  Status TooLarge(uint64_t bytes, const std::string& what) const {
    return Status::NotSupported(source_.Describe() + ": its seek index (" + what + ") would take " + FormatSize(bytes) +
                                ", more than the " + FormatSize(options_.max_bytes) +
                                " its reader may hold (a share of --max-memory)");
  }
  // The STREAM_END frame, inside the tail read.
  const uint8_t* StreamEnd() const { return tail_.data() + (end_offset_ - tail_offset_); }
  Status ReadTailAndHeader();
  Status ReadStreamEnd();
  // The footer before STREAM_END, then the SEEK_INDEX frame it sizes.
  Status ReadIndexFrame();
  std::span<const uint8_t> IndexPayload() const { return std::span<const uint8_t>(frame_).subspan(kFrameHeaderSize); }
  // The stream id's first parts: the header, the base's id, the SEEK_INDEX payload.
  Status HashHeadAndIndex();
  // Charges the blocks' records and checks that the blocks lie apart.
  Status CheckBlockPlaces();
  // What a block takes to read: its frame and, for digests, the room its
  // DIGEST_BLOCK would take after it.
  uint64_t BlockReadBytes(const IndexBlockRef& b) const;
  Status ReadBlocks();
  Status ReadBlock(SeekIndexObject& o, const IndexBlockRef& b, ByteSource& blocks, std::vector<Sha256Digest>* digests);
  Status CheckTotals() const;

  RandomAccessSource& source_;
  const SeekIndexReadOptions& options_;
  const uint64_t size_;
  StoredStreamIndex result_;
  uint64_t tail_offset_ = 0;
  std::vector<uint8_t> tail_;   // the stream from tail_offset_ to its end
  std::vector<uint8_t> head_;   // the stream header
  std::vector<uint8_t> frame_;  // the SEEK_INDEX frame
  uint64_t end_offset_ = 0;     // STREAM_END's
  uint64_t held_ = 0;
  Sha256Hasher id_;
  std::vector<uint8_t> block_;  // the block read last
  bool first_block_ = true;
};

Status SeekIndexReading::Read(uint64_t offset, uint64_t length, std::vector<uint8_t>* out) {
  out->resize(length);
  VF_ASSIGN_OR_RETURN(size_t n, source_.ReadAt(offset, *out));
  result_.bytes_read += n;
  if (n != length)
    return Status::Truncated(source_.Describe() + ": " + std::to_string(length) + " bytes at offset " +
                             std::to_string(offset) + " ran past the end");
  return Status::Ok();
}

Status SeekIndexReading::ReadTailAndHeader() {
  // The tail first: with a small index, one read gets all of it.
  tail_offset_ = size_ - std::min(size_, kTailGuess);
  VF_RETURN_IF_ERROR(Read(tail_offset_, size_ - tail_offset_, &tail_));
  if (tail_offset_ == 0) {
    head_.assign(tail_.begin(), tail_.begin() + kStreamHeaderSize);
  } else {
    VF_RETURN_IF_ERROR(Read(0, kStreamHeaderSize, &head_));
  }
  VF_RETURN_IF_ERROR(DecodeStreamHeader(head_.data(), &result_.header).WithContext(source_.Describe()));
  if (!(result_.header.flags & kStreamFlagSeekIndex))
    return Status::NotSupported(source_.Describe() +
                                " has no seek index (it was written to a pipe or socket, or "
                                "by an older vramflow)");
  if (!(result_.header.flags & kStreamFlagIndexBlocks))
    return Status::NotSupported(source_.Describe() +
                                " has a version 1 seek index, written by a vramflow before index "
                                "blocks, which this one does not use");
  return Status::Ok();
}

Status SeekIndexReading::ReadStreamEnd() {
  // STREAM_END: the last 96 bytes.
  end_offset_ = size_ - kStreamEndBytes;
  const uint8_t* end = StreamEnd();
  FrameHeader eh;
  Status end_status = DecodeFrameHeader(end, &eh);
  if (!end_status.ok())
    return Status::Corruption(Where(end_offset_) + ": the last 96 bytes are not a STREAM_END frame (" +
                              end_status.ToString() + "): the stream is incomplete or has bytes appended");
  if (eh.kind != static_cast<uint8_t>(FrameKind::kStreamEnd) || eh.payload_size != kStreamEndPayloadSize)
    return Status::Corruption(Where(end_offset_) + ": the stream does not end with a STREAM_END frame (found " +
                              FrameKindName(eh.kind) + "): it is incomplete or has bytes appended");
  if (Hash64(end + kFrameHeaderSize, kStreamEndPayloadSize) != eh.raw_hash)
    return Status::Corruption(Where(end_offset_) + ": STREAM_END payload hash mismatch");
  result_.totals = DecodeStreamTotals(end + kFrameHeaderSize);
  if (result_.totals.stream_bytes != end_offset_)
    return Status::Corruption(Where(end_offset_) + ": STREAM_END says it is at offset " +
                              std::to_string(result_.totals.stream_bytes));
  return Status::Ok();
}

Status SeekIndexReading::ReadIndexFrame() {
  // The index footer ends where STREAM_END begins and gives the payload size.
  if (end_offset_ < kStreamHeaderSize + kFrameHeaderSize + kIndexHeaderBytes + kFooterBytes)
    return Status::Corruption(Where(end_offset_) + ": no room for a seek index before STREAM_END");
  const uint8_t* footer = StreamEnd() - kFooterBytes;
  if (std::memcmp(footer + 8, kFooterMagic.data(), kFooterMagic.size()) != 0)
    return Status::Corruption(Where(end_offset_ - kFooterBytes) +
                              ": the stream announces a seek index but none ends before STREAM_END");
  const uint64_t payload_size = Get64(footer);
  if (payload_size < kIndexHeaderBytes + kFooterBytes || payload_size > UINT32_MAX ||
      payload_size + kFrameHeaderSize > end_offset_ - kStreamHeaderSize)
    return Status::Corruption(Where(end_offset_ - kFooterBytes) + ": seek index size " + std::to_string(payload_size) +
                              " does not fit the stream");
  // What holding the index costs, checked before anything is read: the
  // payload, and its decoded objects at most as much again.
  held_ = 2 * (kFrameHeaderSize + payload_size);
  if (held_ > options_.max_bytes) return TooLarge(held_, "the SEEK_INDEX frame");
  const uint64_t at = end_offset_ - payload_size - kFrameHeaderSize;
  result_.index_offset = at;
  if (at >= tail_offset_) {
    const uint8_t* p = tail_.data() + (at - tail_offset_);
    frame_.assign(p, p + kFrameHeaderSize + payload_size);
  } else {
    VF_RETURN_IF_ERROR(Read(at, kFrameHeaderSize + payload_size, &frame_));
  }
  FrameHeader ih;
  VF_RETURN_IF_ERROR(DecodeFrameHeader(frame_.data(), &ih).WithContext(Where(at)));
  if (ih.kind != static_cast<uint8_t>(FrameKind::kSeekIndex) || ih.payload_size != payload_size || ih.flags != 0 ||
      ih.object_id != 0 || ih.offset != 0 || ih.raw_size != 0 || ih.codec != 0 || ih.transform != 0)
    return Status::Corruption(Where(at) + ": expected the SEEK_INDEX frame, found " + FrameKindName(ih.kind));
  if (ih.sequence + 1 != result_.totals.frame_count)
    return Status::Corruption(Where(at) + ": SEEK_INDEX is frame " + std::to_string(ih.sequence) +
                              ", but STREAM_END counts " + std::to_string(result_.totals.frame_count) + " frames");
  std::span<const uint8_t> payload = IndexPayload();
  if (Hash64(payload.data(), payload.size()) != ih.raw_hash)
    return Status::Corruption(Where(at) + ": SEEK_INDEX payload hash mismatch");
  Result<SeekIndex> index = DecodeSeekIndex(payload);
  if (!index.ok()) return index.status().WithContext(Where(at));
  result_.index = std::move(*index);
  return Status::Ok();
}

Status SeekIndexReading::HashHeadAndIndex() {
  // The stream id covers what is read here (FORMAT.md 4.12): the header,
  // an incremental stream's base id, the SEEK_INDEX payload, the INDEX_BLOCK
  // payloads in index order, STREAM_END. With the base's id in it, streams
  // alike but for their base have ids of their own, so equal ids along a
  // chain of bases mean the same stream.
  id_.Update(head_);
  if (result_.header.flags & kStreamFlagBase) {
    VF_ASSIGN_OR_RETURN(BaseDescriptor base, ReadBaseFrame(source_, source_.Describe()));
    result_.bytes_read += kFrameHeaderSize + kBaseDescriptorFixedSize + base.location.size();
    id_.Update(base.base_id.data(), base.base_id.size());
  }
  id_.Update(IndexPayload());
  return Status::Ok();
}

Status SeekIndexReading::CheckBlockPlaces() {
  // The chunk records, from the INDEX_BLOCK frames the index names. The
  // blocks are checked to lie apart inside the stream first, so what is read
  // (and held) is bounded by the stream's size.
  const uint64_t index_offset = result_.index_offset;
  std::vector<std::pair<uint64_t, uint64_t>> block_extents;
  for (const SeekIndexObject& o : result_.index.objects) {
    for (const IndexBlockRef& b : o.blocks) {
      held_ += uint64_t{b.chunk_count} *
                   (sizeof(SeekIndexChunk) + kCheckBytesPerChunk + (options_.digests ? sizeof(Sha256Digest) : 0)) +
               sizeof(b);
      if (held_ > options_.max_bytes) return TooLarge(held_, "with the chunk records of its INDEX_BLOCK frames");
      if (b.stream_offset < kStreamHeaderSize || b.stream_offset > index_offset ||
          b.frame_bytes() > index_offset - b.stream_offset)
        return Status::Corruption(Where(index_offset) + ": the seek index names an INDEX_BLOCK of " + ObjectName(o) +
                                  " at stream offset " + std::to_string(b.stream_offset) +
                                  ", outside the frames before it");
      block_extents.emplace_back(b.stream_offset, b.stream_offset + b.frame_bytes());
    }
  }
  std::sort(block_extents.begin(), block_extents.end());
  for (size_t i = 1; i < block_extents.size(); ++i)
    if (block_extents[i].first < block_extents[i - 1].second)
      return Status::Corruption(Where(index_offset) +
                                ": the seek index names INDEX_BLOCK frames at stream "
                                "offsets " +
                                std::to_string(block_extents[i - 1].first) + " and " +
                                std::to_string(block_extents[i].first) + ", which overlap");
  return Status::Ok();
}

uint64_t SeekIndexReading::BlockReadBytes(const IndexBlockRef& b) const {
  const uint64_t block_end = b.stream_offset + b.frame_bytes();
  return b.frame_bytes() +
         (options_.digests ? DigestBlockReadBytes(block_end, b.chunk_count, result_.index_offset) : 0);
}

Status SeekIndexReading::ReadBlocks() {
  // A block inside the tail read is taken from it; the others are read in
  // index order, several at once where the source asks for it, so that on S3
  // a large index costs one round trip per `concurrency` blocks.
  std::vector<ByteRange> outside_tail;
  for (const SeekIndexObject& o : result_.index.objects)
    for (const IndexBlockRef& b : o.blocks)
      if (b.stream_offset < tail_offset_) outside_tail.push_back({b.stream_offset, BlockReadBytes(b)});
  RangeReaderOptions fetch;
  fetch.memory_budget = kBlockReadBudget;
  fetch.request_size = kBlockReadBudget;
  fetch.concurrency = options_.concurrency ? options_.concurrency : source_.ConcurrentReads();
  std::unique_ptr<ByteSource> blocks =
      NewRangeReader(std::shared_ptr<RandomAccessSource>(std::shared_ptr<void>(), &source_), outside_tail, fetch);

  std::vector<std::vector<Sha256Digest>> all_digests;
  for (SeekIndexObject& o : result_.index.objects) {
    std::vector<Sha256Digest> digests;  // in stream order, as o.chunks before sorting
    // Sized once, from the counts charged above (the blocks' counts add up
    // to it, DecodeSeekIndex checked): no vector grows past them.
    o.chunks.reserve(o.chunk_count);
    if (options_.digests) digests.reserve(o.chunk_count);
    for (const IndexBlockRef& b : o.blocks) VF_RETURN_IF_ERROR(ReadBlock(o, b, *blocks, &digests));
    SortByObjectOffset(&o.chunks, digests.empty() ? nullptr : &digests);
    all_digests.push_back(std::move(digests));
  }
  if (result_.has_digests) result_.digests = std::move(all_digests);
  return Status::Ok();
}

// One INDEX_BLOCK (and with digests its DIGEST_BLOCK): checked, hashed into
// the stream id, its records added to the object's chunks.
Status SeekIndexReading::ReadBlock(SeekIndexObject& o, const IndexBlockRef& b, ByteSource& blocks,
                                   std::vector<Sha256Digest>* digests) {
  const uint64_t length = BlockReadBytes(b);
  if (b.stream_offset >= tail_offset_) {
    const uint8_t* p = tail_.data() + (b.stream_offset - tail_offset_);
    block_.assign(p, p + length);
  } else {
    block_.resize(length);
    VF_ASSIGN_OR_RETURN(size_t n, ReadFully(blocks, block_));
    result_.bytes_read += n;
    if (n != length) return Status::Internal(Where(b.stream_offset) + ": the block reader ended early");
  }
  FrameHeader bh;
  VF_RETURN_IF_ERROR(DecodeFrameHeader(block_.data(), &bh).WithContext(Where(b.stream_offset)));
  if (bh.kind != static_cast<uint8_t>(FrameKind::kIndexBlock) || bh.object_id != o.id ||
      bh.payload_size != b.frame_bytes() - kFrameHeaderSize || bh.flags != 0 || bh.offset != 0 || bh.raw_size != 0 ||
      bh.codec != 0 || bh.transform != 0)
    return Status::Corruption(Where(b.stream_offset) + ": expected an INDEX_BLOCK of " + ObjectName(o) + " with " +
                              std::to_string(b.chunk_count) + " records, found " + FrameKindName(bh.kind) +
                              " of object " + std::to_string(bh.object_id) + " with a payload of " +
                              std::to_string(bh.payload_size) + " bytes");
  std::span<const uint8_t> records(block_.data() + kFrameHeaderSize, bh.payload_size);
  if (Hash64(records.data(), records.size()) != bh.raw_hash)
    return Status::Corruption(Where(b.stream_offset) + ": INDEX_BLOCK payload hash mismatch");
  id_.Update(records);
  Result<std::vector<SeekIndexChunk>> chunks = DecodeIndexBlock(records);
  if (!chunks.ok()) return chunks.status().WithContext(Where(b.stream_offset));
  o.chunks.insert(o.chunks.end(), chunks->begin(), chunks->end());
  if (!options_.digests) return Status::Ok();

  const uint64_t block_end = b.stream_offset + b.frame_bytes();
  VF_ASSIGN_OR_RETURN(bool has, TakeDigestBlock(std::span<const uint8_t>(block_).subspan(b.frame_bytes()), bh, *chunks,
                                                Where(block_end), digests));
  if (first_block_) {
    result_.has_digests = has;
    first_block_ = false;
  } else if (has != result_.has_digests) {
    return Status::Corruption(
        Where(block_end) + ": " +
        (has ? "a DIGEST_BLOCK follows this INDEX_BLOCK but not the first one"
             : "no DIGEST_BLOCK follows the INDEX_BLOCK of " + ObjectName(o) + ", though the first one has one"));
  }
  return Status::Ok();
}

Status SeekIndexReading::CheckTotals() const {
  uint64_t raw_bytes = 0;
  for (const SeekIndexObject& o : result_.index.objects) raw_bytes += o.size;
  if (result_.index.objects.size() != result_.totals.object_count || raw_bytes != result_.totals.raw_bytes)
    return Status::Corruption(
        Where(result_.index_offset) + ": the seek index lists " + std::to_string(result_.index.objects.size()) +
        " objects of " + std::to_string(raw_bytes) + " bytes, STREAM_END counts " +
        std::to_string(result_.totals.object_count) + " of " + std::to_string(result_.totals.raw_bytes));
  return Status::Ok();
}

Result<StoredStreamIndex> SeekIndexReading::Run() {
  if (size_ < kStreamHeaderSize + kStreamEndBytes)
    return Status::Truncated(source_.Describe() + " is " + std::to_string(size_) +
                             " bytes, too short for a chunk stream");
  VF_RETURN_IF_ERROR(ReadTailAndHeader());
  VF_RETURN_IF_ERROR(ReadStreamEnd());
  VF_RETURN_IF_ERROR(ReadIndexFrame());
  VF_RETURN_IF_ERROR(HashHeadAndIndex());
  VF_RETURN_IF_ERROR(CheckBlockPlaces());
  VF_RETURN_IF_ERROR(ReadBlocks());
  id_.Update(StreamEnd() + kFrameHeaderSize, kStreamEndPayloadSize);
  result_.id = id_.Final();
  VF_RETURN_IF_ERROR(CheckIndex(result_.index, result_.index_offset, result_.header.dedup_window)
                         .WithContext(Where(result_.index_offset)));
  VF_RETURN_IF_ERROR(CheckTotals());
  return std::move(result_);
}

}  // namespace

Result<StoredStreamIndex> ReadSeekIndex(RandomAccessSource& source, const SeekIndexReadOptions& options) {
  SeekIndexReading reading(source, options);
  return reading.Run();
}

}  // namespace vramflow
