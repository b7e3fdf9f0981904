// SPDX-License-Identifier: MIT
// Reading at offsets: RangeReader (transport/core/range_reader.h) returns the
// ranges it is given, in their order, as one stream, in pieces of
// request_size with no more in flight than the concurrency and the memory
// budget allow; errors are named and sticky, and destroying it cancels what
// is in flight. The file source (pread) and OpenRandomAccess by URI.
#include "transport/core/range_reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/support/test_util.h"
#include "transport/core/file_random_access.h"
#include "transport/open_uri.h"

namespace vramflow {
namespace {

using testing::TempDir;

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + i / 251);
  return v;
}

// Bytes in memory that record each read and how many ran at once; a read
// can be made slow, or fail at one offset.
class RecordingSource final : public RandomAccessSource {
 public:
  explicit RecordingSource(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  uint64_t Size() const override { return bytes_.size(); }
  std::string Describe() const override { return "recording source"; }
  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> data) override {
    {
      std::lock_guard lock(mu_);
      reads.emplace_back(offset, data.size());
      max_at_once = std::max(max_at_once, ++at_once_);
    }
    if (delay.count()) std::this_thread::sleep_for(delay);
    {
      std::lock_guard lock(mu_);
      --at_once_;
    }
    if (offset == fail_at) return Status::IoError("injected failure at " + std::to_string(offset));
    if (offset >= bytes_.size()) return size_t{0};
    size_t n = std::min<size_t>(data.size(), bytes_.size() - offset);
    std::memcpy(data.data(), bytes_.data() + offset, n);
    return n;
  }

  std::chrono::milliseconds delay{0};
  uint64_t fail_at = UINT64_MAX;
  std::vector<std::pair<uint64_t, size_t>> reads;
  int max_at_once = 0;

 private:
  std::vector<uint8_t> bytes_;
  std::mutex mu_;
  int at_once_ = 0;
};

Result<std::vector<uint8_t>> ReadAll(ByteSource& source, size_t step = 777) {
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(step);
  for (;;) {
    VF_ASSIGN_OR_RETURN(size_t n, source.Read(buf));
    if (n == 0) return out;
    out.insert(out.end(), buf.begin(), buf.begin() + n);
  }
}

//! Ranges come back in the order given (not sorted), each cut into pieces of
//! at most request_size; empty ranges are skipped.
TEST(RangeReaderTest, RangesInTheirOrderInPieces) {
  std::vector<uint8_t> bytes = Pattern(10000);
  auto source = std::make_shared<RecordingSource>(bytes);
  std::vector<ByteRange> ranges = {{5000, 2500}, {0, 10}, {300, 0}, {9990, 10}, {100, 1000}};
  RangeReaderOptions options;
  options.request_size = 1000;
  options.concurrency = 3;
  options.memory_budget = 100000;
  std::unique_ptr<ByteSource> reader = NewRangeReader(source, ranges, options);
  Result<std::vector<uint8_t>> out = ReadAll(*reader);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<uint8_t> expected;
  for (const ByteRange& r : ranges)
    expected.insert(expected.end(), bytes.begin() + r.offset, bytes.begin() + r.offset + r.size);
  EXPECT_EQ(*out, expected);
  std::vector<std::pair<uint64_t, size_t>> pieces = {{5000, 1000}, {6000, 1000}, {7000, 500},
                                                     {0, 10},      {9990, 10},   {100, 1000}};
  std::sort(source->reads.begin(), source->reads.end());
  std::sort(pieces.begin(), pieces.end());
  EXPECT_EQ(source->reads, pieces);
  EXPECT_EQ(reader->Describe(), "recording source");
}

//! Reads in flight stay within the concurrency, and fetched bytes within the
//! budget (the piece being consumed counts): 3000 bytes of 1000-byte pieces
//! is three pieces at most, even with a concurrency of 8.
TEST(RangeReaderTest, ConcurrencyAndBudgetBoundReadsInFlight) {
  std::vector<uint8_t> bytes = Pattern(20000);
  for (auto [concurrency, budget, most] : {std::tuple{8u, uint64_t{3000}, 3}, std::tuple{2u, uint64_t{100000}, 2}}) {
    auto source = std::make_shared<RecordingSource>(bytes);
    source->delay = std::chrono::milliseconds(20);
    RangeReaderOptions options;
    options.request_size = 1000;
    options.concurrency = concurrency;
    options.memory_budget = budget;
    std::unique_ptr<ByteSource> reader = NewRangeReader(source, {{0, bytes.size()}}, options);
    Result<std::vector<uint8_t>> out = ReadAll(*reader);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(*out, bytes);
    EXPECT_LE(source->max_at_once, most);
    EXPECT_GE(source->max_at_once, 2) << "no two reads overlapped";
  }
  // A piece larger than the budget still goes, alone.
  auto source = std::make_shared<RecordingSource>(bytes);
  RangeReaderOptions options;
  options.request_size = 8000;
  options.memory_budget = 1000;
  std::unique_ptr<ByteSource> reader = NewRangeReader(source, {{0, bytes.size()}}, options);
  Result<std::vector<uint8_t>> out = ReadAll(*reader);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, bytes);
  EXPECT_EQ(source->max_at_once, 1);
}

