// SPDX-License-Identifier: MIT
#include "streamer/format/base_stream.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "common/printable.h"
#include "streamer/format/base_location.h"
#include "streamer/format/base_match.h"

namespace vramflow {
namespace {

// A base's location as messages show it: a BASE frame's bytes (another
// machine's, a sender's) with their control bytes escaped.
std::string Shown(const std::string& location) { return EscapedText(location); }

// A stream opened as a candidate base: its index, with its id and digests.
struct Probed {
  std::string location;
  std::shared_ptr<RandomAccessSource> source;
  StoredStreamIndex stored;
};

Result<Probed> Probe(const std::string& location, const BaseOpenOptions& options, uint64_t max_index_bytes) {
  if (!options.open) return Status::InvalidArgument("no way to open the base " + Shown(location));
  Probed p;
  p.location = location;
  VF_ASSIGN_OR_RETURN(p.source, options.open(location));
  // A stream without index blocks has no id and cannot be read by chunk:
  // say that, rather than ReadSeekIndex's "falls back to reading in order".
  uint8_t head[kStreamHeaderSize];
  VF_RETURN_IF_ERROR(ReadExactly(*p.source, 0, head).WithContext("base " + Shown(location)));
  StreamHeader header;
  VF_RETURN_IF_ERROR(DecodeStreamHeader(head, &header).WithContext("base " + Shown(location)));
  if ((header.flags & (kStreamFlagSeekIndex | kStreamFlagIndexBlocks)) !=
      (kStreamFlagSeekIndex | kStreamFlagIndexBlocks))
    return Status::InvalidArgument("wrong base: " + Shown(location) +
                                   " has no index blocks (it was written to a pipe or socket, or by an older "
                                   "vramflow), so it cannot be a base; only a stored stream with an index can");
  Result<StoredStreamIndex> stored =
      ReadSeekIndex(*p.source, SeekIndexReadOptions{.max_bytes = max_index_bytes, .digests = true});
  if (!stored.ok()) return stored.status().WithContext("base " + Shown(location));
  p.stored = std::move(*stored);
  return p;
}

}  // namespace

Result<BaseDescriptor> ReadBaseFrame(RandomAccessSource& source, const std::string& location) {
  auto where = [&] { return location + ", stream offset " + std::to_string(kStreamHeaderSize); };
  uint8_t raw[kFrameHeaderSize];
  VF_RETURN_IF_ERROR(ReadExactly(source, kStreamHeaderSize, raw).WithContext(where()));
  FrameHeader h;
  VF_RETURN_IF_ERROR(DecodeFrameHeader(raw, &h).WithContext(where()));
  if (h.kind != static_cast<uint8_t>(FrameKind::kBase) || h.sequence != 0 || h.flags != 0 || h.codec != 0 ||
      h.transform != 0 || h.object_id != 0 || h.offset != 0 || h.raw_size != 0 ||
      h.payload_size < kBaseDescriptorFixedSize || h.payload_size > kBaseDescriptorFixedSize + kMaxBaseLocationBytes)
    return Status::Corruption(where() + ": the stream has the base flag but its first frame is " +
                              FrameKindName(h.kind) + ", not a BASE frame");
  std::vector<uint8_t> payload(h.payload_size);
  VF_RETURN_IF_ERROR(ReadExactly(source, kStreamHeaderSize + kFrameHeaderSize, payload).WithContext(where()));
  if (Hash64(payload.data(), payload.size()) != h.raw_hash)
    return Status::Corruption(where() + ": BASE payload hash mismatch");
  BaseDescriptor d;
  VF_RETURN_IF_ERROR(DecodeBaseDescriptor(payload, &d).WithContext(where()));
  return d;
}

namespace {

class BaseStreamImpl final : public BaseStream {
 public:
  BaseStreamImpl(Probed probed, uint32_t level)
      : location_(std::move(probed.location)),
        source_(std::move(probed.source)),
        stored_(std::move(probed.stored)),
        level_(level),
        matcher_(stored_.index) {
    for (size_t i = 0; i < stored_.index.objects.size(); ++i) positions_.emplace(stored_.index.objects[i].id, i);
  }

