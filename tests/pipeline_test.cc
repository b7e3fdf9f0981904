// SPDX-License-Identifier: MIT
// Dump and restore graphs end to end through simulated GPUs: layouts,
// dedup, determinism, the memory budget and injected faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "sim/gpu/sim_process.h"
#include "streamer/format/dedup_window.h"
#include "streamer/pipeline.h"
#include "tests/support/poisoning_source.h"
#include "tests/support/test_util.h"
#include "transport/core/background_sink.h"
#include "transport/core/fd_stream.h"
#include "transport/core/memory_stream.h"

namespace vramflow {
namespace {

using namespace std::chrono_literals;
using testing::PoisoningSource;
using testing::ReadFileBytes;
using testing::TempDir;

PipelineOptions SmallOptions(unsigned threads = 2) {
  PipelineOptions o;
  o.chunk_size = 64 << 10;
  o.max_memory = 16 << 20;
  o.threads = threads;
  o.dma_timeout = 5s;
  return o;
}

std::unique_ptr<SimProcess> MakeProcess(const std::vector<SimBoSpec>& specs, uint32_t gpus,
                                        SimDeviceOptions device = {}) {
  auto p = std::make_unique<SimProcess>(gpus, device);
  Status s = p->Allocate(specs);
  EXPECT_TRUE(s.ok()) << s.ToString();
  p->Fill();
  return p;
}

Status Dump(SimProcess& p, ByteSink* sink, const PipelineOptions& options, PipelineStats* stats) {
  VF_ASSIGN_OR_RETURN(std::vector<DumpSource> sources, p.DumpSources());
  return RunDump(sources, sink, options, stats);
}

Status Restore(const std::vector<uint8_t>& stream, SimProcess& into, const PipelineOptions& options,
               PipelineStats* stats) {
  MemorySource source(stream);
  return RunRestore(&source, into.devices(), into.Resolver(), options, stats);
}

std::vector<SimBoSpec> MixedLayout() {
  return {
      {"gpu0/weights-bf16", 0, 1 << 20, DataKind::kBf16Weights, 1},
      {"gpu1/weights-bf16", 1, 1 << 20, DataKind::kBf16Weights, 1},  // replica: dedup
      {"gpu0/master-fp32", 0, (1 << 20) + 12345, DataKind::kFp32Weights, 2},
      {"gpu1/adam-m", 1, 300000, DataKind::kAdamM, 3},
      {"gpu1/adam-v", 1, 300001, DataKind::kAdamV, 4},
      {"gpu0/kv-cache", 0, 3 << 20, DataKind::kZeros, 0},
      {"gpu0/tiny", 0, 1, DataKind::kRandom, 5},
      {"gpu1/empty", 1, 0, DataKind::kZeros, 0},
      {"gpu1/random", 1, 200000, DataKind::kRandom, 6},
  };
}

TEST(PipelineTest, RoundTripsManyLayoutsAcrossTwoGpus) {
  auto p = MakeProcess(MixedLayout(), 2);
  MemorySink sink;
  PipelineStats dump;
  ASSERT_TRUE(Dump(*p, &sink, SmallOptions(), &dump).ok());
  EXPECT_EQ(dump.dedup_bytes, 1u << 20);
  EXPECT_GE(dump.zero_bytes, 3u << 20);
  EXPECT_LE(dump.budget_peak, SmallOptions().max_memory);

  // The stream is valid for the serial reference reader too.
  std::vector<testing::TestObject> objects;
  ASSERT_TRUE(testing::UnpackFromMemory(sink.bytes(), &objects).ok());
  EXPECT_EQ(objects.size(), p->specs().size());

  auto restored = std::make_unique<SimProcess>(2, SimDeviceOptions{});
  ASSERT_TRUE(restored->Allocate(MixedLayout()).ok());
  PipelineStats stats;
  Status s = Restore(sink.bytes(), *restored, SmallOptions(), &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_LE(stats.budget_peak, SmallOptions().max_memory);
  EXPECT_TRUE(p->Compare(*restored).ok());
}

TEST(PipelineTest, RoundTripsWithEveryThreadCountAndManyBos) {
  std::vector<SimBoSpec> specs;
  for (uint32_t i = 0; i < 40; ++i)
    specs.push_back({"bo" + std::to_string(i), i % 3, 1000 + i * 7919, static_cast<DataKind>(i % 7), i});
  auto p = MakeProcess(specs, 3);
  for (unsigned threads : {1u, 2u, 4u}) {
    MemorySink sink;
    PipelineStats stats;
    ASSERT_TRUE(Dump(*p, &sink, SmallOptions(threads), &stats).ok());
    auto restored = std::make_unique<SimProcess>(3, SimDeviceOptions{});
    ASSERT_TRUE(restored->Allocate(specs).ok());
    Status s = Restore(sink.bytes(), *restored, SmallOptions(threads), &stats);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(p->Compare(*restored).ok()) << threads << " threads";
  }
}

TEST(PipelineTest, OutputIsDeterministic) {
  auto p = MakeProcess(MixedLayout(), 2);
  MemorySink one, two;
  PipelineStats stats;
  ASSERT_TRUE(Dump(*p, &one, SmallOptions(4), &stats).ok());
  ASSERT_TRUE(Dump(*p, &two, SmallOptions(1), &stats).ok());
  EXPECT_EQ(one.bytes(), two.bytes());
}

//! A budget too small for even one thread's codec state and two slots is an
//! error (more threads than it feeds only run fewer: below).
TEST(PipelineTest, BudgetTooSmallIsAClearError) {
  auto p = MakeProcess(MixedLayout(), 2);
  MemorySink sink;
  PipelineStats stats;
  PipelineOptions o = SmallOptions();
  o.max_memory = 256 << 10;
  Status s = Dump(*p, &sink, o, &stats);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("memory budget"), std::string::npos) << s.ToString();
}

//! More threads than the budget feeds: the graphs run fewer, say so once
//! through `note`, and write (and restore) the same stream.
TEST(PipelineTest, ThreadsBeyondTheBudgetAreCappedWithANote) {
  auto p = MakeProcess(MixedLayout(), 2);
  MemorySink capped, one;
  PipelineStats stats;
  PipelineOptions o = SmallOptions(64);
  o.max_memory = 2 << 20;
  std::vector<std::string> notes;
  o.note = [&](const std::string& line) { notes.push_back(line); };
  ASSERT_TRUE(Dump(*p, &capped, o, &stats).ok());
  EXPECT_LT(stats.threads, 64u);
  EXPECT_GE(stats.threads, 1u);
  EXPECT_LE(stats.budget_peak, o.max_memory);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "running " + std::to_string(stats.threads) +
                          " threads, not 64: a memory budget of 2.00 MiB "
                          "feeds no more");
  ASSERT_TRUE(Dump(*p, &one, SmallOptions(1), &stats).ok());
  EXPECT_EQ(capped.bytes(), one.bytes());

