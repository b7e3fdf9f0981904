// SPDX-License-Identifier: MIT
// ReadStreamDecodingAhead: the visitor sees exactly what ReadStream with
// decoding shows it (events, order, decoded bytes), a corrupt payload fails
// naming its frame, a visitor's error stops the read, a budget that holds
// one frame in flight is enough, and payloads read in place (a mapped file)
// are let go only once handed on, and frames larger than the header's
// chunk size are read where only one thread's buffers for them fit.
#include "streamer/decode_ahead.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "common/sha256.h"
#include "streamer/format/dedup_window.h"
#include "streamer/format/frame_reader.h"
#include "streamer/format/stream_writer.h"
#include "tests/support/poisoning_source.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using testing::ModelBytes;
using testing::PoisoningSource;

constexpr uint32_t kChunk = 64 * 1024;

// Three objects: model-like fp32 weights (planar DATA frames), zeros (a
// ZERO_RUN) and one whose first chunk is a DEDUP_REF to the first's, with
// their chunks interleaved.
// With `digests`, every chunk's SHA-256 goes into DIGEST_BLOCKs (the
// stream needs kStreamFlagSeekIndex for them).
std::vector<uint8_t> MixedStream(uint32_t flags = kStreamFlagDedup, bool digests = false) {
  const std::vector<uint8_t> weights = ModelBytes(DataKind::kFp32Weights, 9 * kChunk + 100, 1);
  const std::vector<uint8_t> zeros(3 * kChunk, 0);
  std::vector<uint8_t> copy(weights.begin(), weights.begin() + kChunk);
  const std::vector<uint8_t> tail = ModelBytes(DataKind::kBf16Weights, 2 * kChunk, 2);
  copy.insert(copy.end(), tail.begin(), tail.end());
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = kChunk;
  header.flags = flags;
  header.dedup_window = 16;
  StreamWriter writer(&sink, header);
  writer.SetChunkDigests(digests);
  ChunkEncoder encoder(EncoderOptions{});
  EXPECT_TRUE(writer.Start().ok());
  Result<uint32_t> w = writer.BeginObject(ObjectMetadata{"weights", {}}, weights.size());
  Result<uint32_t> z = writer.BeginObject(ObjectMetadata{"zeros", {}}, zeros.size());
  Result<uint32_t> c = writer.BeginObject(ObjectMetadata{"copy", {}}, copy.size());
  EXPECT_TRUE(w.ok() && z.ok() && c.ok());
  auto add = [&](uint32_t id, const std::vector<uint8_t>& bytes, uint64_t off) {
    const size_t n = std::min<uint64_t>(kChunk, bytes.size() - off);
    EncodedChunk chunk;
    const std::span<const uint8_t> raw(bytes.data() + off, n);
    EXPECT_TRUE(encoder.Encode(raw, &chunk).ok());
    const Sha256Digest sha256 = Sha256(raw);
    EXPECT_TRUE(writer.AddChunk(id, off, n, chunk, digests && !chunk.zero_run ? &sha256 : nullptr).ok());
  };
  add(*w, weights, 0);
  DedupRef ref{*w, 0, HashContent128(copy.data(), kChunk)};
  const Sha256Digest copied = Sha256(copy.data(), kChunk);
  EXPECT_TRUE(writer.AddDedupRef(*c, 0, kChunk, Hash64(copy.data(), kChunk), ref, digests ? &copied : nullptr).ok());
  for (uint64_t off = kChunk; off < weights.size(); off += kChunk) {
    add(*w, weights, off);
    if (off - kChunk < zeros.size()) add(*z, zeros, off - kChunk);
    if (off < copy.size()) add(*c, copy, off);
  }
  EXPECT_TRUE(writer.EndObject(*z).ok());
  EXPECT_TRUE(writer.EndObject(*c).ok());
  EXPECT_TRUE(writer.EndObject(*w).ok());
  EXPECT_TRUE(writer.Finish().ok());
  return sink.bytes();
}