  void SetNext(BaseDescriptor own_base, std::shared_ptr<const BaseStreamImpl> next) {
    own_base_ = std::move(own_base);
    next_ = std::move(next);
  }

  const StreamId& id() const override { return stored_.id; }
  BaseDescriptor DescriptorForDependent() const override {
    BaseDescriptor d;
    d.base_id = stored_.id;
    d.base_bytes = stored_.stream_size;
    d.base_raw_bytes = stored_.totals.raw_bytes;
    d.chain_length = (next_ ? own_base_.chain_length : 0) + 1;
    d.location = location_;
    return d;
  }
  const StoredStreamIndex& index() const override { return stored_; }
  bool has_digests() const override { return stored_.has_digests; }

  const SeekIndexObject* Match(const ObjectMetadata& metadata, uint64_t size,
                               std::optional<uint32_t> gpu_ordinal) const override {
    return matcher_.Match(metadata, size, gpu_ordinal);
  }

  const SeekIndexChunk* ChunkAt(uint32_t object_id, uint64_t offset, uint64_t size) const override {
    size_t object = 0, chunk = 0;
    if (!Locate(object_id, offset, &object, &chunk)) return nullptr;
    const SeekIndexChunk& c = stored_.index.objects[object].chunks[chunk];
    if (c.raw_size != size || c.kind == FrameKind::kZeroRun) return nullptr;
    return &c;
  }

  std::optional<Sha256Digest> StoredDigest(uint32_t object_id, uint64_t offset) const override {
    size_t object = 0, chunk = 0;
    if (!stored_.has_digests || !Locate(object_id, offset, &object, &chunk)) return std::nullopt;
    return stored_.digests[object][chunk];
  }

  Status ReadChunk(uint32_t object_id, uint64_t offset, std::span<uint8_t> out, BaseScratch& scratch,
                   const Sha256Digest* sha256) const override {
    Status s = ReadChunkHere(object_id, offset, out, scratch);
    if (s.ok() && sha256 && Sha256(out.data(), out.size()) != *sha256)
      s = Status::Corruption("its bytes do not hash to the SHA-256 the reference names (" + HexDigest(*sha256) +
                             "): the base is not the one the stream was built on, or it is damaged");
    if (!s.ok()) return s.WithContext(Describe(object_id, offset));
    return s;
  }

  uint64_t memory_bytes() const override {
    uint64_t bytes = sizeof(*this) + positions_.size() * 32;
    for (const SeekIndexObject& o : stored_.index.objects) {
      bytes += sizeof(o) + o.metadata.name.size() + o.chunks.size() * sizeof(SeekIndexChunk) +
               o.blocks.size() * sizeof(IndexBlockRef) +
               (stored_.has_digests ? o.chunks.size() * sizeof(Sha256Digest) : 0);
      for (const auto& [k, v] : o.metadata.attributes) bytes += k.size() + v.size() + 64;
    }
    return bytes + (next_ ? next_->memory_bytes() : 0);
  }
  unsigned concurrent_reads() const override {
    return std::max(source_->ConcurrentReads(), next_ ? next_->concurrent_reads() : 1u);
  }

  uint32_t level() const { return level_; }

 private:
  bool Locate(uint32_t object_id, uint64_t offset, size_t* object, size_t* chunk) const {
    auto it = positions_.find(object_id);
    if (it == positions_.end()) return false;
    const std::vector<SeekIndexChunk>& chunks = stored_.index.objects[it->second].chunks;
    auto c = std::lower_bound(chunks.begin(), chunks.end(), offset,
                              [](const SeekIndexChunk& x, uint64_t o) { return x.object_offset < o; });
    if (c == chunks.end() || c->object_offset != offset) return false;
    *object = it->second;
    *chunk = static_cast<size_t>(c - chunks.begin());
    return true;
  }