//! A range past the end of the source, or a failed read, fails when the
//! reader gets there, naming the source and range; the error sticks.
TEST(RangeReaderTest, ErrorsAreNamedAndSticky) {
  std::vector<uint8_t> bytes = Pattern(5000);
  auto source = std::make_shared<RecordingSource>(bytes);
  std::unique_ptr<ByteSource> reader = NewRangeReader(source, {{0, 100}, {4900, 200}}, {});
  std::vector<uint8_t> buf(100);
  Result<size_t> first = reader->Read(buf);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, 100u);
  Result<size_t> past = reader->Read(buf);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), Status::Code::kTruncated);
  EXPECT_NE(past.status().message().find("recording source: bytes 4900-5099 run past its end (5000 bytes)"),
            std::string::npos)
      << past.status().ToString();
  EXPECT_EQ(reader->Read(buf).status().code(), Status::Code::kTruncated);

  source->fail_at = 2000;
  RangeReaderOptions options;
  options.request_size = 1000;
  reader = NewRangeReader(source, {{0, 5000}}, options);
  Result<std::vector<uint8_t>> out = ReadAll(*reader);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("injected failure at 2000"), std::string::npos);
  EXPECT_FALSE(reader->Read(buf).ok());
}

// A source whose reads wait until cancelled.
class BlockingSource final : public RandomAccessSource {
 public:
  uint64_t Size() const override { return 1 << 20; }
  std::string Describe() const override { return "blocking source"; }
  Result<size_t> ReadAt(uint64_t, std::span<uint8_t>) override { return Status::Internal("not cancellable"); }
  Result<size_t> ReadAtUnlessCancelled(uint64_t offset, std::span<uint8_t> data,
                                       const std::atomic<bool>& cancel) override {
    if (offset == 0) return data.size();  // the first piece comes at once
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!cancel && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::Cancelled("cancelled");
  }
};

//! Destroying the reader cancels the reads in flight instead of waiting for them.
TEST(RangeReaderTest, DestroyingCancelsReadsInFlight) {
  RangeReaderOptions options;
  options.request_size = 4096;
  std::unique_ptr<ByteSource> reader = NewRangeReader(std::make_shared<BlockingSource>(), {{0, 1 << 20}}, options);
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE(reader->Read(buf).ok());
  auto start = std::chrono::steady_clock::now();
  reader.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

//! A regular file is read at offsets from several threads at once; paths
//! that cannot be read at offsets, and stream URIs, are NotSupported.
TEST(FileRandomAccessTest, PreadFromThreadsAndWhatIsRefused) {
  TempDir dir;
  std::vector<uint8_t> bytes = Pattern(300000);
  testing::WriteFileBytes(dir.File("f"), bytes);
  Result<std::unique_ptr<RandomAccessSource>> file = OpenRandomAccess(dir.File("f"), TransportOptions{});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->Size(), bytes.size());
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint64_t off = t * 1000; off < bytes.size(); off += 40000) {
        std::vector<uint8_t> buf(5000);
        Result<size_t> n = (*file)->ReadAt(off, buf);
        size_t want = std::min<size_t>(buf.size(), bytes.size() - off);
        if (!n.ok() || *n != want || !std::equal(buf.begin(), buf.begin() + want, bytes.begin() + off)) ++bad;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad, 0);
  std::vector<uint8_t> buf(10);
  EXPECT_EQ((*file)->ReadAt(bytes.size(), buf).value(), 0u);

  ASSERT_EQ(::mkfifo(dir.File("fifo").c_str(), 0600), 0);
  Result<std::unique_ptr<RandomAccessSource>> fifo = OpenFileRandomAccess(dir.File("fifo"));
  EXPECT_EQ(fifo.status().code(), Status::Code::kNotSupported) << fifo.status().ToString();
  EXPECT_EQ(OpenFileRandomAccess(dir.path()).status().code(), Status::Code::kInvalidArgument);
  EXPECT_FALSE(OpenFileRandomAccess(dir.File("missing")).ok());
  for (const char* uri : {"-", "fd:0", "tcp://127.0.0.1:1", "unix:/tmp/x.sock"}) {
    Result<std::unique_ptr<RandomAccessSource>> r = OpenRandomAccess(uri, TransportOptions{});
    EXPECT_EQ(r.status().code(), Status::Code::kNotSupported) << uri;
    EXPECT_NE(r.status().message().find("cannot be read at offsets"), std::string::npos) << r.status().ToString();
  }
}

}  // namespace
}  // namespace vramflow