// Every event as a line, DATA bytes as their hash; can fail at the
// `fail_at`-th DATA event.
class Recorder final : public StreamVisitor {
 public:
  explicit Recorder(size_t fail_at = SIZE_MAX) : fail_at_(fail_at) {}
  Status OnStreamHeader(const StreamHeader& h) override {
    events.push_back("header " + std::to_string(h.chunk_size));
    return Status::Ok();
  }
  Status OnObjectBegin(const ObjectState& o) override {
    events.push_back("begin " + o.metadata.name);
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& e) override {
    std::string line = FrameKindName(e.header.kind) + " " + e.object.metadata.name + " " +
                       std::to_string(e.header.offset) + " " + std::to_string(e.header.raw_size) + " at " +
                       std::to_string(e.stream_offset) + " data " + std::to_string(e.data.size());
    if (!e.data.empty()) line.append(" ").append(HexHash(Hash64(e.data.data(), e.data.size())));
    if (e.dedup) line.append(" ref ").append(std::to_string(e.dedup->source_object_id));
    events.push_back(line);
    if (e.header.kind == static_cast<uint8_t>(FrameKind::kData) && ++data_ == fail_at_)
      return Status::InvalidArgument("the recorder stops here");
    return Status::Ok();
  }
  Status OnObjectEnd(const ObjectState& o) override {
    events.push_back("end " + o.metadata.name);
    return Status::Ok();
  }
  Status OnStreamEnd(const StreamTotals& t) override {
    events.push_back("stream end " + std::to_string(t.raw_bytes));
    return Status::Ok();
  }
  std::vector<std::string> events;

 private:
  size_t fail_at_;
  size_t data_ = 0;
};

// Options for reading on `threads` threads, charging `budget` if given.
DecodeAheadOptions Ahead(unsigned threads, MemoryBudget* budget = nullptr) {
  DecodeAheadOptions options;
  options.threads = threads;
  options.read.budget = budget;
  return options;
}

std::vector<std::string> Serially(const std::vector<uint8_t>& stream) {
  MemorySource source(stream);
  Recorder recorder;
  Status s = ReadStream(source, recorder);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return recorder.events;
}

TEST(DecodeAheadTest, VisitorSeesWhatTheSerialReaderShowsIt) {
  const std::vector<uint8_t> stream = MixedStream();
  const std::vector<std::string> serial = Serially(stream);
  size_t zero_runs = 0, refs = 0, data = 0;
  for (const std::string& e : serial) {
    zero_runs += e.rfind("ZERO_RUN", 0) == 0;
    refs += e.rfind("DEDUP_REF", 0) == 0;
    data += e.rfind("DATA", 0) == 0;
  }
  ASSERT_EQ(zero_runs, 1u);  // the fixture has every kind of chunk frame
  ASSERT_EQ(refs, 1u);
  ASSERT_GE(data, 10u);
  for (unsigned threads : {2u, 3u, 8u}) {
    for (size_t max_read : {SIZE_MAX, size_t{1000}}) {  // whole reads, short reads
      MemorySource source(stream, max_read);
      Recorder recorder;
      Status s = ReadStreamDecodingAhead(source, recorder, Ahead(threads));
      ASSERT_TRUE(s.ok()) << threads << " threads: " << s.ToString();
      EXPECT_EQ(recorder.events, serial) << threads << " threads, reads of " << max_read;
    }
  }
}

// With check_digests (as verify reads), DIGEST_BLOCKs are checked while
// decoding ahead as ReadStream checks them: a stream whose digests match
// reads as it does serially; one with an entry that does not (its block
// re-hashed, so that only the chunk's bytes can tell) fails with
// ReadStream's error, naming the DIGEST_BLOCK.
TEST(DecodeAheadTest, DigestBlocksAreCheckedAsTheSerialReaderChecksThem) {
  const std::vector<uint8_t> stream = MixedStream(kStreamFlagDedup | kStreamFlagSeekIndex, /*digests=*/true);
  const std::vector<std::string> serial = Serially(stream);
  for (unsigned threads : {2u, 8u}) {
    MemorySource source(stream);
    Recorder recorder;
    Status s = ReadStreamDecodingAhead(source, recorder, Ahead(threads));
    ASSERT_TRUE(s.ok()) << threads << " threads: " << s.ToString();
    EXPECT_EQ(recorder.events, serial) << threads << " threads";
  }
  // The last entry of each DIGEST_BLOCK of "weights" (all DATA frames)
  // changed, each block re-hashed.
  std::vector<uint8_t> broken = stream;
  ASSERT_GE(testing::BreakLastDigestOfEachBlock(&broken, /*object_id=*/1), 1);
  MemorySource serial_source(broken);
  Recorder serial_recorder;
  const Status expected = ReadStream(serial_source, serial_recorder);
  ASSERT_EQ(expected.code(), Status::Code::kCorruption) << expected.ToString();
  ASSERT_NE(expected.message().find("does not match the SHA-256 of the chunk's bytes"), std::string::npos)
      << expected.ToString();
  for (unsigned threads : {2u, 8u}) {
    MemorySource source(broken);
    Recorder recorder;
    Status s = ReadStreamDecodingAhead(source, recorder, Ahead(threads));
    EXPECT_EQ(s.code(), expected.code()) << s.ToString();
    EXPECT_EQ(s.message(), expected.message()) << threads << " threads";
  }
}

