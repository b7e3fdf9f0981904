// SPDX-License-Identifier: MIT
// libFuzzer target: untrusted bytes through the seek-index readers.
//
// Every input goes
//   1. through DecodeSeekIndex as a SEEK_INDEX payload; an index it accepts
//      must encode again and decode to the same index;
//   2. through ReadSeekIndex as a whole stored stream read from its two ends
//      (what `inspect` and `unpack --object` do with a file or S3 object);
//      an index it accepts must describe frames inside the stream, and the
//      first and the last object it lists are read back through a sub-stream
//      (OpenSubStream + ReadStream, what `unpack --object` does). Read again
//      with the DIGEST_BLOCKs (what opening a base does), it must give the
//      same index and stream id, one digest per chunk, zeros for ZERO_RUNs.
// An input that starts with the stream magic also has its SEEK_INDEX payload
// and the INDEX_BLOCK frames it names "repaired" (frame hashes and header
// checksums recomputed), as has the DIGEST_BLOCK after each block, and read
// again, so mutations of the index itself get past the checksums.
//
// With VRAMFLOW_FUZZ_WRITE_SEEDS=DIR in the environment the binary writes
// seed streams with indexes (several objects, zero runs, dedup references,
// with and without DIGEST_BLOCKs) and bare index payloads into DIR and exits.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "common/sha256.h"
#include "datagen/model_data.h"
#include "streamer/format/seek_index.h"
#include "streamer/format/stream_reader.h"
#include "streamer/format/stream_writer.h"
#include "streamer/format/sub_stream.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

[[noreturn]] void Broken(const char* what) {
  std::fprintf(stderr, "seek_index_fuzz: broken promise: %s\n", what);
  std::abort();
}

void DecodeIndex(std::span<const uint8_t> payload) {
  Result<SeekIndex> index = DecodeSeekIndex(payload);
  if (!index.ok()) return;
  Result<std::vector<uint8_t>> again = EncodeSeekIndex(*index);
  if (!again.ok()) Broken("an accepted index does not encode again");
  Result<SeekIndex> back = DecodeSeekIndex(*again);
  if (!back.ok() || !(*back == *index)) Broken("an accepted index does not survive encode + decode");
}

void ReadStored(std::span<const uint8_t> stream) {
  auto at = std::make_shared<MemoryRandomAccess>(std::vector<uint8_t>(stream.begin(), stream.end()));
  Result<StoredStreamIndex> stored = ReadSeekIndex(*at);
  if (!stored.ok()) return;
  for (const SeekIndexObject& o : stored->index.objects) {
    if (o.end_offset + kFrameHeaderSize > stored->index_offset) Broken("an object's frames run past the index");
    for (const SeekIndexChunk& c : o.chunks)
      if (c.stream_offset + c.frame_bytes() > stored->index_offset) Broken("a chunk frame runs past the index");
  }
  Result<StoredStreamIndex> with_digests = ReadSeekIndex(*at, SeekIndexReadOptions{.digests = true});
  if (with_digests.ok()) {
    if (!(with_digests->index == stored->index) || with_digests->id != stored->id)
      Broken("reading the digests changed the index or the stream id");
    if (with_digests->has_digests) {
      if (with_digests->digests.size() != stored->index.objects.size()) Broken("not one digest list per object");
      for (size_t i = 0; i < stored->index.objects.size(); ++i) {
        const std::vector<SeekIndexChunk>& chunks = stored->index.objects[i].chunks;
        if (with_digests->digests[i].size() != chunks.size()) Broken("not one digest per chunk");
        for (size_t c = 0; c < chunks.size(); ++c)
          if (chunks[c].kind == FrameKind::kZeroRun && with_digests->digests[i][c] != Sha256Digest{})
            Broken("a ZERO_RUN's digest is not zero");
      }
    } else if (!with_digests->digests.empty()) {
      Broken("digests without DIGEST_BLOCKs");
    }
  }
  if (stored->index.objects.empty()) return;
  SubStreamOptions options;
  options.fetch.memory_budget = 1 << 20;
  options.fetch.request_size = 64 << 10;
  options.fetch.concurrency = 1;
  for (uint32_t id : {stored->index.objects.front().id, stored->index.objects.back().id}) {
    SubStreamPlan plan;
    Result<std::unique_ptr<ByteSource>> sub = OpenSubStream(at, *stored, {id}, options, &plan);
    if (!sub.ok()) continue;
    StreamVisitor nothing;
    ReadOptions read;
    read.decode = true;
    (void)ReadStream(**sub, nothing, read);
  }
}