  std::string Describe(uint32_t object_id, uint64_t offset) const {
    // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive)
    // about a string literal + std::string here.
    std::string s = "base ";
    s += Shown(location_);
    s += ", object ";
    s += std::to_string(object_id);
    auto it = positions_.find(object_id);
    if (it != positions_.end()) {
      s += ' ';
      s += Printable(stored_.index.objects[it->second].metadata.name);
    }
    return s + ", offset " + std::to_string(offset);
  }

  // Reads the frame a chunk record names into the scratch of this level,
  // checking it against the record.
  Result<FrameHeader> ReadFrame(const SeekIndexChunk& c, uint32_t object_id, BaseScratch& scratch) const {
    std::vector<uint8_t>& frame = scratch.frames[level_];
    frame.resize(c.frame_bytes());
    VF_RETURN_IF_ERROR(ReadExactly(*source_, c.stream_offset, frame));
    FrameHeader h;
    VF_RETURN_IF_ERROR(
        DecodeFrameHeader(frame.data(), &h).WithContext("stream offset " + std::to_string(c.stream_offset)));
    const bool coded = c.kind == FrameKind::kData || c.kind == FrameKind::kBaseDelta;
    if (h.kind != static_cast<uint8_t>(c.kind) || h.object_id != object_id || h.offset != c.object_offset ||
        h.raw_size != c.raw_size || h.payload_size != c.payload_size || h.flags != 0 ||
        (!coded && (h.codec != 0 || h.transform != 0)))
      return Status::Corruption(
          "the frame at stream offset " + std::to_string(c.stream_offset) + " (" + FrameKindName(h.kind) +
          " of object " + std::to_string(h.object_id) + " at offset " + std::to_string(h.offset) + ", " +
          std::to_string(h.raw_size) + " bytes) is not the one its index lists (" +
          FrameKindName(static_cast<uint8_t>(c.kind)) + ", " + std::to_string(c.raw_size) + " bytes)");
    return h;
  }

  static Status CheckHash(std::span<const uint8_t> bytes, uint64_t raw_hash) {
    const uint64_t got = Hash64(bytes.data(), bytes.size());
    if (got != raw_hash)
      return Status::Corruption("payload hash mismatch: decoded bytes hash to " + HexHash(got) + ", frame says " +
                                HexHash(raw_hash));
    return Status::Ok();
  }

  Status ReadChunkHere(uint32_t object_id, uint64_t offset, std::span<uint8_t> out, BaseScratch& scratch) const {
    if (scratch.frames.size() <= level_) scratch.frames.resize(level_ + 1);
    if (scratch.decoded.size() <= level_) scratch.decoded.resize(level_ + 1);
    size_t object = 0, index = 0;
    if (!Locate(object_id, offset, &object, &index)) return Status::Corruption("the base has no chunk there");
    const SeekIndexChunk& c = stored_.index.objects[object].chunks[index];
    if (c.kind == FrameKind::kZeroRun || c.raw_size != out.size())
      return Status::Corruption("the base's chunk there is " + FrameKindName(static_cast<uint8_t>(c.kind)) + " of " +
                                std::to_string(c.raw_size) + " bytes, not a chunk of " + std::to_string(out.size()) +
                                " bytes that a reference may name");
    VF_ASSIGN_OR_RETURN(FrameHeader h, ReadFrame(c, object_id, scratch));
    std::span<const uint8_t> payload(scratch.frames[level_].data() + kFrameHeaderSize, h.payload_size);
    switch (c.kind) {
      case FrameKind::kData:
        VF_RETURN_IF_ERROR(
            scratch.decoder.Decode(static_cast<CodecId>(h.codec), static_cast<TransformId>(h.transform), payload, out));
        return CheckHash(out, h.raw_hash);
      case FrameKind::kDedupRef: {
        DedupRef ref;
        VF_RETURN_IF_ERROR(DecodeDedupRef(payload.data(), &ref));
        if (ref.source_object_id != c.source_object_id || ref.source_offset != c.source_offset)
          return Status::Corruption("the DEDUP_REF names another chunk than its index record");
        const SeekIndexChunk* source = stored_.index.FindData(ref.source_object_id, ref.source_offset);
        if (!source || source->raw_size != c.raw_size)
          return Status::Corruption("the DEDUP_REF names no DATA frame of its size");
        const uint64_t raw_hash = h.raw_hash;
        VF_RETURN_IF_ERROR(ReadChunkHere(ref.source_object_id, ref.source_offset, out, scratch)
                               .WithContext("the DATA frame its DEDUP_REF names"));
        return CheckHash(out, raw_hash);
      }
      case FrameKind::kBaseRef:
      case FrameKind::kBaseDelta: {
        BaseChunkRef ref;
        VF_RETURN_IF_ERROR(DecodeBaseChunkRef(payload.data(), &ref));
        if (ref.base_object_id != c.source_object_id || ref.base_offset != c.source_offset)
          return Status::Corruption("the " + FrameKindName(static_cast<uint8_t>(c.kind)) +
                                    " names another chunk than its index record");
        if (!next_) return Status::Internal("a base reference in a stream whose base is not open");
        const uint64_t raw_hash = h.raw_hash;
        if (c.kind == FrameKind::kBaseDelta) {
          scratch.decoded[level_].resize(c.raw_size);
          VF_RETURN_IF_ERROR(scratch.decoder.Decode(static_cast<CodecId>(h.codec),
                                                    static_cast<TransformId>(h.transform),
                                                    payload.subspan(kBaseChunkRefSize), scratch.decoded[level_]));
        }
        VF_RETURN_IF_ERROR(next_->ReadChunk(ref.base_object_id, ref.base_offset, out, scratch, &ref.base_sha256));
        if (c.kind == FrameKind::kBaseDelta) {
          const uint8_t* delta = scratch.decoded[level_].data();  // after the call: it may have grown the scratch
          for (size_t i = 0; i < out.size(); ++i) out[i] ^= delta[i];
        }
        return CheckHash(out, raw_hash);
      }
      default:
        return Status::Internal("unexpected chunk kind");
    }
  }