size_t DataFrames(const std::vector<std::string>& events) {
  return static_cast<size_t>(
      std::count_if(events.begin(), events.end(), [](const std::string& e) { return e.rfind("DATA", 0) == 0; }));
}

// The reference reader reads each DATA payload in place from a source that
// can, decodes it there, and lets it go once its event is over: a payload
// let go too early would be poisoned before its hash is checked.
TEST(DecodeAheadTest, SerialReaderDecodesPayloadsInPlaceAndLetsEachGoAfterIt) {
  const std::vector<uint8_t> stream = MixedStream();
  const std::vector<std::string> serial = Serially(stream);
  PoisoningSource source(stream);
  Recorder recorder;
  Status s = ReadStream(source, recorder);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(recorder.events, serial);
  EXPECT_EQ(source.in_place_reads(), DataFrames(serial)) << "every DATA payload read in place";
  EXPECT_FALSE(source.passed_unread());
  // Let go up to the end of the last DATA payload: past the stream's middle.
  EXPECT_GT(source.poisoned(), stream.size() / 2);
}

// Decoding ahead holds payloads read in place until their chunks are handed
// on, however many threads decode them and however far they run ahead.
TEST(DecodeAheadTest, PayloadsReadInPlaceAreLetGoOnlyOnceHandedOn) {
  const std::vector<uint8_t> stream = MixedStream();
  const std::vector<std::string> serial = Serially(stream);
  for (unsigned threads : {2u, 3u, 8u}) {
    for (int round = 0; round < 5; ++round) {
      PoisoningSource source(stream);
      Recorder recorder;
      Status s = ReadStreamDecodingAhead(source, recorder, Ahead(threads));
      ASSERT_TRUE(s.ok()) << threads << " threads: " << s.ToString();
      EXPECT_EQ(recorder.events, serial) << threads << " threads";
      EXPECT_EQ(source.in_place_reads(), DataFrames(serial)) << "every DATA payload read in place";
      EXPECT_FALSE(source.passed_unread());
      EXPECT_GT(source.poisoned(), 0u) << "payloads handed on are let go";
    }
  }
}

TEST(DecodeAheadTest, CorruptPayloadFailsNamingItsFrame) {
  std::vector<uint8_t> stream = MixedStream();
  // The 7th frame's payload (a DATA frame of "weights" in the middle of the
  // stream), one byte in its middle flipped.
  MemorySource source(stream);
  FrameReader reader(&source);
  StreamHeader sh;
  ASSERT_TRUE(reader.ReadStreamHeader(&sh).ok());
  FrameHeader h;
  uint64_t at = 0;
  for (int i = 0; i <= 7; ++i) {
    bool end = false;
    ASSERT_TRUE(reader.ReadFrameHeader(&h, &end).ok());
    at = reader.frame_offset();
    std::vector<uint8_t> payload(h.payload_size);
    ASSERT_TRUE(reader.ReadPayload(payload).ok());
  }
  ASSERT_EQ(h.kind, static_cast<uint8_t>(FrameKind::kData));
  stream[at + kFrameHeaderSize + h.payload_size / 2] ^= 0x10;
  for (unsigned threads : {2u, 4u}) {
    MemorySource bad(stream);
    Recorder recorder;
    Status s = ReadStreamDecodingAhead(bad, recorder, Ahead(threads));
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("frame 7 at stream offset " + std::to_string(at)), std::string::npos) << s.ToString();
    // Nothing at or after the bad frame reached the visitor.
    for (const std::string& e : recorder.events)
      EXPECT_EQ(e.find(" at " + std::to_string(at) + " "), std::string::npos) << e;
  }
}

TEST(DecodeAheadTest, VisitorErrorStopsTheRead) {
  const std::vector<uint8_t> stream = MixedStream();
  const std::vector<std::string> serial = Serially(stream);
  MemorySource source(stream);
  Recorder recorder(/*fail_at=*/3);
  Status s = ReadStreamDecodingAhead(source, recorder, Ahead(2));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("the recorder stops here"), std::string::npos) << s.ToString();
  // What it saw is what the serial reader showed, up to the failing event.
  ASSERT_LT(recorder.events.size(), serial.size());
  EXPECT_TRUE(std::equal(recorder.events.begin(), recorder.events.end(), serial.begin()));
}

