// SPDX-License-Identifier: MIT
// libFuzzer target: untrusted bytes through the chunk-stream reader and the
// decoders behind it.
//
// An input that starts with the stream magic is read as a stream:
//   1. as it is, through ReadStream with decoding on (what `verify` and
//      `unpack` do);
//   2. "repaired": header checksums, metadata/STREAM_END hashes, DATA hashes
//      (where the payload decodes), object digests and stream totals are
//      recomputed, so that mutations of header fields and payloads get past
//      the checksums and reach the validator, the decoders and the visitor.
//      The repaired copy is read with decoding on, from a source that
//      copies and from one that reads in place as a mapped file does, and
//      decoding ahead on two threads (the verdicts must agree), and with
//      decoding off and short reads plus ReadPlaneTable (what `inspect`
//      does);
//   3. every frame payload goes through DecodeObjectMetadata and through
//      ChunkDecoder::Decode under every codec/transform pair the validator
//      accepts, with the frame's raw size.
// Any other input is split as: byte 0 picks codec and transform, bytes 1..3
// give the raw size, the rest is the payload for ChunkDecoder::Decode; the
// whole input also goes through DecodeObjectMetadata.
//
// With VRAMFLOW_FUZZ_WRITE_SEEDS=DIR in the environment the binary writes a
// few seed streams that the CLI cannot make (DEDUP_REF frames, interleaved
// objects) into DIR and exits; scripts/fuzz_corpus.sh uses it.
//
// Besides sanitizer findings, the target aborts when the reader breaks one
// of its own promises (a stream reported complete without OnStreamEnd,
// decoded data of the wrong size, a verdict that changes with decoding, ...).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include <fstream>
#include <string>

#include "codecs/bit_planes.h"
#include "codecs/chunk_codec.h"
#include "common/endian.h"
#include "common/hash.h"
#include "common/safe_path.h"
#include "datagen/model_data.h"
#include "streamer/decode_ahead.h"
#include "streamer/format/frame_format.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/poisoning_source.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

// Largest raw size the slice decoding (step 3) and the repair try; the reader
// itself allows up to kMaxChunkSize.
constexpr uint64_t kSliceMaxRaw = 1u << 20;