  auto restored = std::make_unique<SimProcess>(2, SimDeviceOptions{});
  ASSERT_TRUE(restored->Allocate(MixedLayout()).ok());
  notes.clear();
  Status s = Restore(capped.bytes(), *restored, o, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_LT(stats.threads, 64u);
  EXPECT_EQ(notes.size(), 1u);
  EXPECT_TRUE(p->Compare(*restored).ok());
}

TEST(PipelineTest, BudgetBoundsThePoolWhateverTheVramSize) {
  // Four times the data, same budget: the same peak. (A dump declares a
  // dedup window no larger than its chunk count, so the window is set below
  // both here: the window's own bound is DedupWindowTest.HoldsTheLatestFramesOnly.)
  std::vector<SimBoSpec> small = {{"a", 0, 2 << 20, DataKind::kFp32Weights, 1}};
  std::vector<SimBoSpec> large = {{"a", 0, 8 << 20, DataKind::kFp32Weights, 1}};
  PipelineOptions options = SmallOptions();
  options.dedup_window = 16;
  PipelineStats s1, s2;
  MemorySink k1, k2;
  ASSERT_TRUE(Dump(*MakeProcess(small, 1), &k1, options, &s1).ok());
  ASSERT_TRUE(Dump(*MakeProcess(large, 1), &k2, options, &s2).ok());
  EXPECT_EQ(s1.budget_peak, s2.budget_peak);
  EXPECT_LE(s2.budget_peak, options.max_memory);
}

StreamHeader HeaderOf(const std::vector<uint8_t>& stream) {
  StreamHeader header;
  EXPECT_TRUE(DecodeStreamHeader(stream.data(), &header).ok());
  return header;
}

//! BO "b" repeats BO "a" on the same GPU, so each of its chunks is the 8th
//! DATA frame back: a dedup window of 8 makes all of them references, one of
//! 7 none. Either way the stream restores exactly, declares its window (by
//! default no larger than the dump's 16 chunks) and is the same bytes for
//! any thread count.
TEST(PipelineTest, DedupWindowDecidesWhichRepeatsBecomeReferences) {
  const uint64_t chunk = SmallOptions().chunk_size;
  std::vector<SimBoSpec> specs = {{"a", 0, 8 * chunk, DataKind::kFp32Weights, 7},
                                  {"b", 0, 8 * chunk, DataKind::kFp32Weights, 7}};
  auto p = MakeProcess(specs, 1);
  for (uint32_t window : {8u, 7u, 0u}) {
    PipelineOptions options = SmallOptions(4);
    options.dedup_window = window;
    MemorySink sink;
    PipelineStats dump;
    ASSERT_TRUE(Dump(*p, &sink, options, &dump).ok());
    EXPECT_EQ(dump.dedup_bytes, window == 7 ? 0 : 8 * chunk) << window;
    EXPECT_EQ(HeaderOf(sink.bytes()).dedup_window, window == 0 ? 16u : window);

    options.threads = 1;
    MemorySink again;
    ASSERT_TRUE(Dump(*p, &again, options, &dump).ok());
    EXPECT_EQ(sink.bytes(), again.bytes()) << window;

    auto restored = std::make_unique<SimProcess>(1, SimDeviceOptions{});
    ASSERT_TRUE(restored->Allocate(specs).ok());
    PipelineStats stats;
    Status s = Restore(sink.bytes(), *restored, SmallOptions(), &stats);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(p->Compare(*restored).ok()) << window;
  }
  PipelineOptions options = SmallOptions();
  options.dedup_window = kMaxDedupWindow + 1;
  MemorySink sink;
  PipelineStats dump;
  Status s = Dump(*p, &sink, options, &dump);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
}

//! The dedup window is charged before the slot pool, which takes what is
//! left: a budget of exactly codec state + window + two slots dumps, with
//! two slots.
TEST(PipelineTest, BudgetCoversTheDedupWindowBeforeThePool) {
  PipelineOptions options = SmallOptions(2);
  options.chunk_size = 4096;
  options.dedup_window = 256;  // 24 KiB: more than one slot
  const uint64_t slot = options.chunk_size + ChunkEncoder::MaxPayloadSize(options.chunk_size) + 8192;
  ASSERT_GT(options.dedup_window * kDedupWindowEntryBytes, slot);
  options.max_memory = 2 * ChunkEncoder::MemoryBytes(options.encoder, options.chunk_size) +
                       options.dedup_window * kDedupWindowEntryBytes + 2 * slot;
  auto p = MakeProcess({{"a", 0, 256 * 4096, DataKind::kFp32Weights, 5}}, 1);
  MemorySink sink;
  PipelineStats stats;
  Status s = Dump(*p, &sink, options, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(stats.slots, 2u);
  EXPECT_LE(stats.budget_peak, options.max_memory);
  EXPECT_EQ(HeaderOf(sink.bytes()).dedup_window, 256u);
}

//! More references than a restore holds at once: it copies them in batches
//! of kMaxPendingReferences, draining the graph in between, and every byte
//! arrives.
TEST(PipelineTest, RestoreCopiesReferencesInBoundedBatches) {
  PipelineOptions options = SmallOptions();
  options.chunk_size = 512;
  const uint64_t size = (kMaxPendingReferences + 100) * uint64_t{options.chunk_size};
  std::vector<SimBoSpec> specs = {{"gpu0/w", 0, size, DataKind::kRandom, 3}, {"gpu1/w", 1, size, DataKind::kRandom, 3}};
  auto p = MakeProcess(specs, 2);
  MemorySink sink;
  PipelineStats dump;
  ASSERT_TRUE(Dump(*p, &sink, options, &dump).ok());
  ASSERT_EQ(dump.dedup_bytes, size);

  auto restored = std::make_unique<SimProcess>(2, SimDeviceOptions{});
  ASSERT_TRUE(restored->Allocate(specs).ok());
  PipelineStats stats;
  Status s = Restore(sink.bytes(), *restored, options, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(stats.reference_batches, 2u);
  EXPECT_EQ(stats.dedup_bytes, size);
  EXPECT_EQ(stats.raw_bytes, 2 * size);
  EXPECT_TRUE(p->Compare(*restored).ok());
}

// A sink that takes `delay` per write: the destination sets the pace. It
// adds the size of each write to `write_sizes`, if given.
class SlowSink final : public ByteSink {
 public:
  explicit SlowSink(std::chrono::milliseconds delay, std::vector<size_t>* write_sizes = nullptr)
      : delay_(delay), write_sizes_(write_sizes) {}
  Status Write(std::span<const uint8_t> data) override {
    std::this_thread::sleep_for(delay_);
    if (write_sizes_) write_sizes_->push_back(data.size());
    return inner_.Write(data);
  }
  Status Commit() override { return inner_.Commit(); }
  std::string Describe() const override { return "slow sink"; }
  const std::vector<uint8_t>& bytes() const { return inner_.bytes(); }

 private:
  std::chrono::milliseconds delay_;
  std::vector<size_t>* write_sizes_;
  MemorySink inner_;
};

// Through a BackgroundSink, the write stage lends DATA payloads from their
// slots instead of copying them: the stream is the same, with 1 thread and
// with 4, with a sink slow enough to keep slots out up to the limit.
TEST(PipelineTest, PayloadsLentToABackgroundSinkMakeTheSameStream) {
  auto p = MakeProcess(MixedLayout(), 2);
  MemorySink copied;
  PipelineStats stats;
  ASSERT_TRUE(Dump(*p, &copied, SmallOptions(1), &stats).ok());
  constexpr size_t kBuffer = 4096;
  for (unsigned threads : {1u, 4u}) {
    std::vector<size_t> sizes;
    auto slow = std::make_unique<SlowSink>(1ms, &sizes);
    const SlowSink* written = slow.get();
    BackgroundSink sink(std::move(slow), kBuffer);
    Status s = Dump(*p, &sink, SmallOptions(threads), &stats);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(sink.Commit().ok());  // the sink's thread has written everything
    EXPECT_EQ(written->bytes(), copied.bytes()) << threads << " threads";
    // Copied bytes arrive a buffer at a time; lent payloads whole.
    EXPECT_GT(std::count_if(sizes.begin(), sizes.end(), [](size_t n) { return n > kBuffer; }), 10) << threads;
  }
}

// A file sink with writer threads takes the payloads off the ordered write
// stage (issue 54): the file holds the same stream (seek index included) as
// a file written on the write stage's own thread.
TEST(PipelineTest, PayloadsWrittenOnTheFileSinksThreadsMakeTheSameStream) {
  auto p = MakeProcess(MixedLayout(), 2);
  TempDir dir;
  for (unsigned threads : {1u, 4u}) {
    std::vector<std::vector<uint8_t>> files;
    for (unsigned writers : {0u, 3u}) {
      FileSinkOptions options;
      options.writer_threads = writers;
      const std::string path = dir.File("s" + std::to_string(threads) + "-" + std::to_string(writers) + ".vfs");
      Result<std::unique_ptr<ByteSink>> file = OpenFileSink(path, options);
      ASSERT_TRUE(file.ok()) << file.status().ToString();
      PipelineStats stats;
      Status s = Dump(*p, file->get(), SmallOptions(threads), &stats);
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_TRUE((*file)->Commit().ok());
      files.push_back(ReadFileBytes(path));
    }
    EXPECT_GT(files[0].size(), 1u << 20);
    EXPECT_EQ(files[1], files[0]) << threads << " threads";
  }
}

// A source that takes `delay` per read.
class SlowSource final : public ByteSource {
 public:
  SlowSource(const std::vector<uint8_t>& bytes, std::chrono::milliseconds delay) : inner_(bytes), delay_(delay) {}
  Result<size_t> Read(std::span<uint8_t> data) override {
    std::this_thread::sleep_for(delay_);
    return inner_.Read(data);
  }
  std::string Describe() const override { return "slow source"; }

 private:
  MemorySource inner_;
  std::chrono::milliseconds delay_;
};

TEST(PipelineTest, SerialStageTimeShowsASlowSinkOrSourceSetsThePace) {
  std::vector<SimBoSpec> layout = {{"a", 0, 2 << 20, DataKind::kFp32Weights, 1}};
  auto p = MakeProcess(layout, 1);
  PipelineStats fast, slow;
  MemorySink memory;
  ASSERT_TRUE(Dump(*p, &memory, SmallOptions(), &fast).ok());
  // 8 ms a write: far above what coding a chunk costs even under TSan on a
  // slow machine (with 2 ms, a TSan run here spent 56% of the dump coding).
  SlowSink sink(8ms);
  ASSERT_TRUE(Dump(*p, &sink, SmallOptions(), &slow).ok());
  EXPECT_EQ(sink.bytes(), memory.bytes());
  // 32 chunks of 64 KiB, at least two writes each (header, payload), 8 ms a write.
  EXPECT_GE(slow.serial_seconds, 0.512);
  EXPECT_LE(slow.serial_seconds, slow.seconds);
  EXPECT_GT(slow.serial_seconds, 0.5 * slow.seconds) << "the slow sink should dominate";
  EXPECT_LE(fast.serial_seconds, fast.seconds);

  SimProcess restored(1, SimDeviceOptions{});
  ASSERT_TRUE(restored.Allocate(layout).ok());
  SlowSource source(memory.bytes(), 8ms);
  PipelineStats restore;
  Status s = RunRestore(&source, restored.devices(), restored.Resolver(), SmallOptions(), &restore);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(p->Compare(restored).ok());
  EXPECT_GE(restore.serial_seconds, 0.008);
  EXPECT_LE(restore.serial_seconds, restore.seconds);
  EXPECT_GT(restore.serial_seconds, 0.5 * restore.seconds) << "the slow source should dominate";
}

// measure_serial_cpu (issue 54) clocks each serial stage of both graphs and
// changes nothing else: the same stream, the same restore.
TEST(PipelineTest, SerialStageCpuIsClockedOnlyWhenAskedAndChangesNothing) {
  auto p = MakeProcess(MixedLayout(), 2);
  MemorySink plain, measured;
  PipelineStats plain_stats, dump_stats, restore_stats;
  ASSERT_TRUE(Dump(*p, &plain, SmallOptions(), &plain_stats).ok());
  EXPECT_TRUE(plain_stats.serial_stages.empty());
  PipelineOptions options = SmallOptions();
  options.measure_serial_cpu = true;
  ASSERT_TRUE(Dump(*p, &measured, options, &dump_stats).ok());
  EXPECT_EQ(measured.bytes(), plain.bytes());
  SimProcess restored(2, SimDeviceOptions{});
  ASSERT_TRUE(restored.Allocate(MixedLayout()).ok());
  Status s = Restore(measured.bytes(), restored, options, &restore_stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(p->Compare(restored).ok());
  auto names = [](const PipelineStats& stats) {
    std::vector<std::string> n;
    for (const SerialStageCpu& stage : stats.serial_stages) {
      EXPECT_GE(stage.cpu_seconds, 0) << stage.name;
      n.push_back(stage.name);
    }
    return n;
  };
  EXPECT_EQ(names(dump_stats), (std::vector<std::string>{"generate", "dedup", "write"}));
  EXPECT_EQ(names(restore_stats), (std::vector<std::string>{"read", "account"}));
  EXPECT_GT(dump_stats.serial_stages[2].cpu_seconds, 0) << "framing and writing every frame takes some CPU";
}

TEST(PipelineTest, PayloadsReadInPlaceAreLetGoOnlyOnceTheirChunksAreDone) {
  // Every kind of frame, and DATA frames last.
  std::vector<SimBoSpec> layout = MixedLayout();
  layout.push_back({"gpu1/random-last", 1, 1 << 20, DataKind::kRandom, 9});
  auto p = MakeProcess(layout, 2);
  MemorySink memory;
  PipelineStats dumped;
  ASSERT_TRUE(Dump(*p, &memory, SmallOptions(), &dumped).ok());
  for (unsigned threads : {1u, 2u, 4u}) {
    for (int round = 0; round < 3; ++round) {
      SimProcess restored(2, SimDeviceOptions{});
      ASSERT_TRUE(restored.Allocate(layout).ok());
      PoisoningSource source(memory.bytes());
      PipelineStats stats;
      Status s = RunRestore(&source, restored.devices(), restored.Resolver(), SmallOptions(threads), &stats);
      ASSERT_TRUE(s.ok()) << threads << " threads: " << s.ToString();
      EXPECT_TRUE(p->Compare(restored).ok());
      EXPECT_EQ(source.in_place_reads(), stats.data_chunks) << "every DATA payload read in place";
      EXPECT_FALSE(source.passed_unread()) << "let go of bytes not read yet";
      // Once the graph has drained, every payload is let go: all but the
      // frames after the last DATA frame (OBJECT_END, STREAM_END, the index).
      EXPECT_GT(source.poisoned(), memory.bytes().size() - 4096);
      EXPECT_LE(source.poisoned(), memory.bytes().size());
    }
  }
}

class FailingSink final : public ByteSink {
 public:
  explicit FailingSink(size_t fail_after) : left_(fail_after) {}
  Status Write(std::span<const uint8_t> data) override {
    if (data.size() > left_) return Status::IoError("disk full (injected)");
    left_ -= data.size();
    return Status::Ok();
  }
  Status Commit() override { return Status::Ok(); }
  std::string Describe() const override { return "failing sink"; }

 private:
  size_t left_;
};

TEST(PipelineFaultTest, SinkFailureStopsTheDumpWithItsError) {
  auto p = MakeProcess(MixedLayout(), 2);
  FailingSink sink(300000);
  PipelineStats stats;
  auto start = std::chrono::steady_clock::now();
  Status s = Dump(*p, &sink, SmallOptions(), &stats);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("disk full (injected)"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("failing sink"), std::string::npos) << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(PipelineFaultTest, FailedDmaCopyStopsTheDump) {
  SimDeviceOptions device;
  device.fail_copy_at = 5;
  auto p = MakeProcess(MixedLayout(), 2, device);
  MemorySink sink;
  PipelineStats stats;
  Status s = Dump(*p, &sink, SmallOptions(), &stats);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("injected copy failure"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("DMA read of object"), std::string::npos) << s.ToString();
}

// A dump that fails with payloads still lent to a slow BackgroundSink takes
// them back before its slots are freed (ASan: no write from freed memory).
TEST(PipelineFaultTest, FailedDumpTakesBackPayloadsLentToTheSink) {
  SimDeviceOptions device;
  device.fail_copy_at = 40;
  auto p = MakeProcess(MixedLayout(), 2, device);
  std::vector<size_t> sizes;
  {
    BackgroundSink sink(std::make_unique<SlowSink>(5ms, &sizes), 4096);
    PipelineStats stats;
    Status s = Dump(*p, &sink, SmallOptions(1), &stats);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("injected copy failure"), std::string::npos) << s.ToString();
  }  // the sink's thread is joined
  EXPECT_TRUE(std::any_of(sizes.begin(), sizes.end(), [](size_t n) { return n > 4096; })) << "nothing was lent";
}

TEST(PipelineFaultTest, StuckFenceTimesOutInsteadOfHanging) {
  SimDeviceOptions device;
  device.stall_copy_at = 3;
  auto p = MakeProcess(MixedLayout(), 2, device);
  MemorySink sink;
  PipelineStats stats;
  PipelineOptions o = SmallOptions();
  o.dma_timeout = 200ms;
  auto start = std::chrono::steady_clock::now();
  Status s = Dump(*p, &sink, o, &stats);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_NE(s.message().find("did not signal"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(PipelineFaultTest, FailedDmaWriteFailsTheRestore) {
  auto p = MakeProcess(MixedLayout(), 2);
  MemorySink sink;
  PipelineStats stats;
  ASSERT_TRUE(Dump(*p, &sink, SmallOptions(), &stats).ok());
  SimDeviceOptions device;
  device.fail_copy_at = 7;
  SimProcess restored(2, device);
  ASSERT_TRUE(restored.Allocate(MixedLayout()).ok());
  Status s = Restore(sink.bytes(), restored, SmallOptions(), &stats);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("DMA write"), std::string::npos) << s.ToString();
}

TEST(PipelineFaultTest, CorruptOrTruncatedStreamsFailTheRestoreNamingTheFrame) {
  auto p = MakeProcess(MixedLayout(), 2);
  MemorySink sink;
  PipelineStats stats;
  ASSERT_TRUE(Dump(*p, &sink, SmallOptions(), &stats).ok());
  const std::vector<uint8_t>& good = sink.bytes();

  std::vector<uint8_t> flipped = good;
  flipped[good.size() / 2] ^= 0x10;  // somewhere in a payload or header
  SimProcess r1(2, SimDeviceOptions{});
  ASSERT_TRUE(r1.Allocate(MixedLayout()).ok());
  Status s = Restore(flipped, r1, SmallOptions(), &stats);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("frame"), std::string::npos) << s.ToString();

  for (size_t cut : {size_t{10}, good.size() / 3, good.size() - 1}) {
    std::vector<uint8_t> truncated(good.begin(), good.begin() + static_cast<ptrdiff_t>(cut));
    SimProcess r2(2, SimDeviceOptions{});
    ASSERT_TRUE(r2.Allocate(MixedLayout()).ok());
    s = Restore(truncated, r2, SmallOptions(), &stats);
    ASSERT_FALSE(s.ok()) << "cut at " << cut;
    EXPECT_EQ(s.code(), Status::Code::kTruncated) << s.ToString();
  }
}

}  // namespace
}  // namespace vramflow