TEST(DecodeAheadTest, BudgetForOneFrameInFlightIsEnoughAndChargesAreRefunded) {
  const std::vector<uint8_t> stream = MixedStream();
  const std::vector<std::string> serial = Serially(stream);
  // What the serial reader needs: its records (an eighth), one payload and
  // one decode buffer, and a little.
  const uint64_t limit = 8 * (4 * kChunk + ChunkDecoder::MemoryBytes(kChunk) + (64 << 10));
  MemoryBudget budget(limit);
  MemorySource source(stream);
  Recorder recorder;
  Status s = ReadStreamDecodingAhead(source, recorder, Ahead(8, &budget));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(recorder.events, serial);
  EXPECT_EQ(budget.in_use(), 0u);

  // A budget that feeds one thread only, for frames of the header's chunk
  // size: read serially, as ReadStream reads it, which needs the least.
  MemoryBudget tiny(limit / 8 + 2 * kChunk);
  MemorySource again(stream);
  Recorder alone;
  s = ReadStreamDecodingAhead(again, alone, Ahead(2, &tiny));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(alone.events, serial);
  EXPECT_EQ(tiny.in_use(), 0u);
}

// A stream whose header says chunks of 4 KiB (informational only, FORMAT.md)
// whose first frame holds `head` bytes (none with 0), and then `frames`
// frames of `large` bytes each.
std::vector<uint8_t> UnderstatedChunkStream(uint32_t head, uint32_t large, int frames) {
  const std::vector<uint8_t> small = ModelBytes(DataKind::kFp32Weights, head, 3);
  const std::vector<uint8_t> body = ModelBytes(DataKind::kBf16Weights, uint64_t{large} * frames, 4);
  MemorySink sink;
  StreamHeader header;
  header.chunk_size = 4096;
  StreamWriter writer(&sink, header);
  ChunkEncoder encoder(EncoderOptions{});
  EXPECT_TRUE(writer.Start().ok());
  for (const std::vector<uint8_t>* bytes : {&small, &body}) {
    if (bytes->empty()) continue;
    Result<uint32_t> id = writer.BeginObject(ObjectMetadata{bytes == &small ? "head" : "body", {}}, bytes->size());
    EXPECT_TRUE(id.ok());
    const size_t step = bytes == &small ? head : large;
    for (size_t off = 0; off < bytes->size(); off += step) {
      EncodedChunk chunk;
      EXPECT_TRUE(encoder.Encode(std::span<const uint8_t>(bytes->data() + off, step), &chunk).ok());
      EXPECT_TRUE(writer.AddChunk(*id, off, step, chunk).ok());
    }
    EXPECT_TRUE(writer.EndObject(*id).ok());
  }
  EXPECT_TRUE(writer.Finish().ok());
  return sink.bytes();
}

