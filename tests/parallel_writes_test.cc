// SPDX-License-Identifier: MIT
// A file sink with writer threads (FileSinkOptions::writer_threads,
// transport/core/parallel_writes.h): copied and lent bytes land in the file
// in the order they were given, whichever thread writes them; tickets are
// released in order, and only once their bytes are in the file; a writer that
// gives up leaves no file.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <vector>

#include "common/unique_fd.h"
#include "tests/support/test_util.h"
#include "transport/core/fd_stream.h"
#include "transport/core/parallel_writes.h"

namespace vramflow {
namespace {

using testing::ReadFileBytes;
using testing::TempDir;

TEST(ParallelWritesTest, CopiedAndLentBytesLandInOrder) {
  TempDir dir;
  std::mt19937 rng(7);
  // Lent pieces stay put until released: keep them all.
  std::vector<std::vector<uint8_t>> lent(300);
  std::vector<uint8_t> expected;
  for (unsigned threads : {2u, 5u}) {
    expected.clear();
    FileSinkOptions options;
    options.writer_threads = threads;
    const std::string path = dir.File("out" + std::to_string(threads));
    Result<std::unique_ptr<ByteSink>> sink = OpenFileSink(path, options);
    ASSERT_TRUE(sink.ok()) << sink.status().ToString();
    uint64_t last_ticket = 0;
    for (size_t i = 0; i < lent.size(); ++i) {
      std::vector<uint8_t> header(1 + rng() % 100, static_cast<uint8_t>(i));
      if (i % 50 == 7) header.resize(300 << 10, 0xab);  // an index block: a copied piece of its own
      ASSERT_TRUE((*sink)->Write(header).ok());
      expected.insert(expected.end(), header.begin(), header.end());
      lent[i].resize(rng() % (200 << 10));
      for (uint8_t& b : lent[i]) b = static_cast<uint8_t>(rng());
      Result<uint64_t> ticket = (*sink)->WriteBorrowed(lent[i]);
      ASSERT_TRUE(ticket.ok()) << ticket.status().ToString();
      if (!lent[i].empty()) {
        EXPECT_GT(*ticket, last_ticket) << "tickets grow call by call";
        last_ticket = *ticket;
      }
      expected.insert(expected.end(), lent[i].begin(), lent[i].end());
    }
    (*sink)->WaitReleased(last_ticket);
    EXPECT_TRUE((*sink)->Released(last_ticket));
    ASSERT_TRUE((*sink)->Commit().ok());
    EXPECT_EQ(ReadFileBytes(path), expected) << threads << " threads";
  }
}

TEST(ParallelWritesTest, DroppedLentBytesFailTheSinkAndReleaseEveryTicket) {
  TempDir dir;
  FileSinkOptions options;
  options.writer_threads = 3;
  const std::string path = dir.File("dropped");
  Result<std::unique_ptr<ByteSink>> sink = OpenFileSink(path, options);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  std::vector<uint8_t> payload(8 << 20, 1);
  uint64_t ticket = 0;
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE((*sink)->Write(std::vector<uint8_t>(64, 2)).ok());
    Result<uint64_t> t = (*sink)->WriteBorrowed(payload);
    ASSERT_TRUE(t.ok());
    ticket = *t;
  }
  (*sink)->DropBorrowed();
  EXPECT_TRUE((*sink)->Released(ticket));
  // Whether or not the threads had written every piece before the drop, the
  // sink either has all bytes or fails: it never commits a file with a hole.
  Status committed = (*sink)->Commit();
  if (committed.ok()) {
    EXPECT_EQ(ReadFileBytes(path).size(), 32u * (64 + payload.size()));
  } else {
    EXPECT_NE(committed.ToString().find("stopped before the end"), std::string::npos) << committed.ToString();
    EXPECT_FALSE(std::filesystem::exists(path));
  }
}

//! The writeback window hears of every byte once: each growth of the
//! file's complete prefix is reported as taken when it happened (TSan once
//! saw a thread read the prefix's end again while another moved it on,
//! which counted the bytes between twice).
TEST(ParallelWritesTest, EveryByteIsReportedWrittenOnce) {
  TempDir dir;
  std::vector<std::vector<uint8_t>> lent(2000, std::vector<uint8_t>(512, 0x5a));
  for (int round = 0; round < 5; ++round) {
    UniqueFd fd(::open(dir.File("out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd.valid());
    std::atomic<uint64_t> reported{0};
    Result<std::unique_ptr<ParallelWrites>> writes =
        ParallelWrites::Start(fd.get(), 8, "out", [&](uint64_t bytes) { reported += bytes; });
    ASSERT_TRUE(writes.ok()) << writes.status().ToString();
    uint64_t total = 0;
    for (const std::vector<uint8_t>& piece : lent) {
      const uint8_t header[3] = {1, 2, 3};
      ASSERT_TRUE((*writes)->Write(header).ok());
      ASSERT_TRUE((*writes)->WriteBorrowed(piece).ok());
      total += sizeof header + piece.size();
    }
    ASSERT_TRUE((*writes)->Flush().ok());
    EXPECT_EQ(reported.load(), total) << "round " << round;
  }
}

}  // namespace
}  // namespace vramflow
