// SPDX-License-Identifier: MIT
// The dump side of incremental streams (docs/FORMAT.md 4.9 to 4.12): the
// dump graph against a base (references, deltas, object matching,
// references-only, dedup alongside, determinism, the budget) and the
// writer's DIGEST_BLOCKs. Streams are checked frame by frame by a small
// decoder here that resolves base references from the base's bytes, checks
// every hash and every DIGEST_BLOCK entry, and that each DEDUP_REF names a
// DATA frame inside the declared window.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>

#include "common/hash.h"
#include "common/sha256.h"
#include "sim/gpu/sim_process.h"
#include "streamer/format/frame_reader.h"
#include "streamer/format/stream_writer.h"
#include "streamer/pipeline.h"
#include "streamer/sequential_dump.h"
#include "tests/support/fake_base_stream.h"
#include "tests/support/test_util.h"
#include "transport/core/file_random_access.h"
#include "transport/core/memory_stream.h"
#include "transport/core/random_access.h"

namespace vramflow {
namespace {

using namespace std::chrono_literals;
using testing::FakeBaseStream;

constexpr uint32_t kChunk = 64 << 10;

PipelineOptions Options(unsigned threads = 2) {
  PipelineOptions o;
  o.chunk_size = kChunk;
  o.max_memory = 32 << 20;
  o.threads = threads;
  o.dma_timeout = 5s;
  return o;
}

// A sink a stream can be stored to, as a file is: the dump writes an index.
class StoredSink final : public ByteSink {
 public:
  Status Write(std::span<const uint8_t> data) override {
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    return Status::Ok();
  }
  Status Commit() override { return Status::Ok(); }
  std::string Describe() const override { return "stored memory"; }
  bool Seekable() const override { return true; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

std::unique_ptr<SimProcess> MakeProcess(const std::vector<SimBoSpec>& specs, uint32_t gpus = 1) {
  auto p = std::make_unique<SimProcess>(gpus, SimDeviceOptions{});
  Status s = p->Allocate(specs);
  EXPECT_TRUE(s.ok()) << s.ToString();
  p->Fill();
  return p;
}

std::map<std::string, std::vector<uint8_t>> BytesByName(SimProcess& p) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (size_t i = 0; i < p.specs().size(); ++i) {
    std::span<uint8_t> b = p.bytes(i);
    out[p.specs()[i].name].assign(b.begin(), b.end());
  }
  return out;
}

Status DumpSources(const std::vector<DumpSource>& sources, ByteSink* sink, const PipelineOptions& options,
                   PipelineStats* stats) {
  return RunDump(sources, sink, options, stats);
}

Status Dump(SimProcess& p, ByteSink* sink, const PipelineOptions& options, PipelineStats* stats) {
  VF_ASSIGN_OR_RETURN(std::vector<DumpSource> sources, p.DumpSources());
  return RunDump(sources, sink, options, stats);
}

// A full stored dump of `p` (with digests unless told not to), as a base.
std::shared_ptr<FakeBaseStream> BaseOf(SimProcess& p, bool digests = true,
                                       const std::vector<DumpSource>* sources = nullptr) {
  StoredSink sink;
  PipelineStats stats;
  PipelineOptions o = Options();
  o.chunk_digests = digests;
  Status s = sources ? DumpSources(*sources, &sink, o, &stats) : Dump(p, &sink, o, &stats);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::map<std::string, std::vector<uint8_t>> bytes;
  if (sources) {
    for (size_t i = 0; i < sources->size(); ++i) {
      std::span<uint8_t> b = p.bytes(i);
      bytes[(*sources)[i].metadata.name].assign(b.begin(), b.end());
    }
  } else {
    bytes = BytesByName(p);
  }
  Result<std::shared_ptr<FakeBaseStream>> base = FakeBaseStream::Create(sink.bytes(), std::move(bytes), digests);
  EXPECT_TRUE(base.ok()) << base.status().ToString();
  return base.ok() ? *base : nullptr;
}

// What a stream holds, frame by frame.
struct Decoded {
  std::map<std::string, std::vector<uint8_t>> objects;
  std::map<FrameKind, uint64_t> frames;     // count per kind
  std::map<FrameKind, uint64_t> raw_bytes;  // chunk bytes per kind
  std::map<FrameKind, uint64_t> payload_bytes;
  uint64_t index_blocks = 0;
  uint64_t digest_blocks = 0;
  std::optional<BaseDescriptor> base;
  // (object name, offset) of each BASE_REF, and each BASE_DELTA.
  std::set<std::pair<std::string, uint64_t>> base_refs, base_deltas;