[[noreturn]] void Broken(const char* what, const Status& status = Status::Ok()) {
  std::fprintf(stderr, "stream_reader_fuzz: broken promise: %s (%s)\n", what, status.ToString().c_str());
  std::abort();
}
#define FUZZ_CHECK(cond, ...)                              \
  do {                                                     \
    if (!(cond)) Broken(#cond __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)

// Reads every byte, so the sanitizers see any out-of-bounds span.
volatile uint64_t g_sink;
void Touch(std::span<const uint8_t> bytes) {
  uint64_t sum = 0;
  for (uint8_t b : bytes) sum += b;
  g_sink = g_sink + sum;
}
void Touch(const std::string& s) {
  Touch(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

struct Combo {
  CodecId codec;
  TransformId transform;
};
// Every codec/transform pair the validator lets through to the decoder.
constexpr Combo kCombos[] = {
    {CodecId::kRaw, TransformId::kNone},
    {CodecId::kLz4, TransformId::kNone},
    {CodecId::kZstd, TransformId::kNone},
    {CodecId::kHuffman, TransformId::kNone},
    {CodecId::kBitPack, TransformId::kNone},
    {CodecId::kPlanar, TransformId::kByteGroup2},
    {CodecId::kPlanar, TransformId::kByteGroup4},
    {CodecId::kPlanar, static_cast<TransformId>(0x21)},
    {CodecId::kPlanar, static_cast<TransformId>(0x23)},
    {CodecId::kPlanar, static_cast<TransformId>(0x27)},
    {CodecId::kPlanar, static_cast<TransformId>(0x41)},
    {CodecId::kPlanar, static_cast<TransformId>(0x44)},
    {CodecId::kPlanar, static_cast<TransformId>(0x47)},
    {CodecId::kPlanar, TransformId::kSignPlanes1},
};

// Decodes and cross-checks one payload; returns the decode status.
Status DecodeOne(ChunkDecoder& decoder, Combo combo, std::span<const uint8_t> payload, uint64_t raw_size,
                 std::vector<uint8_t>& out) {
  out.assign(raw_size, 0xA5);
  Status s = decoder.Decode(combo.codec, combo.transform, payload, out);
  if (combo.transform != TransformId::kNone) {
    std::vector<PlaneInfo> planes;
    Status table = ReadPlaneTable(combo.transform, payload, raw_size, &planes);
    if (s.ok()) FUZZ_CHECK(table.ok(), table);  // "fails on a malformed table exactly as Decode() would"
    if (table.ok()) FUZZ_CHECK(planes.size() == PlaneCount(combo.transform));
  }
  if (s.ok()) Touch(out);
  return s;
}

// What the visitor saw, checked against the reader's verdict.
class TouchVisitor final : public StreamVisitor {
 public:
  explicit TouchVisitor(bool decode) : decode_(decode) {}

  Status OnStreamHeader(const StreamHeader& h) override {
    FUZZ_CHECK(!header_seen_);
    header_seen_ = true;
    Touch(h.producer);
    return Status::Ok();
  }
  Status OnObjectBegin(const ObjectState& o) override {
    FUZZ_CHECK(header_seen_ && !end_seen_);
    FUZZ_CHECK(!o.metadata.name.empty());
    FUZZ_CHECK(o.metadata.name.size() <= kMaxObjectNameBytes);
    FUZZ_CHECK(begun_.emplace(o.id, o.size).second);
    Touch(o.metadata.name);
    for (const auto& [k, v] : o.metadata.attributes) {
      Touch(k);
      Touch(v);
    }
    (void)o.metadata.Find("legacy-format");
    // unpack's name check: must never accept a name that escapes.
    Result<std::vector<std::string>> parts = SplitSafeRelativePath(o.metadata.name);
    if (parts.ok()) {
      FUZZ_CHECK(!parts->empty());
      for (const std::string& p : *parts)
        FUZZ_CHECK(!p.empty() && p != "." && p != ".." && p.find('/') == std::string::npos);
    }
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& e) override {
    const auto kind = static_cast<FrameKind>(e.header.kind);
    const bool on_base = kind == FrameKind::kBaseRef || kind == FrameKind::kBaseDelta;
    FUZZ_CHECK(kind == FrameKind::kData || kind == FrameKind::kZeroRun || kind == FrameKind::kDedupRef || on_base);
    FUZZ_CHECK(begun_.count(e.header.object_id) && !ended_.count(e.header.object_id));
    FUZZ_CHECK(e.object.id == e.header.object_id);
    FUZZ_CHECK(e.header.raw_size > 0);
    FUZZ_CHECK(e.payload.size() == (kind == FrameKind::kZeroRun ? 0u : e.header.payload_size));
    FUZZ_CHECK((e.dedup != nullptr) == (kind == FrameKind::kDedupRef));
    FUZZ_CHECK((e.base_ref != nullptr) == on_base);
    Touch(e.payload);
    Touch(e.data);
    if (on_base) {
      // No base is ever at hand here: decoding needs it (the reader refuses
      // before any chunk), so base chunks come only undecoded.
      FUZZ_CHECK(!decode_);
      FUZZ_CHECK(e.data.empty());
      FUZZ_CHECK(e.payload.size() >= kBaseChunkRefSize);
      FUZZ_CHECK(e.header.raw_size <= kMaxChunkSize);
    }
    if (kind == FrameKind::kDedupRef) {
      // The reader promises that the reference names an earlier DATA frame
      // of the same size and hash (restore copies from it).
      FUZZ_CHECK(e.data.empty());
      FUZZ_CHECK(e.header.raw_size <= kMaxChunkSize);
      auto it = data_frames_.find({e.dedup->source_object_id, e.dedup->source_offset});
      FUZZ_CHECK(it != data_frames_.end());
      FUZZ_CHECK(it->second.first == e.header.raw_size && it->second.second == e.header.raw_hash);
    }
    if (kind == FrameKind::kData) {
      FUZZ_CHECK(e.header.raw_size <= kMaxChunkSize);
      data_frames_[{e.header.object_id, e.header.offset}] = {e.header.raw_size, e.header.raw_hash};
      if (decode_) {
        FUZZ_CHECK(e.data.size() == e.header.raw_size);
        FUZZ_CHECK(Hash64(e.data.data(), e.data.size()) == e.header.raw_hash);
      } else {
        FUZZ_CHECK(e.data.empty());
      }
      auto transform = static_cast<TransformId>(e.header.transform);
      if (transform != TransformId::kNone) {  // what inspect does with a planar payload
        std::vector<PlaneInfo> planes;
        Status s = ReadPlaneTable(transform, e.payload, e.header.raw_size, &planes);
        if (decode_) FUZZ_CHECK(s.ok(), s);  // it decoded, so its table is fine
        if (!s.ok()) return s;
      }
    }
    if (kind == FrameKind::kZeroRun) FUZZ_CHECK(e.data.empty());
    bytes_ += e.header.raw_size;
    return Status::Ok();
  }
  Status OnObjectEnd(const ObjectState& o) override {
    FUZZ_CHECK(begun_.count(o.id));
    FUZZ_CHECK(ended_.insert(o.id).second);
    FUZZ_CHECK(o.ended);
    FUZZ_CHECK(o.size != kUnknownObjectSize && o.size <= kMaxObjectSize);
    FUZZ_CHECK(o.covered.End() <= o.size);
    raw_ += o.size;
    return Status::Ok();
  }
  Status OnStreamEnd(const StreamTotals& t) override {
    FUZZ_CHECK(!end_seen_);
    end_seen_ = true;
    FUZZ_CHECK(ended_.size() == begun_.size());
    FUZZ_CHECK(t.object_count == begun_.size());
    FUZZ_CHECK(t.raw_bytes == raw_);
    FUZZ_CHECK(bytes_ == raw_);  // every byte of every object came in exactly one chunk
    return Status::Ok();
  }

  void CheckVerdict(const Status& s) const {
    // A stream is complete only when OnStreamEnd was called.
    FUZZ_CHECK(s.ok() == end_seen_, s);
    if (!s.ok()) FUZZ_CHECK(!s.message().empty());
  }

 private:
  bool decode_;
  bool header_seen_ = false;
  bool end_seen_ = false;
  std::map<uint32_t, uint64_t> begun_;
  std::set<uint32_t> ended_;
  std::map<std::pair<uint32_t, uint64_t>, std::pair<uint64_t, uint64_t>> data_frames_;  // -> raw size, hash
  uint64_t bytes_ = 0;
  uint64_t raw_ = 0;
};

Status Read(std::span<const uint8_t> bytes, bool decode, size_t max_read) {
  MemorySource source(bytes, max_read);
  TouchVisitor visitor(decode);
  Status s = ReadStream(source, visitor, ReadOptions{.decode = decode});
  visitor.CheckVerdict(s);
  return s;
}

// From a source that reads in place, as a mapped file does, from its own
// copy of the input (an over-read past its end is the sanitizers' to see),
// and overwrites what the reader says it is done with: a payload let go
// before its decoding would then fail its hash.
Status ReadInPlace(const std::vector<uint8_t>& bytes) {
  testing::PoisoningSource source(bytes);
  TouchVisitor visitor(/*decode=*/true);
  Status s = ReadStream(source, visitor);
  visitor.CheckVerdict(s);
  FUZZ_CHECK(!source.passed_unread());
  return s;
}

// Decoding ahead on two threads (unpack -o -, verify, flatten), DIGEST_BLOCKs
// checked against the chunks' bytes as ReadStream checks them.
Status ReadAhead(const std::vector<uint8_t>& bytes) {
  MemorySource source(bytes);
  TouchVisitor visitor(/*decode=*/true);
  Status s = ReadStreamDecodingAhead(source, visitor, DecodeAheadOptions{2, {}});
  visitor.CheckVerdict(s);
  return s;
}

// Recomputes what a mutation breaks but an attacker could recompute too.
// Knows only where the header checksum sits (the last 4 of 64 bytes).
std::vector<uint8_t> Repair(std::span<const uint8_t> in, ChunkDecoder& decoder) {
  std::vector<uint8_t> out(in.begin(), in.end());
  if (out.size() < kStreamHeaderSize) return out;
  StoreLE32(out.data() + 60, HeaderChecksum(out.data(), 60));
  std::map<uint32_t, uint64_t> digests;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> data_hashes;  // DATA frames: (object, offset) -> hash
  StreamTotals totals;
  std::vector<uint8_t> decoded;
  size_t pos = kStreamHeaderSize;
  while (out.size() - pos >= kFrameHeaderSize) {
    uint8_t* raw = out.data() + pos;
    StoreLE32(raw + 60, HeaderChecksum(raw, 60));
    FrameHeader h;
    if (!DecodeFrameHeader(raw, &h).ok()) break;  // reserved bits: leave it to the reader to refuse
    size_t available = out.size() - pos - kFrameHeaderSize;
    std::span<const uint8_t> payload(raw + kFrameHeaderSize, std::min<size_t>(h.payload_size, available));
    switch (static_cast<FrameKind>(h.kind)) {
      case FrameKind::kObjectBegin:
        h.raw_hash = Hash64(payload.data(), payload.size());
        ++totals.object_count;
        break;
      case FrameKind::kData:
        if (h.raw_size > 0 && h.raw_size <= kSliceMaxRaw && IsKnownCodec(h.codec) && IsKnownTransform(h.transform)) {
          decoded.resize(h.raw_size);
          if (decoder.Decode(static_cast<CodecId>(h.codec), static_cast<TransformId>(h.transform), payload, decoded)
                  .ok())
            h.raw_hash = Hash64(decoded.data(), decoded.size());
        }
        digests[h.object_id] += ObjectDigestTerm(h.offset, h.raw_size, h.raw_hash);
        data_hashes[{h.object_id, h.offset}] = h.raw_hash;
        break;
      case FrameKind::kDedupRef: {
        DedupRef ref;
        if (payload.size() == kDedupRefPayloadSize && DecodeDedupRef(payload.data(), &ref).ok()) {
          auto it = data_hashes.find({ref.source_object_id, ref.source_offset});
          if (it != data_hashes.end()) h.raw_hash = it->second;
        }
        digests[h.object_id] += ObjectDigestTerm(h.offset, h.raw_size, h.raw_hash);
        break;
      }
      case FrameKind::kZeroRun:
        digests[h.object_id] += ObjectDigestTerm(h.offset, h.raw_size, 0);
        break;
      case FrameKind::kBase:
      case FrameKind::kDigestBlock:
        h.raw_hash = Hash64(payload.data(), payload.size());
        break;
      case FrameKind::kBaseRef:
      case FrameKind::kBaseDelta:
        // The reference's own checksum (its payload), so mutations of it reach the validator.
        if (payload.size() >= kBaseChunkRefSize) {
          uint8_t* ref = raw + kFrameHeaderSize;
          std::memset(ref + 4, 0, 4);
          StoreLE32(ref + 4, static_cast<uint32_t>(Hash64(ref, kBaseChunkRefSize)));
        }
        digests[h.object_id] += ObjectDigestTerm(h.offset, h.raw_size, h.raw_hash);
        break;
      case FrameKind::kObjectEnd:
        h.raw_hash = digests[h.object_id];
        totals.raw_bytes += h.raw_size;
        break;
      case FrameKind::kStreamEnd:
        totals.stream_bytes = pos;
        if (payload.size() == kStreamEndPayloadSize) {
          EncodeStreamTotals(totals, raw + kFrameHeaderSize);
          h.raw_hash = Hash64(payload.data(), payload.size());
        }
        break;
      default:
        break;
    }
    EncodeFrameHeader(h, raw);
    if (static_cast<FrameKind>(h.kind) != FrameKind::kStreamEnd) ++totals.frame_count;
    if (h.payload_size > available) break;
    pos += kFrameHeaderSize + h.payload_size;
  }
  return out;
}

// Step 3: every payload through the metadata parser and every decoder.
void DecodeFramePayloads(std::span<const uint8_t> in, ChunkDecoder& decoder) {
  std::vector<uint8_t> decoded;
  size_t pos = kStreamHeaderSize;
  int frames = 0;
  while (in.size() >= pos && in.size() - pos >= kFrameHeaderSize && frames++ < 64) {
    FrameHeader h;
    if (!DecodeFrameHeader(in.data() + pos, &h).ok()) break;
    size_t available = in.size() - pos - kFrameHeaderSize;
    std::span<const uint8_t> payload(in.data() + pos + kFrameHeaderSize, std::min<size_t>(h.payload_size, available));
    ObjectMetadata meta;
    if (DecodeObjectMetadata(payload, &meta).ok()) {
      FUZZ_CHECK(!meta.name.empty() && meta.name.size() <= kMaxObjectNameBytes);
      // What the writer would write for it must parse back to the same thing.
      Result<std::vector<uint8_t>> again = EncodeObjectMetadata(meta);
      if (again.ok()) {
        ObjectMetadata back;
        FUZZ_CHECK(DecodeObjectMetadata(*again, &back).ok());
        FUZZ_CHECK(back.name == meta.name && back.attributes == meta.attributes);
      }
    }
    if (payload.size() >= kDedupRefPayloadSize) {
      DedupRef ref;
      (void)DecodeDedupRef(payload.data(), &ref);
    }
    if (h.kind == static_cast<uint8_t>(FrameKind::kData) && h.raw_size > 0 && h.raw_size <= kSliceMaxRaw) {
      for (const Combo& combo : kCombos) (void)DecodeOne(decoder, combo, payload, h.raw_size, decoded);
    }
    if (h.payload_size > available) break;
    pos += kFrameHeaderSize + h.payload_size;
  }
}

void FuzzStream(std::span<const uint8_t> in) {
  ChunkDecoder decoder;
  (void)Read(in, /*decode=*/true, SIZE_MAX);
  std::vector<uint8_t> fixed = Repair(in, decoder);
  Status decoded = Read(fixed, /*decode=*/true, SIZE_MAX);
  Status in_place = ReadInPlace(fixed);
  FUZZ_CHECK(in_place.ok() == decoded.ok(), in_place);  // where the payloads lie changes nothing
  Status ahead = ReadAhead(fixed);
  FUZZ_CHECK(ahead.ok() == decoded.ok(), ahead);  // nor how many threads decode
  Status framed = Read(fixed, /*decode=*/false, 1 + fixed.size() % 4093);
  // Decoding only adds checks.
  if (decoded.ok()) FUZZ_CHECK(framed.ok(), framed);
  DecodeFramePayloads(fixed, decoder);
}

void FuzzDecoders(std::span<const uint8_t> in) {
  ObjectMetadata meta;
  (void)DecodeObjectMetadata(in, &meta);
  if (in.size() < 4) return;
  const Combo combo = kCombos[in[0] % std::size(kCombos)];
  uint64_t raw_size = (in[1] | (uint64_t{in[2]} << 8) | (uint64_t{in[3]} << 16)) % kSliceMaxRaw;
  std::span<const uint8_t> payload = in.subspan(4);
  if (raw_size == 0) raw_size = payload.size();
  if (raw_size == 0) return;
  ChunkDecoder decoder;
  std::vector<uint8_t> out;
  Status s = DecodeOne(decoder, combo, payload, raw_size, out);
  if (s.ok() && combo.codec == CodecId::kRaw) FUZZ_CHECK(std::memcmp(out.data(), payload.data(), raw_size) == 0);
  // The same decoder again, on the same input: same verdict (no state leaks between calls).
  std::vector<uint8_t> again;
  Status s2 = DecodeOne(decoder, combo, payload, raw_size, again);
  FUZZ_CHECK(s.ok() == s2.ok(), s2);
  if (s.ok()) FUZZ_CHECK(out == again);
  // A bit-plane payload is a byte-grouped one whose words are rotated back:
  // same verdict, and every word equal to the byte-grouped word rotated.
  if (RotationBits(combo.transform) != 0) {
    const unsigned word = WordSize(combo.transform), r = RotationBits(combo.transform);
    std::vector<uint8_t> grouped;
    Status g = DecodeOne(decoder, {CodecId::kPlanar, static_cast<TransformId>(word)}, payload, raw_size, grouped);
    FUZZ_CHECK(g.ok() == s.ok(), g);
    if (s.ok() && g.ok()) {
      for (size_t i = 0; i + word <= raw_size; i += word) {
        const size_t half = i + word - 2;  // the rotated 16 bits: the whole 2-byte word, the upper half of 4
        FUZZ_CHECK(LoadLE16(out.data() + half) == RotateLeft16(LoadLE16(grouped.data() + half), 16 - r));
        if (word == 4) FUZZ_CHECK(LoadLE16(out.data() + i) == LoadLE16(grouped.data() + i));
      }
      FUZZ_CHECK(std::equal(out.begin() + raw_size / word * word, out.end(), grouped.begin() + raw_size / word * word));
    }
  }
}

// Seeds the CLI cannot make: a dedup stream (DEDUP_REF frames naming DATA
// frames of the same and of another object) with a seek index, and
// interleaved objects.
Status WriteSeeds(const std::string& dir) {
  auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) -> Status {
    std::ofstream f(dir + "/" + name, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return f ? Status::Ok() : Status::IoError("cannot write " + dir + "/" + name);
  };
  constexpr uint32_t kChunk = 4096;
  std::vector<uint8_t> weights(6 * kChunk), zeros(3 * kChunk, 0);
  GenerateModelData(DataKind::kBf16Weights, 1, 0, weights);
  for (bool dedup : {true, false}) {
    for (const char* codec : {"auto", "zstd", "lz4", "huffman", "raw"}) {
      EncoderOptions options;
      VF_RETURN_IF_ERROR(ParseCodecSpec(codec, &options));
      MemorySink sink;
      StreamHeader header;
      header.chunk_size = kChunk;
      // The dedup seeds also carry a seek index, with its INDEX_BLOCK frames.
      header.flags = dedup ? kStreamFlagDedup | kStreamFlagSeekIndex : 0;
      header.dedup_window = dedup ? 16 : 0;  // the farthest reference is 6 or 9 DATA frames back
      header.producer = "stream_reader_fuzz seeds";
      StreamWriter writer(&sink, header);
      ChunkEncoder encoder(options);
      VF_RETURN_IF_ERROR(writer.Start());
      // Object 1: weights. Object 2: weights' chunks again (by reference in a
      // dedup stream), zeros, then its own first chunk again. Interleaved.
      VF_ASSIGN_OR_RETURN(uint32_t a, writer.BeginObject(ObjectMetadata{"model/a.bf16", {{"k", "v"}}}, weights.size()));
      VF_ASSIGN_OR_RETURN(uint32_t b,
                          writer.BeginObject(ObjectMetadata{"model/b.bf16", {}}, 4 * kChunk + zeros.size()));
      std::vector<uint64_t> hashes;
      for (uint64_t off = 0; off < weights.size(); off += kChunk) {
        EncodedChunk chunk;
        std::span<const uint8_t> raw(weights.data() + off, kChunk);
        VF_RETURN_IF_ERROR(encoder.Encode(raw, &chunk));
        hashes.push_back(Hash64(raw.data(), raw.size()));
        VF_RETURN_IF_ERROR(writer.AddChunk(a, off, kChunk, chunk));
        if (off / kChunk < 3) {  // b's chunk i is a's chunk i
          if (dedup) {
            DedupRef ref{a, off, HashContent128(raw.data(), raw.size())};
            VF_RETURN_IF_ERROR(writer.AddDedupRef(b, off, kChunk, hashes.back(), ref));
          } else {
            VF_RETURN_IF_ERROR(writer.AddChunk(b, off, kChunk, chunk));
          }
        }
      }
      VF_RETURN_IF_ERROR(writer.EndObject(a));
      for (uint64_t off = 0; off < zeros.size(); off += kChunk) {
        EncodedChunk chunk;
        VF_RETURN_IF_ERROR(encoder.Encode(std::span<const uint8_t>(zeros.data() + off, kChunk), &chunk));
        VF_RETURN_IF_ERROR(writer.AddChunk(b, 3 * kChunk + off, kChunk, chunk));
      }
      const uint64_t last = 3 * kChunk + zeros.size();
      if (dedup) {
        DedupRef ref{a, 0, HashContent128(weights.data(), kChunk)};
        VF_RETURN_IF_ERROR(writer.AddDedupRef(b, last, kChunk, hashes[0], ref));
      } else {
        EncodedChunk chunk;
        VF_RETURN_IF_ERROR(encoder.Encode(std::span<const uint8_t>(weights.data(), kChunk), &chunk));
        VF_RETURN_IF_ERROR(writer.AddChunk(b, last, kChunk, chunk));
      }
      VF_RETURN_IF_ERROR(writer.EndObject(b));
      VF_RETURN_IF_ERROR(writer.Finish());
      // Every seed must be a stream the reader accepts.
      MemorySource check(sink.bytes());
      TouchVisitor visitor(true);
      Status s = ReadStream(check, visitor);
      if (!s.ok()) return s.WithContext(std::string("seed ") + (dedup ? "dedup-" : "interleaved-") + codec);
      VF_RETURN_IF_ERROR(write(std::string(dedup ? "dedup-" : "interleaved-") + codec + ".vfs", sink.bytes()));
    }
  }
  // An incremental stream (its base is not at hand: read without decoding,
  // it exercises the BASE, BASE_REF and BASE_DELTA rules of the validator).
  {
    MemorySink sink;
    StreamHeader header;
    header.chunk_size = kChunk;
    header.flags = kStreamFlagBase | kStreamFlagSeekIndex | kStreamFlagIndexBlocks;
    header.producer = "stream_reader_fuzz seeds";
    StreamWriter writer(&sink, header);
    BaseDescriptor base;
    base.base_id = Sha256(weights.data(), 64);
    base.base_bytes = 1 << 20;
    base.base_raw_bytes = weights.size();
    base.location = "base.vfs";
    writer.SetBase(base);
    VF_RETURN_IF_ERROR(writer.Start());
    VF_ASSIGN_OR_RETURN(uint32_t a, writer.BeginObject(ObjectMetadata{"model/a.bf16", {}}, weights.size()));
    ChunkEncoder encoder(EncoderOptions{.detect_zero_runs = false});
    for (uint64_t off = 0; off < weights.size(); off += kChunk) {
      std::span<const uint8_t> raw(weights.data() + off, kChunk);
      const uint64_t hash = Hash64(raw.data(), raw.size());
      BaseChunkRef ref{1, off, Sha256(raw.data(), raw.size())};
      EncodedChunk chunk;
      if (off / kChunk % 3 == 0) {
        VF_RETURN_IF_ERROR(writer.AddBaseRef(a, off, kChunk, hash, ref));
      } else if (off / kChunk % 3 == 1) {
        std::vector<uint8_t> delta(raw.begin(), raw.end());
        for (size_t i = 0; i < delta.size(); i += 2) delta[i] = 0;
        VF_RETURN_IF_ERROR(encoder.Encode(delta, &chunk));
        VF_RETURN_IF_ERROR(writer.AddBaseDelta(a, off, kChunk, hash, ref, chunk));
      } else {
        VF_RETURN_IF_ERROR(encoder.Encode(raw, &chunk));
        VF_RETURN_IF_ERROR(writer.AddChunk(a, off, kChunk, chunk));
      }
    }
    VF_RETURN_IF_ERROR(writer.EndObject(a));
    VF_RETURN_IF_ERROR(writer.Finish());
    MemorySource check(sink.bytes());
    TouchVisitor visitor(false);
    VF_RETURN_IF_ERROR(ReadStream(check, visitor, ReadOptions{.decode = false}).WithContext("seed incremental"));
    VF_RETURN_IF_ERROR(write("incremental-frames.vfs", sink.bytes()));
  }
  return Status::Ok();
}

}  // namespace
}  // namespace vramflow

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("VRAMFLOW_FUZZ_WRITE_SEEDS")) {
    vramflow::Status s = vramflow::WriteSeeds(dir);
    if (!s.ok()) {
      std::fprintf(stderr, "stream_reader_fuzz: writing seeds: %s\n", s.ToString().c_str());
      std::exit(1);
    }
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  if (size >= vramflow::kStreamMagic.size() &&
      std::memcmp(data, vramflow::kStreamMagic.data(), vramflow::kStreamMagic.size()) == 0)
    vramflow::FuzzStream(in);
  else vramflow::FuzzDecoders(in);
  return 0;
}