  std::string location_;
  std::shared_ptr<RandomAccessSource> source_;
  StoredStreamIndex stored_;
  uint32_t level_;
  BaseObjectMatcher matcher_;
  std::unordered_map<uint32_t, size_t> positions_;
  BaseDescriptor own_base_;
  std::shared_ptr<const BaseStreamImpl> next_;
};

// Opens a base and, level by level, the chain below it.
struct ChainOpener {
  const BaseOpenOptions& options;
  std::vector<Probed> named;      // the streams of more_locations, probed once
  std::vector<StreamId> visited;  // ids along the chain so far
  uint64_t index_bytes_left = 0;

  Result<Probed> ProbeCharged(const std::string& location) {
    VF_ASSIGN_OR_RETURN(Probed p, Probe(location, options, index_bytes_left));
    const uint64_t held = IndexBytes(p);
    index_bytes_left -= std::min(index_bytes_left, held);
    return p;
  }

  static uint64_t IndexBytes(const Probed& p) {
    uint64_t bytes = 0;
    for (const SeekIndexObject& o : p.stored.index.objects)
      bytes += sizeof(o) + o.metadata.name.size() + o.chunks.size() * sizeof(SeekIndexChunk) +
               o.blocks.size() * sizeof(IndexBlockRef) +
               (p.stored.has_digests ? o.chunks.size() * sizeof(Sha256Digest) : 0);
    return bytes;
  }

  static Status CheckExpected(const Probed& p, const BaseDescriptor& expected) {
    if (p.stored.id != expected.base_id)
      return Status::InvalidArgument("wrong base: the stream was built on " + HexDigest(expected.base_id) + ", " +
                                     Shown(p.location) + " is " + HexDigest(p.stored.id));
    if (p.stored.stream_size != expected.base_bytes || p.stored.totals.raw_bytes != expected.base_raw_bytes)
      return Status::InvalidArgument("wrong base: the stream was built on " + HexDigest(expected.base_id) + " of " +
                                     std::to_string(expected.base_bytes) + " bytes (" +
                                     std::to_string(expected.base_raw_bytes) + " raw), " + Shown(p.location) + " has " +
                                     std::to_string(p.stored.stream_size) + " (" +
                                     std::to_string(p.stored.totals.raw_bytes) + " raw)");
    return Status::Ok();
  }

