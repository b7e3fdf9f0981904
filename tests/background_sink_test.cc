// SPDX-License-Identifier: MIT
// BackgroundSink: every byte reaches the inner sink in order, copied or
// lent, lent bytes are read where they are until released, the inner sink's
// error comes back to the writer, and nothing is committed unless Commit()
// succeeds.
#include "transport/core/background_sink.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/support/test_util.h"

namespace vramflow {
namespace {

// Keeps what it is given, fails once it has `fail_after` bytes, and can be
// seen after the BackgroundSink that owns it is gone.
struct Record {
  std::vector<uint8_t> bytes;
  std::vector<size_t> write_sizes;
  bool committed = false;
  std::atomic<bool> destroyed{false};
};

class RecordingSink final : public ByteSink {
 public:
  RecordingSink(Record* record, size_t fail_after = SIZE_MAX) : record_(record), fail_after_(fail_after) {}
  ~RecordingSink() override { record_->destroyed = true; }
  Status Write(std::span<const uint8_t> data) override {
    if (record_->bytes.size() + data.size() > fail_after_) return Status::IoError("write: No space left on device");
    record_->bytes.insert(record_->bytes.end(), data.begin(), data.end());
    record_->write_sizes.push_back(data.size());
    return Status::Ok();
  }
  Status Commit() override {
    record_->committed = true;
    return Status::Ok();
  }
  std::string Describe() const override { return "file 'out.vfs'"; }
  bool Seekable() const override { return true; }

 private:
  Record* record_;
  size_t fail_after_;
};

// Holds every Write() until Open(): the test sees a write in progress.
class GatedSink final : public ByteSink {
 public:
  explicit GatedSink(Record* record) : record_(record) {}
  Status Write(std::span<const uint8_t> data) override {
    std::unique_lock lock(mutex_);
    ++entered_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
    record_->bytes.insert(record_->bytes.end(), data.begin(), data.end());
    return Status::Ok();
  }
  Status Commit() override {
    record_->committed = true;
    return Status::Ok();
  }
  std::string Describe() const override { return "pipe"; }
  // Waits until `n` writes have begun.
  void WaitEntered(int n) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return entered_ >= n; });
  }
  void Open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  Record* record_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int entered_ = 0;
  bool open_ = false;
};

TEST(BackgroundSink, LentBytesArriveInOrderWithCopiedOnes) {
  Record record;
  const std::vector<uint8_t> data = testing::RandomBytes(30000, 11);
  const std::span<const uint8_t> all(data);
  {
    BackgroundSink sink(std::make_unique<RecordingSink>(&record), 4096);
    ASSERT_TRUE(sink.Write(all.subspan(0, 100)).ok());
    Result<uint64_t> first = sink.WriteBorrowed(all.subspan(100, 10000));
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    ASSERT_TRUE(sink.Write(all.subspan(10100, 5000)).ok());  // more than a buffer
    Result<uint64_t> second = sink.WriteBorrowed(all.subspan(15100));
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_GT(*first, 0u);
    EXPECT_GT(*second, *first);
    Result<uint64_t> none = sink.WriteBorrowed({});
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(*none, 0u);
    Status s = sink.Commit();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(sink.Released(*second));
  }
  EXPECT_TRUE(record.committed);
  EXPECT_EQ(record.bytes, data);
}

TEST(BackgroundSink, LentBytesAreReadWhereTheyAreUntilReleased) {
  Record record;
  std::vector<uint8_t> lent(5000, 1);
  auto gated = std::make_unique<GatedSink>(&record);
  GatedSink* gate = gated.get();
  BackgroundSink sink(std::move(gated), 4096);
  Result<uint64_t> ticket = sink.WriteBorrowed(lent);
  ASSERT_TRUE(ticket.ok()) << ticket.status().ToString();
  gate->WaitEntered(1);
  EXPECT_FALSE(sink.Released(*ticket));
  // Not copied: what the inner sink gets is what the bytes are when it
  // writes them.
  std::fill(lent.begin(), lent.end(), 2);
  gate->Open();
  sink.WaitReleased(*ticket);
  EXPECT_TRUE(sink.Released(*ticket));
  ASSERT_TRUE(sink.Commit().ok());
  EXPECT_EQ(record.bytes, std::vector<uint8_t>(5000, 2));
}

TEST(BackgroundSink, DroppedLentBytesAreNeverWrittenAndFailCommit) {
  Record record;
  const std::vector<uint8_t> first(3000, 1), second(3000, 2);
  auto gated = std::make_unique<GatedSink>(&record);
  GatedSink* gate = gated.get();
  {
    BackgroundSink sink(std::move(gated), 4096);
    Result<uint64_t> a = sink.WriteBorrowed(first);
    ASSERT_TRUE(a.ok());
    gate->WaitEntered(1);  // the thread is writing `first`
    Result<uint64_t> b = sink.WriteBorrowed(second);
    ASSERT_TRUE(b.ok());
    std::thread opener([gate] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      gate->Open();
    });
    sink.DropBorrowed();  // returns once `first` is written; `second` is dropped
    opener.join();
    EXPECT_TRUE(sink.Released(*b));
    EXPECT_EQ(record.bytes, first);
    Status s = sink.Commit();
    EXPECT_EQ(s.code(), Status::Code::kCancelled) << s.ToString();
    EXPECT_EQ(sink.WriteBorrowed(second).status().code(), Status::Code::kCancelled);
  }
  EXPECT_EQ(record.bytes, first);
  EXPECT_FALSE(record.committed);
}