// Recomputes the SEEK_INDEX frame's hash and header checksum, where the
// stream's tail lets ReadSeekIndex find the frame.
void RepairAndRead(std::vector<uint8_t> stream) {
  constexpr size_t kEnd = kFrameHeaderSize + kStreamEndPayloadSize;
  if (stream.size() < kStreamHeaderSize + kEnd + 16 + kFrameHeaderSize) return;
  const size_t end = stream.size() - kEnd;
  uint64_t payload_size = 0;
  std::memcpy(&payload_size, stream.data() + end - 16, 8);  // little-endian hosts only, as the fuzz build is
  if (payload_size > end - kStreamHeaderSize - kFrameHeaderSize) return;
  const size_t at = end - payload_size - kFrameHeaderSize;
  FrameHeader h;
  if (!DecodeFrameHeader(stream.data() + at, &h).ok()) {
    h = FrameHeader{};
    h.kind = static_cast<uint8_t>(FrameKind::kSeekIndex);
  }
  h.payload_size = static_cast<uint32_t>(payload_size);
  h.raw_hash = Hash64(stream.data() + at + kFrameHeaderSize, payload_size);
  EncodeFrameHeader(h, stream.data() + at);
  // The INDEX_BLOCK frames it names get their hashes repaired too, so
  // mutated chunk records reach the checks of the index as a whole.
  Result<SeekIndex> index =
      DecodeSeekIndex(std::span<const uint8_t>(stream).subspan(at + kFrameHeaderSize, payload_size));
  if (index.ok()) {
    for (const SeekIndexObject& o : index->objects) {
      for (const IndexBlockRef& b : o.blocks) {
        FrameHeader bh;
        if (b.stream_offset > at || b.frame_bytes() > at - b.stream_offset) continue;
        if (!DecodeFrameHeader(stream.data() + b.stream_offset, &bh).ok()) continue;
        if (bh.payload_size != b.frame_bytes() - kFrameHeaderSize) continue;
        bh.raw_hash = Hash64(stream.data() + b.stream_offset + kFrameHeaderSize, bh.payload_size);
        EncodeFrameHeader(bh, stream.data() + b.stream_offset);
        const uint64_t next = b.stream_offset + b.frame_bytes();
        FrameHeader dh;
        if (next + kFrameHeaderSize > at || !DecodeFrameHeader(stream.data() + next, &dh).ok() ||
            dh.kind != static_cast<uint8_t>(FrameKind::kDigestBlock) || dh.payload_size > at - next - kFrameHeaderSize)
          continue;
        dh.raw_hash = Hash64(stream.data() + next + kFrameHeaderSize, dh.payload_size);
        EncodeFrameHeader(dh, stream.data() + next);
      }
    }
  }
  ReadStored(stream);
}

std::vector<uint8_t> SeedStream(int objects, bool dedup, bool digests) {
  MemorySink sink;
  StreamHeader header;
  header.flags = kStreamFlagSeekIndex | (dedup ? kStreamFlagDedup : 0);
  // With three objects the last reference is exactly 3 DATA frames back, so
  // the window check sits right at its edge.
  header.dedup_window = dedup ? 3 : 0;
  header.producer = "seek_index_fuzz seeds";
  StreamWriter writer(&sink, header);
  writer.SetChunkDigests(digests);
  ChunkEncoder encoder(EncoderOptions{});
  auto check = [](const Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "seek_index_fuzz: writing seeds: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  };
  constexpr uint32_t kChunk = 4096;
  check(writer.Start());
  uint32_t first = 0;
  std::vector<uint64_t> first_hashes;
  std::vector<uint8_t> first_bytes;
  for (int i = 0; i < objects; ++i) {
    std::vector<uint8_t> bytes(3 * kChunk);
    GenerateModelData(DataKind::kBf16Weights, i + 1, 0, bytes);
    std::fill(bytes.begin() + kChunk, bytes.begin() + 2 * kChunk, 0);
    Result<uint32_t> id = writer.BeginObject(
        ObjectMetadata{"gpu" + std::to_string(i % 2) + "/bo-" + std::to_string(i), {{"gpu", std::to_string(i % 2)}}},
        bytes.size());
    check(id.status());
    for (uint64_t off = 0; off < bytes.size(); off += kChunk) {
      if (dedup && i > 0 && off == 0) {
        DedupRef ref{first, 0, HashContent128(first_bytes.data(), kChunk)};
        const Sha256Digest sha = Sha256(first_bytes.data(), kChunk);
        check(writer.AddDedupRef(*id, 0, kChunk, first_hashes[0], ref, &sha));
        continue;
      }
      EncodedChunk chunk;
      std::span<const uint8_t> raw(i > 0 && off == 0 ? first_bytes.data() : bytes.data() + off, kChunk);
      check(encoder.Encode(raw, &chunk));
      if (i == 0) first_hashes.push_back(chunk.raw_hash);
      const Sha256Digest sha = Sha256(raw);
      check(writer.AddChunk(*id, off, kChunk, chunk, chunk.zero_run ? nullptr : &sha));
    }
    if (i == 0) {
      first = *id;
      first_bytes = bytes;
    }
    check(writer.EndObject(*id));
  }
  check(writer.Finish());
  return sink.bytes();
}

void WriteSeeds(const std::string& dir) {
  int n = 0;
  auto write = [&](const std::vector<uint8_t>& bytes) {
    std::ofstream(dir + "/seed-" + std::to_string(n++), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  };
  for (int objects : {0, 1, 3}) {
    for (bool dedup : {false, true}) {
      write(SeedStream(objects, dedup, true));
      std::vector<uint8_t> stream = SeedStream(objects, dedup, false);
      write(stream);
      MemoryRandomAccess at(stream);
      Result<StoredStreamIndex> stored = ReadSeekIndex(at);
      if (!stored.ok()) {
        std::fprintf(stderr, "seek_index_fuzz: a seed has no readable index: %s\n", stored.status().ToString().c_str());
        std::exit(1);
      }
      Result<std::vector<uint8_t>> payload = EncodeSeekIndex(stored->index);
      if (payload.ok()) write(*payload);
    }
  }
}

}  // namespace
}  // namespace vramflow

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("VRAMFLOW_FUZZ_WRITE_SEEDS")) {
    vramflow::WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> input(data, size);
  vramflow::DecodeIndex(input);
  vramflow::ReadStored(input);
  if (size >= 8 && std::memcmp(data, vramflow::kStreamMagic.data(), 8) == 0)
    vramflow::RepairAndRead(std::vector<uint8_t>(data, data + size));
  return 0;
}