  Result<std::shared_ptr<const BaseStreamImpl>> Open(Probed probed, const BaseDescriptor* expected, uint32_t level) {
    if (expected) VF_RETURN_IF_ERROR(CheckExpected(probed, *expected));
    // An id covers the stream's own base's id (FORMAT.md 4.12), so ids along
    // a chain form a hash chain: the same id met twice is the same stream met
    // twice, a loop, not two streams alike but for their bases.
    if (std::find(visited.begin(), visited.end(), probed.stored.id) != visited.end())
      return Status::InvalidArgument("wrong base: the chain of bases loops: " + Shown(probed.location) + " (" +
                                     HexDigest(probed.stored.id) + ") is a base of itself");
    if (level >= kMaxBaseChain)
      return Status::InvalidArgument("wrong base: the chain of bases is longer than " + std::to_string(kMaxBaseChain) +
                                     " streams at " + Shown(probed.location));
    visited.push_back(probed.stored.id);
    const bool incremental = (probed.stored.header.flags & kStreamFlagBase) != 0;
    const std::string location = probed.location;
    std::shared_ptr<RandomAccessSource> source = probed.source;
    auto base = std::make_shared<BaseStreamImpl>(std::move(probed), level);
    if (!incremental) return std::shared_ptr<const BaseStreamImpl>(base);

    VF_ASSIGN_OR_RETURN(BaseDescriptor own, ReadBaseFrame(*source, "base " + Shown(location)));
    Probed next;
    bool found = false;
    for (Probed& p : named) {
      if (p.source && p.stored.id == own.base_id) {
        next = std::move(p);  // each named stream serves one link
        p = Probed{};
        found = true;
        break;
      }
    }
    if (!found) {
      const std::string known = options.locate ? options.locate(own.base_id) : std::string();
      if (known.empty() && own.location.empty())
        return Status::NotFound("base " + Shown(location) + " is incremental: it needs its base " +
                                HexDigest(own.base_id) + ", whose location it does not record; give it with --base");
      const std::string next_location = known.empty() ? ResolveBaseLocation(own.location, location) : known;
      Result<Probed> probed_next = ProbeCharged(next_location);
      if (!probed_next.ok()) {
        const Status& s = probed_next.status();
        const std::string what =
            "base " + Shown(location) + " is built on " + HexDigest(own.base_id) + " (" + Shown(next_location) + ")";
        if (s.code() == Status::Code::kIoError || s.code() == Status::Code::kNotFound)
          return Status::NotFound(what + ", which cannot be opened (" + s.ToString() + "); give it with --base");
        return s.WithContext(what);
      }
      next = std::move(*probed_next);
    }
    VF_ASSIGN_OR_RETURN(std::shared_ptr<const BaseStreamImpl> below, Open(std::move(next), &own, level + 1));
    const uint32_t below_chain = below->DescriptorForDependent().chain_length;
    if (below_chain != own.chain_length)
      return Status::InvalidArgument("wrong base: " + Shown(location) + " says its base chain is " +
                                     std::to_string(own.chain_length) + " streams long, but it is " +
                                     std::to_string(below_chain));
    base->SetNext(std::move(own), std::move(below));
    return std::shared_ptr<const BaseStreamImpl>(base);
  }
};

}  // namespace

Result<std::shared_ptr<const BaseStream>> OpenBaseStream(const std::string& location, const BaseOpenOptions& options,
                                                         const BaseDescriptor* expected) {
  ChainOpener opener{options, {}, {}, options.max_index_bytes};
  for (const std::string& more : options.more_locations) {
    VF_ASSIGN_OR_RETURN(Probed p, opener.ProbeCharged(more));
    opener.named.push_back(std::move(p));
  }
  VF_ASSIGN_OR_RETURN(Probed top, opener.ProbeCharged(location));
  VF_ASSIGN_OR_RETURN(std::shared_ptr<const BaseStreamImpl> base, opener.Open(std::move(top), expected, 0));
  return std::shared_ptr<const BaseStream>(std::move(base));
}

}  // namespace vramflow