TEST(BackgroundSink, AfterAFailureLentBytesAreReleasedUnwritten) {
  Record record;
  const std::vector<uint8_t> data = testing::RandomBytes(3000, 12);
  BackgroundSink sink(std::make_unique<RecordingSink>(&record, 4000), 4096);
  Result<uint64_t> a = sink.WriteBorrowed(data);
  ASSERT_TRUE(a.ok());
  Result<uint64_t> b = sink.WriteBorrowed(data);  // fails in the thread: past 4000 bytes
  ASSERT_TRUE(b.ok());
  sink.WaitReleased(*b);
  Result<uint64_t> c = sink.WriteBorrowed(data);
  EXPECT_EQ(c.status().code(), Status::Code::kIoError) << c.status().ToString();
  EXPECT_EQ(sink.Commit().code(), Status::Code::kIoError);
  EXPECT_EQ(record.bytes, data);
  EXPECT_FALSE(record.committed);
}

TEST(BackgroundSink, EveryByteArrivesInOrderInBufferSizedWrites) {
  Record record;
  const std::vector<uint8_t> data = testing::RandomBytes(100000, 7);
  {
    BackgroundSink sink(std::make_unique<RecordingSink>(&record), 4096);
    EXPECT_EQ(sink.Describe(), "file 'out.vfs'");
    EXPECT_TRUE(sink.Seekable());
    // Pieces smaller than, equal to and larger than a buffer.
    size_t at = 0;
    for (size_t piece : {1u, 40u, 4096u, 10000u, 3u, 30000u}) {
      ASSERT_TRUE(sink.Write(std::span<const uint8_t>(data.data() + at, piece)).ok());
      at += piece;
    }
    ASSERT_TRUE(sink.Write(std::span<const uint8_t>(data.data() + at, data.size() - at)).ok());
    EXPECT_FALSE(record.committed);
    Status s = sink.Commit();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_TRUE(record.committed);
  EXPECT_EQ(record.bytes, data);
  for (size_t i = 0; i + 1 < record.write_sizes.size(); ++i) EXPECT_EQ(record.write_sizes[i], 4096u) << i;
}

TEST(BackgroundSink, TheInnerSinksErrorComesBackAndNothingIsCommitted) {
  Record record;
  const std::vector<uint8_t> data = testing::RandomBytes(64 * 1024, 8);
  {
    BackgroundSink sink(std::make_unique<RecordingSink>(&record, 10000), 4096);
    Status s;
    for (int i = 0; i < 100 && s.ok(); ++i) s = sink.Write(data);  // fails once the thread has failed
    EXPECT_EQ(s.code(), Status::Code::kIoError) << s.ToString();
    EXPECT_NE(s.message().find("No space left"), std::string::npos) << s.ToString();
    s = sink.Commit();
    EXPECT_EQ(s.code(), Status::Code::kIoError) << s.ToString();
  }
  EXPECT_FALSE(record.committed);
  EXPECT_TRUE(record.destroyed);
}

TEST(BackgroundSink, AnErrorInTheLastBufferFailsCommit) {
  Record record;
  const std::vector<uint8_t> data = testing::RandomBytes(5000, 9);
  BackgroundSink sink(std::make_unique<RecordingSink>(&record, 4999), 1 << 20);
  ASSERT_TRUE(sink.Write(data).ok());  // all in the buffer, not written yet
  Status s = sink.Commit();
  EXPECT_EQ(s.code(), Status::Code::kIoError) << s.ToString();
  EXPECT_FALSE(record.committed);
}

TEST(BackgroundSink, DestroyedWithoutCommitLeavesTheInnerSinkUncommitted) {
  Record record;
  {
    BackgroundSink sink(std::make_unique<RecordingSink>(&record), 4096);
    ASSERT_TRUE(sink.Write(testing::RandomBytes(50000, 10)).ok());
  }
  EXPECT_TRUE(record.destroyed);
  EXPECT_FALSE(record.committed);
}

TEST(BackgroundSink, AnEmptyStreamCommits) {
  Record record;
  {
    BackgroundSink sink(std::make_unique<RecordingSink>(&record), 4096);
    ASSERT_TRUE(sink.Commit().ok());
  }
  EXPECT_TRUE(record.committed);
  EXPECT_TRUE(record.bytes.empty());
}

}  // namespace
}  // namespace vramflow