  uint64_t count(FrameKind k) const { return frames.count(k) ? frames.at(k) : 0; }
  uint64_t bytes(FrameKind k) const { return raw_bytes.count(k) ? raw_bytes.at(k) : 0; }
  uint64_t payload(FrameKind k) const { return payload_bytes.count(k) ? payload_bytes.at(k) : 0; }
};

// Decodes `stream` in order, resolving base references from `base`, and
// checks what a reader would: every chunk's XXH3, every base chunk's
// SHA-256, each DEDUP_REF naming a DATA frame within the stream's window,
// each DIGEST_BLOCK right after an INDEX_BLOCK of its object, with the
// SHA-256 of each listed chunk (zeros for a ZERO_RUN).
Status DecodeStream(const std::vector<uint8_t>& stream, const BaseStream* base, Decoded* out) {
  BaseScratch scratch;
  MemorySource source(stream);
  FrameReader reader(&source);
  StreamHeader header;
  VF_RETURN_IF_ERROR(reader.ReadStreamHeader(&header));
  std::map<uint32_t, std::string> names;
  std::set<uint32_t> unsized;
  std::vector<std::pair<uint32_t, uint64_t>> data_frames;                      // in stream order
  std::optional<std::pair<uint32_t, std::vector<SeekIndexChunk>>> last_block;  // when the previous frame was one
  ChunkDecoder decoder;
  for (;;) {
    FrameHeader h;
    bool end = false;
    VF_RETURN_IF_ERROR(reader.ReadFrameHeader(&h, &end));
    if (end) return Status::Corruption("no STREAM_END");
    std::vector<uint8_t> payload(h.payload_size);
    VF_RETURN_IF_ERROR(reader.ReadPayload(payload));
    const auto kind = static_cast<FrameKind>(h.kind);
    ++out->frames[kind];
    auto previous_block = std::move(last_block);
    last_block.reset();
    const std::string where = FrameKindName(h.kind) + " at " + std::to_string(h.offset);
    std::vector<uint8_t>* object = nullptr;
    if (IsChunkKind(h.kind)) {
      if (!names.count(h.object_id)) return Status::Corruption(where + ": unknown object");
      object = &out->objects[names[h.object_id]];
      if (unsized.count(h.object_id) && h.offset == object->size()) object->resize(h.offset + h.raw_size);
      if (h.offset + h.raw_size > object->size()) return Status::Corruption(where + ": past the object");
      out->raw_bytes[kind] += h.raw_size;
      out->payload_bytes[kind] += h.payload_size;
    }
    std::vector<uint8_t> b;
    auto base_bytes = [&](const BaseChunkRef& ref) -> Result<std::span<const uint8_t>> {
      if (!base) return Status::Corruption(where + ": a base reference without a base");
      if (!base->ChunkAt(ref.base_object_id, ref.base_offset, h.raw_size))
        return Status::Corruption(where + ": names no base chunk");
      b.resize(h.raw_size);
      VF_RETURN_IF_ERROR(base->ReadChunk(ref.base_object_id, ref.base_offset, b, scratch));
      if (Sha256(b) != ref.base_sha256) return Status::Corruption(where + ": base chunk SHA-256 differs");
      return std::span<const uint8_t>(b);
    };
    switch (kind) {
      case FrameKind::kBase: {
        if (h.sequence != 0 || !(header.flags & kStreamFlagBase)) return Status::Corruption("BASE out of place");
        BaseDescriptor d;
        VF_RETURN_IF_ERROR(DecodeBaseDescriptor(payload, &d));
        out->base = d;
        break;
      }
      case FrameKind::kObjectBegin: {
        ObjectMetadata m;
        VF_RETURN_IF_ERROR(DecodeObjectMetadata(payload, &m));
        names[h.object_id] = m.name;
        if (h.raw_size == kUnknownObjectSize) unsized.insert(h.object_id);  // grows with its chunks, in order
        out->objects[m.name].assign(h.raw_size == kUnknownObjectSize ? 0 : h.raw_size, 0);
        break;
      }
      case FrameKind::kData:
        VF_RETURN_IF_ERROR(decoder.Decode(static_cast<CodecId>(h.codec), static_cast<TransformId>(h.transform), payload,
                                          std::span<uint8_t>(object->data() + h.offset, h.raw_size)));
        data_frames.emplace_back(h.object_id, h.offset);
        break;
      case FrameKind::kZeroRun:
        std::fill_n(object->begin() + h.offset, h.raw_size, 0);
        break;
      case FrameKind::kDedupRef: {
        DedupRef ref;
        VF_RETURN_IF_ERROR(DecodeDedupRef(payload.data(), &ref));
        auto it =
            std::find(data_frames.begin(), data_frames.end(), std::make_pair(ref.source_object_id, ref.source_offset));
        if (it == data_frames.end()) return Status::Corruption(where + ": names no DATA frame");
        if (static_cast<uint64_t>(data_frames.end() - it) > header.dedup_window)
          return Status::Corruption(where + ": names a DATA frame outside the window of " +
                                    std::to_string(header.dedup_window));
        const std::vector<uint8_t>& from = out->objects[names[ref.source_object_id]];
        std::copy_n(from.begin() + ref.source_offset, h.raw_size, object->begin() + h.offset);
        break;
      }
      case FrameKind::kBaseRef: {
        BaseChunkRef ref;
        VF_RETURN_IF_ERROR(DecodeBaseChunkRef(payload.data(), &ref));
        VF_ASSIGN_OR_RETURN(std::span<const uint8_t> from, base_bytes(ref));
        std::copy(from.begin(), from.end(), object->begin() + h.offset);
        out->base_refs.emplace(names[h.object_id], h.offset);
        break;
      }
      case FrameKind::kBaseDelta: {
        BaseChunkRef ref;
        VF_RETURN_IF_ERROR(DecodeBaseChunkRef(payload.data(), &ref));
        VF_ASSIGN_OR_RETURN(std::span<const uint8_t> from, base_bytes(ref));
        std::vector<uint8_t> delta(h.raw_size);
        VF_RETURN_IF_ERROR(decoder.Decode(static_cast<CodecId>(h.codec), static_cast<TransformId>(h.transform),
                                          std::span<const uint8_t>(payload).subspan(kBaseChunkRefSize), delta));
        for (uint64_t i = 0; i < h.raw_size; ++i) (*object)[h.offset + i] = from[i] ^ delta[i];
        out->base_deltas.emplace(names[h.object_id], h.offset);
        break;
      }
      case FrameKind::kIndexBlock: {
        VF_ASSIGN_OR_RETURN(std::vector<SeekIndexChunk> records, DecodeIndexBlock(payload));
        last_block.emplace(h.object_id, std::move(records));
        ++out->index_blocks;
        break;
      }
      case FrameKind::kDigestBlock: {
        if (h.flags != kFlagSkippable) return Status::Corruption("DIGEST_BLOCK not marked skippable");
        if (!previous_block || previous_block->first != h.object_id)
          return Status::Corruption("DIGEST_BLOCK not right after its object's INDEX_BLOCK");
        const std::vector<SeekIndexChunk>& records = previous_block->second;
        if (payload.size() != records.size() * kDigestEntrySize) return Status::Corruption("DIGEST_BLOCK size");
        const std::vector<uint8_t>& bytes = out->objects[names[h.object_id]];
        for (size_t i = 0; i < records.size(); ++i) {
          Sha256Digest expected{};
          if (records[i].kind != FrameKind::kZeroRun)
            expected = Sha256(bytes.data() + records[i].object_offset, records[i].raw_size);
          if (!std::equal(expected.begin(), expected.end(), payload.begin() + i * kDigestEntrySize))
            return Status::Corruption("DIGEST_BLOCK entry " + std::to_string(i) + " is not the chunk's SHA-256");
        }
        ++out->digest_blocks;
        break;
      }
      case FrameKind::kStreamEnd:
        if ((header.flags & kStreamFlagBase) && !out->base) return Status::Corruption("base flag without BASE");
        return Status::Ok();
      default:
        break;
    }
    if (IsChunkKind(h.kind) && kind != FrameKind::kZeroRun &&
        Hash64(object->data() + h.offset, h.raw_size) != h.raw_hash)
      return Status::Corruption(where + ": raw_hash differs");
  }
}

uint32_t HeaderFlags(const std::vector<uint8_t>& stream) {
  StreamHeader header;
  EXPECT_TRUE(DecodeStreamHeader(stream.data(), &header).ok());
  return header.flags;
}

// Decodes and compares with the process's bytes.
Decoded DecodeAndCompare(const std::vector<uint8_t>& stream, const BaseStream* base, SimProcess& p) {
  Decoded d;
  Status s = DecodeStream(stream, base, &d);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(d.objects, BytesByName(p));
  return d;
}

// Changes `words` fp32 words per chunk of BO `index` slightly (the lowest
// mantissa bits), as a small optimizer step does.
void NudgeWords(SimProcess& p, size_t index, uint32_t words_per_chunk) {
  std::span<uint8_t> b = p.bytes(index);
  for (uint64_t chunk = 0; chunk < b.size(); chunk += kChunk)
    for (uint32_t w = 0; w < words_per_chunk; ++w) {
      const uint64_t at = chunk + (uint64_t{w} * 7919 * 4) % std::min<uint64_t>(kChunk, b.size() - chunk);
      if (at + 4 <= b.size()) b[at & ~uint64_t{3}] ^= 0x03;
    }
}

std::vector<SimBoSpec> Layout() {
  return {
      {"weights-bf16", 0, 16 * kChunk, DataKind::kBf16Weights, 1},
      {"master-fp32", 0, 16 * kChunk + 999, DataKind::kFp32Weights, 2},
      {"adam-v", 0, 8 * kChunk, DataKind::kAdamV, 3},
      {"kv-cache", 0, 8 * kChunk, DataKind::kZeros, 0},
      {"scratch", 0, 4 * kChunk, DataKind::kRandom, 4},
  };
}

//! The same data against itself: every non-zero chunk is a BASE_REF (the
//! zeros stay a ZERO_RUN), nothing else is stored, and the stream decodes
//! to the same bytes.
TEST(IncrementalDump, IdenticalDataIsOnlyBaseReferences) {
  auto p = MakeProcess(Layout());
  auto base = BaseOf(*p);
  StoredSink sink;
  PipelineStats stats;
  PipelineOptions o = Options();
  o.base = base;
  ASSERT_TRUE(Dump(*p, &sink, o, &stats).ok());
  Decoded d = DecodeAndCompare(sink.bytes(), base.get(), *p);
  EXPECT_EQ(d.count(FrameKind::kData), 0u);
  EXPECT_EQ(d.count(FrameKind::kDedupRef), 0u);
  EXPECT_EQ(d.count(FrameKind::kBaseDelta), 0u);
  EXPECT_EQ(d.bytes(FrameKind::kBaseRef), p->total_bytes() - 8 * kChunk);
  EXPECT_EQ(d.bytes(FrameKind::kZeroRun), 8 * kChunk);
  EXPECT_EQ(stats.base_ref_bytes, p->total_bytes() - 8 * kChunk);
  EXPECT_EQ(stats.base_delta_bytes, 0u);
  ASSERT_TRUE(d.base.has_value());
  EXPECT_EQ(*d.base, base->DescriptorForDependent());
  EXPECT_EQ(HeaderFlags(sink.bytes()) & kStreamFlagBase, kStreamFlagBase);
  // An incremental stream carries digests, so it can be a base itself.
  EXPECT_EQ(d.digest_blocks, d.index_blocks);
  EXPECT_GT(d.digest_blocks, 0u);
  EXPECT_LT(sink.bytes().size(), 64u << 10);
}

//! A few changed words per chunk of fp32 weights: each chunk becomes a
//! BASE_DELTA, far smaller than the same chunk coded on its own; random
//! scratch rewritten entirely stays plain DATA (a delta would not pay).
TEST(IncrementalDump, ChangedWordsBecomeDeltasSmallerThanPlainChunks) {
  auto p = MakeProcess(Layout());
  auto base = BaseOf(*p);
  NudgeWords(*p, 1, 16);  // master-fp32
  std::span<uint8_t> scratch = p->bytes(4);
  GenerateModelData(DataKind::kRandom, 99, 0, scratch);

  PipelineOptions o = Options();
  o.base = base;
  StoredSink sink, full;
  PipelineStats stats, full_stats;
  ASSERT_TRUE(Dump(*p, &sink, o, &stats).ok());
  ASSERT_TRUE(Dump(*p, &full, Options(), &full_stats).ok());
  Decoded d = DecodeAndCompare(sink.bytes(), base.get(), *p);
  Decoded plain = DecodeAndCompare(full.bytes(), nullptr, *p);

  // master-fp32: 17 chunks (the last one 999 bytes), each changed.
  EXPECT_EQ(d.count(FrameKind::kBaseDelta), 17u);
  EXPECT_EQ(d.bytes(FrameKind::kBaseDelta), 16 * kChunk + 999);
  EXPECT_EQ(stats.base_delta_bytes, 16 * kChunk + 999);
  for (uint64_t at = 0; at < 16 * kChunk + 999; at += kChunk)
    EXPECT_TRUE(d.base_deltas.count({"master-fp32", at})) << at;
  // The deltas (with their 48-byte references) against the same chunks coded
  // plain in the full stream.
  uint64_t plain_fp32 = 0;
  {
    Decoded only;
    StoredSink one;
    PipelineStats s;
    auto q = MakeProcess({{"master-fp32", 0, 16 * kChunk + 999, DataKind::kFp32Weights, 2}});
    NudgeWords(*q, 0, 16);
    ASSERT_TRUE(Dump(*q, &one, Options(), &s).ok());
    ASSERT_TRUE(DecodeStream(one.bytes(), nullptr, &only).ok());
    plain_fp32 = only.payload(FrameKind::kData);
  }
  EXPECT_LT(d.payload(FrameKind::kBaseDelta) * 4, plain_fp32);
  // scratch: rewritten random bytes, coded plain.
  EXPECT_EQ(d.count(FrameKind::kData), 4u);
  EXPECT_EQ(d.bytes(FrameKind::kData), 4 * kChunk);
  // Everything else is referenced.
  EXPECT_EQ(d.bytes(FrameKind::kBaseRef), 24 * kChunk);
  EXPECT_LT(sink.bytes().size() * 2, full.bytes().size());
}

//! Objects matched by name: one grown (its old chunks referenced, the new
//! tail stored), one shrunk (its whole chunks referenced, the shorter last
//! chunk stored), one new (stored), one gone (nothing). GPU buffers by GPU,
//! address and size: a BO whose index (name) changed is still matched, one
//! that moved to another address or changed size is not.
TEST(IncrementalDump, ObjectsGrownShrunkMovedOrMissingInTheBase) {
  auto old_process = MakeProcess({
      {"grows", 0, 5 * kChunk, DataKind::kFp32Weights, 1},
      {"shrinks", 0, 6 * kChunk, DataKind::kBf16Weights, 2},
      {"gone", 0, 2 * kChunk, DataKind::kAdamM, 3},
      {"bo-1", 0, 3 * kChunk, DataKind::kFp16Weights, 4},
      {"bo-2", 0, 3 * kChunk, DataKind::kAdamV, 5},
      {"bo-3", 0, 3 * kChunk, DataKind::kAdamM, 6},
  });
  auto gpu_sources = [](SimProcess& p, std::vector<std::string> names, std::vector<std::string> vas) {
    Result<std::vector<DumpSource>> sources = p.DumpSources();
    EXPECT_TRUE(sources.ok());
    for (size_t i = 3; i < 6; ++i) {
      (*sources)[i].metadata.name = names[i - 3];
      (*sources)[i].metadata.attributes = {{"gpu-id", "0x1234"}, {"gpu-va", vas[i - 3]}};
    }
    return *sources;
  };
  std::vector<DumpSource> old_sources =
      gpu_sources(*old_process, {"bo-1", "bo-2", "bo-3"}, {"0x1000", "0x2000", "0x3000"});
  auto base = BaseOf(*old_process, true, &old_sources);

  auto p = MakeProcess({
      {"grows", 0, 7 * kChunk, DataKind::kFp32Weights, 1},
      {"shrinks", 0, 4 * kChunk + 100, DataKind::kBf16Weights, 2},
      {"new", 0, 2 * kChunk, DataKind::kAdamM, 3},
      {"bo-7", 0, 3 * kChunk, DataKind::kFp16Weights, 4},  // was bo-1 at 0x1000
      {"bo-2", 0, 3 * kChunk, DataKind::kAdamV, 5},        // moved to 0x9000
      {"bo-3", 0, 2 * kChunk, DataKind::kAdamM, 6},        // same address, smaller
  });
  // The new GPU objects live on another device (GPU 0 of this dump) with
  // another gpu-id: only the GPU's place counts.
  std::vector<DumpSource> sources = gpu_sources(*p, {"bo-7", "bo-2", "bo-3"}, {"0x1000", "0x9000", "0x3000"});
  for (size_t i = 3; i < 6; ++i) sources[i].metadata.attributes[0].second = "0xbeef";
  PipelineOptions o = Options();
  o.base = base;
  StoredSink sink;
  PipelineStats stats;
  ASSERT_TRUE(DumpSources(sources, &sink, o, &stats).ok());
  Decoded d;
  Status s = DecodeStream(sink.bytes(), base.get(), &d);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(d.objects["grows"], std::vector<uint8_t>(p->bytes(0).begin(), p->bytes(0).end()));

  std::set<std::pair<std::string, uint64_t>> expected;
  for (uint64_t c = 0; c < 5; ++c) expected.emplace("grows", c * kChunk);
  for (uint64_t c = 0; c < 4; ++c) expected.emplace("shrinks", c * kChunk);
  for (uint64_t c = 0; c < 3; ++c) expected.emplace("bo-7", c * kChunk);
  EXPECT_EQ(d.base_refs, expected);
  EXPECT_TRUE(d.base_deltas.empty());
  // grows' tail, shrinks' last 100 bytes, new, bo-2 and bo-3: stored.
  EXPECT_EQ(d.bytes(FrameKind::kData) + d.bytes(FrameKind::kDedupRef),
            2 * kChunk + 100 + 2 * kChunk + 3 * kChunk + 2 * kChunk);
  EXPECT_EQ(stats.base_ref_bytes, 12 * kChunk);
}

//! References-only: the same references as full mode, found from the
//! base's digests, reading only the base chunks it references (each proven
//! against its digest before it is named); no deltas. Without digests in
//! the base it is refused, clearly.
TEST(IncrementalDump, ReferencesOnlyEqualsFullModesReferencesAndReadsOnlyThem) {
  auto p = MakeProcess(Layout());
  auto base = BaseOf(*p);
  NudgeWords(*p, 1, 4);
  GenerateModelData(DataKind::kRandom, 77, 0, p->bytes(4).subspan(kChunk, kChunk));

  PipelineOptions o = Options();
  o.base = base;
  StoredSink full_sink, refs_sink;
  PipelineStats full_stats, refs_stats;
  ASSERT_TRUE(Dump(*p, &full_sink, o, &full_stats).ok());
  // Full mode reads the changed chunks (for their deltas) and the 27 it
  // references (to prove them: a digest alone proves nothing).
  EXPECT_EQ(base->chunk_reads.load(), 17u + 1u + 27u);
  base->chunk_reads = 0;
  o.base_refs_only = true;
  ASSERT_TRUE(Dump(*p, &refs_sink, o, &refs_stats).ok());
  EXPECT_EQ(base->chunk_reads.load(), 27u);

  Decoded full = DecodeAndCompare(full_sink.bytes(), base.get(), *p);
  Decoded refs = DecodeAndCompare(refs_sink.bytes(), base.get(), *p);
  EXPECT_EQ(refs.base_refs, full.base_refs);
  EXPECT_EQ(refs.base_refs.size(), 16u + 8u + 3u);  // master-fp32's 17 chunks and one scratch chunk changed
  EXPECT_EQ(refs.count(FrameKind::kBaseDelta), 0u);
  EXPECT_EQ(full.count(FrameKind::kBaseDelta), 17u);
  EXPECT_EQ(refs_stats.base_ref_bytes, full_stats.base_ref_bytes);

  // Without digests full mode reads every chunk it compares, and finds the
  // same references; references-only is refused.
  auto old_process = MakeProcess(Layout());
  auto no_digests = BaseOf(*old_process, /*digests=*/false);
  o.base = no_digests;
  o.base_refs_only = false;
  StoredSink without;
  PipelineStats stats;
  ASSERT_TRUE(Dump(*p, &without, o, &stats).ok());
  EXPECT_EQ(no_digests->chunk_reads.load(), 16u + 17u + 8u + 4u);  // all but the zeros
  EXPECT_EQ(DecodeAndCompare(without.bytes(), no_digests.get(), *p).base_refs, full.base_refs);
  o.base_refs_only = true;
  StoredSink sink;
  Status s = Dump(*p, &sink, o, &stats);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("no chunk digests"), std::string::npos) << s.ToString();
  EXPECT_TRUE(sink.bytes().empty());
}

//! Two dumps against the same base, on 1 and 4 threads, in both modes:
//! byte-identical.
TEST(IncrementalDump, OutputIsDeterministic) {
  auto p = MakeProcess(Layout());
  auto base = BaseOf(*p);
  NudgeWords(*p, 1, 8);
  NudgeWords(*p, 2, 3);
  for (bool refs_only : {false, true}) {
    PipelineOptions o = Options(4);
    o.base = base;
    o.base_refs_only = refs_only;
    StoredSink one, two;
    PipelineStats stats;
    ASSERT_TRUE(Dump(*p, &one, o, &stats).ok());
    o.threads = 1;
    ASSERT_TRUE(Dump(*p, &two, o, &stats).ok());
    EXPECT_EQ(one.bytes(), two.bytes()) << refs_only;
  }
}

//! Dedup and a base in one stream: a DEDUP_REF names only a DATA frame
//! inside the window the reader keeps, which counts DATA frames only. Here
//! "first" is stored, then three changed chunks that stay plain DATA (a
//! random rewrite: their deltas do not pay), then "again" repeats "first":
//! with a window of 2 the reader no longer holds "first", so "again" must
//! be stored, not referenced. With a window of 8 it is a reference.
TEST(IncrementalDump, DedupReferencesStayInsideTheReadersWindow) {
  std::vector<SimBoSpec> old_layout = {{"changed", 0, 3 * kChunk, DataKind::kRandom, 1}};
  auto old_process = MakeProcess(old_layout);
  auto base = BaseOf(*old_process);
  std::vector<SimBoSpec> layout = {{"first", 0, kChunk, DataKind::kRandom, 5},
                                   {"changed", 0, 3 * kChunk, DataKind::kRandom, 2},
                                   {"again", 0, kChunk, DataKind::kRandom, 5}};
  auto p = MakeProcess(layout);
  for (uint32_t window : {2u, 8u}) {
    PipelineOptions o = Options();
    o.base = base;
    o.dedup_window = window;
    StoredSink sink;
    PipelineStats stats;
    ASSERT_TRUE(Dump(*p, &sink, o, &stats).ok());
    Decoded d = DecodeAndCompare(sink.bytes(), base.get(), *p);
    EXPECT_EQ(d.count(FrameKind::kBaseDelta), 0u);
    EXPECT_EQ(d.count(FrameKind::kDedupRef), window == 2 ? 0u : 1u) << window;
    EXPECT_EQ(d.count(FrameKind::kData), window == 2 ? 5u : 4u) << window;
  }
}

//! Replicas and a base together (the usual data-parallel layout): chunks
//! equal to the base are references to it; replicas rewritten alike are a
//! DATA frame and a DEDUP_REF; replicas changed alike by a small step are
//! two BASE_DELTAs, since a DEDUP_REF names only a DATA frame; and the
//! stream decodes exactly.
TEST(IncrementalDump, DedupAndBaseInOneStreamDecodeExactly) {
  std::vector<SimBoSpec> layout = {{"gpu0/weights", 0, 8 * kChunk, DataKind::kBf16Weights, 1},
                                   {"gpu1/weights", 1, 8 * kChunk, DataKind::kBf16Weights, 1},
                                   {"gpu0/master", 0, 8 * kChunk, DataKind::kFp32Weights, 2},
                                   {"gpu1/master", 1, 8 * kChunk, DataKind::kFp32Weights, 2},
                                   {"gpu0/adam-m", 0, 8 * kChunk, DataKind::kAdamM, 3}};
  auto p = MakeProcess(layout, 2);
  auto base = BaseOf(*p);
  GenerateModelData(DataKind::kRandom, 42, 0, p->bytes(0));
  GenerateModelData(DataKind::kRandom, 42, 0, p->bytes(1));
  NudgeWords(*p, 2, 8);
  NudgeWords(*p, 3, 8);
  PipelineOptions o = Options();
  o.base = base;
  StoredSink sink;
  PipelineStats stats;
  ASSERT_TRUE(Dump(*p, &sink, o, &stats).ok());
  Decoded d = DecodeAndCompare(sink.bytes(), base.get(), *p);
  EXPECT_EQ(d.bytes(FrameKind::kData), 8 * kChunk);
  EXPECT_EQ(d.bytes(FrameKind::kDedupRef), 8 * kChunk);
  EXPECT_EQ(d.bytes(FrameKind::kBaseDelta), 16 * kChunk);
  EXPECT_EQ(d.bytes(FrameKind::kBaseRef), 8 * kChunk);
  EXPECT_EQ(stats.dedup_bytes, 8 * kChunk);
}

//! The base's index is charged to the budget before anything else: one that
//! does not fit leaves a clear error, and what the dump holds stays within
//! the budget.
TEST(IncrementalDump, TheBaseIsChargedToTheMemoryBudget) {
  auto p = MakeProcess(Layout());
  auto base = BaseOf(*p);
  NudgeWords(*p, 1, 8);
  PipelineOptions o = Options();
  o.base = base;
  StoredSink sink;
  PipelineStats stats;
  ASSERT_TRUE(Dump(*p, &sink, o, &stats).ok());
  EXPECT_LE(stats.budget_peak, o.max_memory);

  o.max_memory = 2 << 20;
  base->set_memory_bytes(3 << 20);
  StoredSink small;
  Status s = Dump(*p, &small, o, &stats);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("base"), std::string::npos) << s.ToString();
}

//! A full dump asked for digests: a DIGEST_BLOCK right after every
//! INDEX_BLOCK (also those written mid-object, when 4096 chunk frames are
//! unlisted), each entry the SHA-256 of its chunk, zeros for zero runs; the
//! stream still reads with the plain reader. To a sink that cannot be
//! indexed (a pipe) there are no index blocks and so no digests.
TEST(IncrementalDump, ChunkDigestsFollowEveryIndexBlock) {
  PipelineOptions o = Options();
  o.chunk_size = 256;
  o.chunk_digests = true;
  std::vector<SimBoSpec> layout = {{"many", 0, 5000 * 256, DataKind::kFp32Weights, 1},
                                   {"zeros", 0, 4 * 256, DataKind::kZeros, 0},
                                   {"copy", 0, 3 * 256, DataKind::kFp32Weights, 1}};
  auto p = MakeProcess(layout);
  StoredSink sink;
  PipelineStats stats;
  ASSERT_TRUE(Dump(*p, &sink, o, &stats).ok());
  Decoded d = DecodeAndCompare(sink.bytes(), nullptr, *p);
  EXPECT_EQ(d.index_blocks, 4u);  // many: 4096 + 904, zeros, copy
  EXPECT_EQ(d.digest_blocks, d.index_blocks);
  EXPECT_EQ(d.count(FrameKind::kDedupRef), 3u);
  std::vector<testing::TestObject> objects;
  Status read = testing::UnpackFromMemory(sink.bytes(), &objects);
  EXPECT_TRUE(read.ok()) << read.ToString();

  MemorySink pipe;
  ASSERT_TRUE(Dump(*p, &pipe, o, &stats).ok());
  Decoded unindexed = DecodeAndCompare(pipe.bytes(), nullptr, *p);
  EXPECT_EQ(unindexed.digest_blocks, 0u);
  EXPECT_EQ(unindexed.index_blocks, 0u);
}

//! The writer: with digests on, a chunk handed over without its SHA-256 is
//! a programming error, not a stream with a wrong digest.
TEST(IncrementalDump, WriterRefusesAChunkWithoutItsDigest) {
  StoredSink sink;
  StreamHeader header;
  header.flags = kStreamFlagSeekIndex;
  StreamWriter writer(&sink, header);
  writer.SetChunkDigests(true);
  ASSERT_TRUE(writer.chunk_digests());
  ASSERT_TRUE(writer.Start().ok());
  Result<uint32_t> id = writer.BeginObject(ObjectMetadata{"a", {}}, 8);
  ASSERT_TRUE(id.ok());
  const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EncodedChunk chunk;
  chunk.raw_hash = Hash64(bytes, 8);
  chunk.payload = bytes;
  Status s = writer.AddChunk(*id, 0, 8, chunk);
  EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
  const Sha256Digest sha = Sha256(bytes, 8);
  EXPECT_TRUE(writer.AddChunk(*id, 0, 8, chunk, &sha).ok());
  EXPECT_TRUE(writer.EndObject(*id).ok());
  EXPECT_TRUE(writer.Finish().ok());
  EXPECT_EQ(writer.stats().digest_blocks, 1u);
}

//! Inputs read in order (stdin, pipes) get digests too when asked; with a
//! base they are dumped against it (matched by name, as `streamer capture`
//! matches: IncrementalPack.InputsReadInOrderUseTheBaseToo shows the
//! references), and the stream decodes with it to the same bytes.
TEST(IncrementalDump, InputsReadInOrderGetDigestsAndABase) {
  const std::vector<uint8_t> bytes = testing::ModelBytes(DataKind::kFp32Weights, 5 * kChunk + 7, 3);
  std::vector<SequentialInput> inputs(2);
  inputs[0].metadata.name = "a";
  inputs[1].metadata.name = "zeros";
  inputs[0].open = [&]() -> Result<std::unique_ptr<ByteSource>> {
    return std::unique_ptr<ByteSource>(std::make_unique<MemorySource>(bytes));
  };
  const std::vector<uint8_t> zeros(3 * kChunk, 0);
  inputs[1].open = [&]() -> Result<std::unique_ptr<ByteSource>> {
    return std::unique_ptr<ByteSource>(std::make_unique<MemorySource>(zeros));
  };
  PipelineOptions o = Options();
  o.chunk_digests = true;
  StoredSink sink;
  PipelineStats stats;
  Status s = RunSequentialDump(inputs, &sink, o, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Decoded d;
  s = DecodeStream(sink.bytes(), nullptr, &d);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(d.objects["a"], bytes);
  EXPECT_EQ(d.index_blocks, 2u);
  EXPECT_EQ(d.digest_blocks, 2u);

  auto p = MakeProcess({{"a", 0, kChunk, DataKind::kFp32Weights, 1}});
  auto base = BaseOf(*p);
  o.base = base;
  StoredSink incremental;
  s = RunSequentialDump(inputs, &incremental, o, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Decoded back;
  s = DecodeStream(incremental.bytes(), base.get(), &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(back.base.has_value());
  EXPECT_EQ(back.objects["a"], bytes);
  EXPECT_EQ(back.objects["zeros"], zeros);
  EXPECT_EQ(back.digest_blocks, 2u);  // a base brings digests
}

// Dumps object 1 of `p` (the master weights), through the graph or, with
// `in_order`, as an input read in order.
Status DumpWeights(SimProcess& p, bool in_order, const PipelineOptions& o, ByteSink* sink, PipelineStats* stats) {
  if (!in_order) return Dump(p, sink, o, stats);
  std::vector<SequentialInput> inputs(1);
  inputs[0].metadata = ObjectMetadata{p.specs()[1].name, {}};
  const std::span<const uint8_t> bytes = p.bytes(1);  // MemorySource reads it in place
  inputs[0].open = [bytes]() -> Result<std::unique_ptr<ByteSource>> {
    return std::unique_ptr<ByteSource>(std::make_unique<MemorySource>(bytes));
  };
  return RunSequentialDump(inputs, sink, o, stats);
}

//! A thread coding against the base waits for each base chunk it reads;
//! where the base asks for reads in flight (on S3), the dump runs at least
//! that many threads, whatever -j says, and their reads overlap: in the
//! graph (RunDump) and in the dump of inputs read in order. Where the budget
//! feeds fewer than the base asks for, it runs as many as it feeds, and says
//! nothing: no thread asked for (-j) was cut.
TEST(IncrementalDump, ThreadsReadingTheBaseAreAsManyAsItAsks) {
  auto p = MakeProcess(Layout());
  auto base = BaseOf(*p);
  NudgeWords(*p, 1, 16);  // master-fp32: every chunk a delta, read from the base
  for (unsigned asked : {4u, 256u}) {
    for (bool in_order : {false, true}) {
      SCOPED_TRACE(std::string(in_order ? "RunSequentialDump" : "RunDump") + ", the base asks for " +
                   std::to_string(asked));
      auto probe = std::make_shared<testing::ConcurrencyProbe>(base, std::chrono::seconds(2), asked);
      PipelineOptions o = Options(1);
      o.base = probe;
      std::vector<std::string> notes;
      o.note = [&](const std::string& note) { notes.push_back(note); };
      StoredSink sink;
      PipelineStats stats;
      Status s = DumpWeights(*p, in_order, o, &sink, &stats);
      ASSERT_TRUE(s.ok()) << s.ToString();
      if (asked == 4) {
        EXPECT_EQ(stats.threads, 4u);
      } else {  // the 32 MiB budget feeds a few more than 4, far fewer than 256
        EXPECT_GT(stats.threads, 4u);
        EXPECT_LT(stats.threads, 64u);
      }
      EXPECT_TRUE(notes.empty()) << notes[0];
      EXPECT_GE(probe->most(), 2) << "the base's chunks were read one at a time";
      Decoded d;
      s = DecodeStream(sink.bytes(), base.get(), &d);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const std::span<const uint8_t> want = p->bytes(1);
      EXPECT_TRUE(d.objects[p->specs()[1].name] == std::vector<uint8_t>(want.begin(), want.end()));
      // Every chunk of the nudged weights is coded against the base.
      EXPECT_EQ(stats.base_delta_bytes, want.size());
    }
  }
}

//! Against a real stored base (a file, opened by OpenBaseStream through a
//! counting source): references-only reads, after opening (its index and
//! digests), exactly the frames of the chunks it references, to prove them;
//! full mode the changed chunks' frames besides. The incremental stream
//! names the base's id, and is itself a base for a next one (a chain of
//! two).
TEST(IncrementalDump, AgainstAStoredBaseReferencesOnlyReadsOnlyTheChunksItReferences) {
  testing::TempDir dir;
  auto p = MakeProcess(Layout());
  {
    StoredSink sink;
    PipelineStats stats;
    PipelineOptions o = Options();
    o.chunk_digests = true;
    ASSERT_TRUE(Dump(*p, &sink, o, &stats).ok());
    testing::WriteFileBytes(dir.File("base.vfs"), sink.bytes());
  }
  std::shared_ptr<CountingRandomAccess> counting;
  BaseOpenOptions open;
  open.open = [&](const std::string& location) -> Result<std::shared_ptr<RandomAccessSource>> {
    VF_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessSource> file, OpenFileRandomAccess(location));
    auto c = std::make_shared<CountingRandomAccess>(std::shared_ptr<RandomAccessSource>(std::move(file)));
    if (!counting) counting = c;
    return std::shared_ptr<RandomAccessSource>(c);
  };
  Result<std::shared_ptr<const BaseStream>> base = OpenBaseStream(dir.File("base.vfs"), open);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ASSERT_TRUE((*base)->has_digests());
  NudgeWords(*p, 1, 4);

  PipelineOptions o = Options();
  o.base = *base;
  o.base_refs_only = true;
  const uint64_t after_open = counting->bytes();
  StoredSink refs;
  PipelineStats stats;
  ASSERT_TRUE(Dump(*p, &refs, o, &stats).ok());
  const uint64_t refs_read = counting->bytes() - after_open;
  EXPECT_EQ(stats.base_ref_bytes, (16 + 8 + 4) * kChunk);
  const std::set<std::pair<std::string, uint64_t>> referenced =
      DecodeAndCompare(refs.bytes(), base->get(), *p).base_refs;
  uint64_t referenced_frames = 0, changed_frames = 0;
  for (const SeekIndexObject& object : (*base)->index().index.objects)
    for (const SeekIndexChunk& c : object.chunks) {
      if (referenced.count({object.metadata.name, c.object_offset})) referenced_frames += c.frame_bytes();
      if (object.metadata.name == "master-fp32") changed_frames += c.frame_bytes();
    }
  EXPECT_EQ(refs_read, referenced_frames);

  o.base_refs_only = false;
  StoredSink full;
  const uint64_t before_full = counting->bytes();
  ASSERT_TRUE(Dump(*p, &full, o, &stats).ok());
  const uint64_t read = counting->bytes() - before_full;
  EXPECT_EQ(read, referenced_frames + changed_frames);
  EXPECT_EQ(stats.base_delta_bytes, 16 * kChunk + 999);

  Decoded d = DecodeAndCompare(full.bytes(), base->get(), *p);
  ASSERT_TRUE(d.base.has_value());
  EXPECT_EQ(d.base->base_id, (*base)->id());

  // The incremental stream as the base of the next: a chain of two.
  testing::WriteFileBytes(dir.File("second.vfs"), full.bytes());
  Result<std::shared_ptr<const BaseStream>> second = OpenBaseStream(dir.File("second.vfs"), open);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)->DescriptorForDependent().chain_length, 2u);
  NudgeWords(*p, 2, 2);
  o.base = *second;
  StoredSink third;
  ASSERT_TRUE(Dump(*p, &third, o, &stats).ok());
  Decoded t = DecodeAndCompare(third.bytes(), second->get(), *p);
  EXPECT_EQ(t.bytes(FrameKind::kBaseDelta), 8 * kChunk);
  EXPECT_EQ(t.bytes(FrameKind::kBaseRef), (16 + 16 + 4) * kChunk + 999);
}

}  // namespace
}  // namespace vramflow
