// SPDX-License-Identifier: MIT
// BackgroundSink: every byte reaches the inner sink in order, the inner
// sink's error comes back to the writer, and nothing is committed unless
// Commit() succeeds.
#include "transport/background_sink.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "test_util.h"

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