TEST(DecodeAheadTest, FramesLargerThanTheHeaderSaysAreDecodedOnOneThreadWhereMoreDoNotFit) {
  // This stream's header says 4 KiB, and after a first frame of 4 KiB it
  // carries frames of 1 MiB. The threads are fitted for the first. Where the
  // later frames do not fit them, the reading thread goes on alone, as
  // ReadStream reads the stream.
  constexpr uint32_t kLarge = 1 << 20;
  const std::vector<uint8_t> stream = UnderstatedChunkStream(4096, kLarge, 6);

  // Four threads' decoders and frames of 1 MiB do not fit; one's do.
  const uint64_t limit = 12 << 20;
  ASSERT_GT(4 * (ChunkDecoder::MemoryBytes(kLarge) + 4 * kLarge), limit);
  MemoryBudget budget(limit);
  MemorySource source(stream);
  Recorder recorder;
  std::vector<std::string> notes;
  DecodeAheadOptions options = Ahead(4, &budget);
  options.note = [&](const std::string& note) { notes.push_back(note); };
  Status s = ReadStreamDecodingAhead(source, recorder, options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(recorder.events, Serially(stream));
  EXPECT_EQ(budget.in_use(), 0u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("decoding on 1 thread from frame"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("larger than the stream header's chunk size"), std::string::npos) << notes[0];
}

// Whether ReadStream, decoding, reads `stream` within a budget of `limit`;
// the error it gives otherwise.
Status ReadSerially(const std::vector<uint8_t>& stream, uint64_t limit) {
  MemoryBudget budget(limit);
  MemorySource source(stream);
  Recorder recorder;
  return ReadStream(source, recorder, ReadOptions{.decode = true, .budget = &budget, .open_base = {}});
}

// The least budget within which ReadStream reads `stream`: what -j 1 needs.
uint64_t LeastSerialBudget(const std::vector<uint8_t>& stream) {
  uint64_t fails = 0, reads = uint64_t{1} << 30;
  while (reads - fails > 1) {
    const uint64_t mid = fails + (reads - fails) / 2;
    (ReadSerially(stream, mid).ok() ? reads : fails) = mid;
  }
  return reads;
}

TEST(DecodeAheadTest, AnyThreadCountGivesTheVerdictOfOneThread) {
  // Issue 55, item 9: a header saying 4 KiB chunks over frames of 1 MiB
  // (from the first frame on, or after one of 4 KiB). Within any budget
  // that ReadStream (one thread) reads the stream in, decoding ahead reads
  // it too, on fewer threads where the frames do not fit those asked for
  // (one at least); within less, both fail on the budget.
  constexpr uint32_t kLarge = 1 << 20;
  bool cut_to_several = false;  // threads fitted for 4 KiB, then fewer but more than one for 1 MiB
  for (uint32_t head : {0u, 4096u}) {
    const std::vector<uint8_t> stream = UnderstatedChunkStream(head, kLarge, 4);
    const std::vector<std::string> serial = Serially(stream);
    const uint64_t least = LeastSerialBudget(stream);
    const Status short_of_budget = ReadSerially(stream, least - 1);
    for (unsigned threads : {2u, 3u, 8u}) {
      for (uint64_t extra = 0; extra <= 12 * kLarge; extra += 3 * kLarge / 2) {
        SCOPED_TRACE("head " + std::to_string(head) + ", " + std::to_string(threads) + " threads, budget " +
                     std::to_string(least + extra));
        MemoryBudget budget(least + extra);
        MemorySource source(stream);
        Recorder recorder;
        DecodeAheadOptions options = Ahead(threads, &budget);
        options.note = [&](const std::string& note) { cut_to_several |= note.starts_with("decoding on 2 threads"); };
        Status s = ReadStreamDecodingAhead(source, recorder, options);
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(recorder.events, serial);
        EXPECT_EQ(budget.in_use(), 0u);
      }
      MemoryBudget tight(least - 1);
      MemorySource source(stream);
      Recorder recorder;
      Status s = ReadStreamDecodingAhead(source, recorder, Ahead(threads, &tight));
      EXPECT_EQ(s.code(), short_of_budget.code()) << s.ToString() << " / one thread: " << short_of_budget.ToString();
      EXPECT_EQ(tight.in_use(), 0u);
    }
  }
  EXPECT_TRUE(cut_to_several) << "no budget had frames of 1 MiB read on 2 threads of more asked for";
}

TEST(DecodeAheadTest, IncrementalStreamWithoutAWayToItsBaseIsReadSerially) {
  // A stream whose header says it has a base, read without open_base:
  // ReadStream reads it serially, so it fails or succeeds exactly as
  // ReadStream does; under a budget too small to decode ahead, that is not
  // the decode-ahead's error. (The DecodeAhead* tests of incremental_test.cc
  // read such streams with their base, decoding ahead.)
  std::vector<uint8_t> stream = MixedStream(kStreamFlagDedup | kStreamFlagBase);
  // Enough for ReadStream (an eighth for records, the dedup window, a
  // payload and a decode buffer), not for decoding ahead on two threads.
  const uint64_t serial_needs = 16 * kDedupWindowEntryBytes + kChunk + ChunkDecoder::MemoryBytes(kChunk);
  const uint64_t small_limit = serial_needs * 8 / 7 + (16 << 10);
  for (uint64_t limit : {uint64_t{8} << 20, small_limit}) {
    MemoryBudget serial_budget(limit), ahead_budget(limit);
    MemorySource serial_source(stream), ahead_source(stream);
    Recorder serial_recorder, ahead_recorder;
    Status serial = ReadStream(serial_source, serial_recorder,
                               ReadOptions{.decode = true, .budget = &serial_budget, .open_base = {}});
    Status ahead = ReadStreamDecodingAhead(ahead_source, ahead_recorder, Ahead(2, &ahead_budget));
    EXPECT_EQ(ahead.ToString(), serial.ToString()) << limit;
    EXPECT_EQ(ahead_recorder.events, serial_recorder.events) << limit;
    EXPECT_EQ(ahead.message().find("decoding ahead"), std::string::npos) << ahead.ToString();
  }
  // The same stream without the flag, under the small budget, which feeds
  // one thread only: read serially too, as ReadStream reads it.
  MemoryBudget small(small_limit);
  const std::vector<uint8_t> full = MixedStream();
  MemorySource source(full);
  Recorder recorder;
  Status s = ReadStreamDecodingAhead(source, recorder, Ahead(2, &small));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(recorder.events, Serially(full));
}

}  // namespace
}  // namespace vramflow
