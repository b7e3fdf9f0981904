// SPDX-License-Identifier: MIT
// ImageFileStore (image_streamer/image_file_store.h) on its own: what Take answers
// when, spilling within the budget, the rewrite hook, and the stream's
// failure reaching a waiting taker.
#include "image_streamer/image_file_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "codecs/chunk_codec.h"
#include "common/hash.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using testing::TempDir;

std::string Name(uint32_t id) { return std::to_string(id) + ".img"; }

// The bytes WriteTo gives (through a memfd).
std::vector<uint8_t> Contents(const ImageFileStore& store, const ImageFileStore::File& file) {
  UniqueFd fd(::memfd_create("image", MFD_CLOEXEC));
  EXPECT_TRUE(store.WriteTo(file, fd.get(), "test file").ok());
  std::vector<uint8_t> out(static_cast<size_t>(::lseek(fd.get(), 0, SEEK_END)));
  EXPECT_EQ(::pread(fd.get(), out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  return out;
}

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST(ImageFileStore, AnswersOnlyWhatTheStreamProves) {
  TempDir dir;
  MemoryBudget budget(16 << 20);
  ImageFileStore store(&budget, dir.path(), false);
  ASSERT_TRUE(store.Open().ok());
  ASSERT_TRUE(store.Begin(1, "a.img", false).ok());
  ASSERT_TRUE(store.Write(1, 0, Bytes(100, 1)).ok());
  auto waiting = std::async(std::launch::async, [&] { return store.Take("a.img"); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout) << "a file still arriving";
  ASSERT_TRUE(store.WriteZeros(1, 100, 50).ok());
  ASSERT_TRUE(store.End(1, 150).ok());
  auto taken = waiting.get();
  ASSERT_TRUE(taken.ok() && *taken);
  std::vector<uint8_t> expected = Bytes(100, 1);
  expected.resize(150, 0);
  EXPECT_EQ(Contents(store, **taken), expected);
  store.Release(*taken);
  EXPECT_FALSE(store.Take("a.img").ok()) << "a second take";

  auto absent = std::async(std::launch::async, [&] { return store.Take("b.img"); });
  EXPECT_EQ(absent.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout) << "nothing proves it absent";
  const std::string list = std::string("a.img") + '\0' + "c.img" + '\0';
  ASSERT_TRUE(store.Begin(2, kStreamerFileListObject, true).ok());
  ASSERT_TRUE(
      store.Write(2, 0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(list.data()), list.size())).ok());
  ASSERT_TRUE(store.End(2, list.size()).ok());
  auto answer = absent.get();
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(*answer, nullptr);
  EXPECT_FALSE(store.Begin(3, "d.img", false).ok()) << "a file the list does not name";

  auto failing = std::async(std::launch::async, [&] { return store.Take("c.img"); });
  EXPECT_EQ(failing.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  store.Finish(Status::Corruption("frame 9 at stream offset 1234: bad"));
  auto failed = failing.get();
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.status().ToString().find("offset 1234"), std::string::npos);
}

TEST(ImageFileStore, SpillsWithinTheBudget) {
  TempDir dir;
  MemoryBudget budget(4 << 20);
  ImageFileStore store(&budget, dir.path(), false);
  ASSERT_TRUE(store.Open().ok());
  std::vector<std::vector<uint8_t>> files;
  for (uint32_t id = 1; id <= 6; ++id) {
    files.push_back(Bytes(1 << 20, static_cast<uint8_t>(id)));
    ASSERT_TRUE(store.Begin(id, Name(id), false).ok());
    for (size_t at = 0; at < files.back().size(); at += 256 << 10)
      ASSERT_TRUE(store.Write(id, at, std::span<const uint8_t>(files.back()).subspan(at, 256 << 10)).ok());
    ASSERT_TRUE(store.End(id, files.back().size()).ok());
    EXPECT_LE(budget.in_use(), budget.limit());
  }
  EXPECT_GE(store.spilled_bytes(), 2u << 20);
  EXPECT_LE(budget.peak(), budget.limit());
  for (uint32_t id = 6; id >= 1; --id) {
    auto file = store.Take(Name(id));
    ASSERT_TRUE(file.ok() && *file);
    EXPECT_EQ(Contents(store, **file), files[id - 1]) << id;
    store.Release(*file);
  }
  EXPECT_LT(budget.in_use(), 4096u) << "only what the store keeps of each file (its name, its state)";
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "spill files of released files";
}

// Issue 55, defect 4: zero runs that touch are one range, whatever their
// number, in memory and in a spill file (a hole there).
TEST(ImageFileStore, RangesThatTouchAreOne) {
  TempDir dir;
  for (bool spill_all : {false, true}) {
    MemoryBudget budget(1 << 20);
    {
      ImageFileStore store(&budget, dir.path(), spill_all);
      ASSERT_TRUE(store.Open().ok());
      ASSERT_TRUE(store.Begin(1, "a.img", false).ok());
      const uint64_t in_use = budget.in_use();
      constexpr uint64_t kRuns = 200'000;
      for (uint64_t i = 0; i < kRuns; ++i) ASSERT_TRUE(store.WriteZeros(1, i, 1).ok()) << i;
      ASSERT_TRUE(store.Write(1, kRuns, Bytes(10, 5)).ok());
      for (uint64_t i = kRuns + 10; i < 2 * kRuns; ++i) ASSERT_TRUE(store.WriteZeros(1, i, 1).ok()) << i;
      EXPECT_LT(budget.in_use() - in_use, 8192u) << "spill_all " << spill_all;
      ASSERT_TRUE(store.End(1, 2 * kRuns).ok());
      auto file = store.Take("a.img");
      ASSERT_TRUE(file.ok() && *file);
      std::vector<uint8_t> expected(2 * kRuns, 0);
      const std::vector<uint8_t> bytes = Bytes(10, 5);
      std::copy(bytes.begin(), bytes.end(), expected.begin() + kRuns);
      EXPECT_EQ(Contents(store, **file), expected) << "spill_all " << spill_all;
      store.Release(*file);
    }
    EXPECT_EQ(budget.in_use(), 0u) << "spill_all " << spill_all;
  }
}

// Issue 55, defect 4: ranges apart (every other byte, as a hostile stream
// may send them) are charged to the budget: the store refuses them, naming
// --max-memory, once they pass it, instead of growing (they were not
// charged at all).
TEST(ImageFileStore, RangesApartAreChargedToTheBudget) {
  TempDir dir;
  MemoryBudget budget(1 << 20);
  ImageFileStore store(&budget, dir.path(), false);
  ASSERT_TRUE(store.Open().ok());
  ASSERT_TRUE(store.Begin(1, "a.img", false).ok());
  Status s;
  uint64_t runs = 0;
  for (; runs < 100'000 && s.ok(); ++runs) s = store.WriteZeros(1, 2 * runs, 1);
  EXPECT_FALSE(s.ok()) << runs << " ranges apart within 1 MiB";
  EXPECT_NE(s.ToString().find("--max-memory"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("a.img"), std::string::npos) << s.ToString();
  EXPECT_LE(budget.peak(), budget.limit());
}

TEST(ImageFileStore, RewritesAFileBeforeItIsTaken) {
  TempDir dir;
  MemoryBudget budget(4 << 20);
  ImageFileStore store(&budget, dir.path(), false);
  ASSERT_TRUE(store.Open().ok());
  store.SetRewrite("files.img", [](std::vector<uint8_t> bytes) -> Result<std::vector<uint8_t>> {
    for (uint8_t& b : bytes) b ^= 0xff;
    bytes.push_back(42);
    return bytes;
  });
  store.SetRewrite("bad.img", [](std::vector<uint8_t>) -> Result<std::vector<uint8_t>> {
    return Status::InvalidArgument("port 80 is not listening");
  });
  ASSERT_TRUE(store.Begin(1, "files.img", false).ok());
  ASSERT_TRUE(store.Write(1, 0, Bytes(10, 3)).ok());
  ASSERT_TRUE(store.End(1, 10).ok());
  auto file = store.Take("files.img");
  ASSERT_TRUE(file.ok() && *file);
  std::vector<uint8_t> expected = Bytes(10, 3);
  for (uint8_t& b : expected) b ^= 0xff;
  expected.push_back(42);
  EXPECT_EQ(Contents(store, **file), expected);
  ASSERT_TRUE(store.Begin(2, "bad.img", false).ok());
  ASSERT_TRUE(store.Write(2, 0, Bytes(10, 3)).ok());
  Status s = store.End(2, 10);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("port 80"), std::string::npos) << s.ToString();
}

// A stream file as serve -i reads it, reduced to what the store reads
// again: DATA payloads (lz4) after a few bytes of stream header.
class FramesInAFile {
 public:
  explicit FramesInAFile(const std::string& path) : path_(path) {
    EncoderOptions options;
    options.codec = CodecChoice::kLz4;
    options.transform = TransformChoice::kNone;
    options.detect_zero_runs = false;
    encoder_ = std::make_unique<ChunkEncoder>(options);
    bytes_.assign(64, 0xee);
  }
  // Appends `raw` as one frame; where it lies.
  StoredFrame Add(std::span<const uint8_t> raw) {
    EncodedChunk chunk;
    EXPECT_TRUE(encoder_->Encode(raw, &chunk).ok());
    StoredFrame frame{bytes_.size(), static_cast<uint32_t>(chunk.payload.size()), static_cast<uint8_t>(chunk.codec),
                      static_cast<uint8_t>(chunk.transform), chunk.raw_hash};
    bytes_.insert(bytes_.end(), chunk.payload.begin(), chunk.payload.end());
    return frame;
  }
  // Writes the file; an fd of it for the store, the stream starting at `start`.
  UniqueFd Open(uint64_t start = 0) {
    std::vector<uint8_t> file(start, 0x55);
    file.insert(file.end(), bytes_.begin(), bytes_.end());
    UniqueFd fd(::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    EXPECT_EQ(::pwrite(fd.get(), file.data(), file.size(), 0), static_cast<ssize_t>(file.size()));
    return fd;
  }

 private:
  std::string path_;
  std::unique_ptr<ChunkEncoder> encoder_;
  std::vector<uint8_t> bytes_;
};

// Issue 54: with a stream file, DATA is not held nor spilled but read
// again from the file and decoded when the file is written out: files four
// times the budget stay within it with nothing spilled, come back intact,
// and a dedup reference into such a file is decoded from it too.
TEST(ImageFileStore, FramesAreReadAgainFromTheStreamFile) {
  TempDir dir;
  std::filesystem::create_directories(dir.File("spill"));
  constexpr size_t kFrame = 256 << 10;
  MemoryBudget budget(2 << 20);
  ImageFileStore store(&budget, dir.File("spill"), false);
  ASSERT_TRUE(store.Open().ok());
  FramesInAFile stream(dir.File("s.vfs"));
  std::vector<std::vector<uint8_t>> files;
  std::vector<std::vector<StoredFrame>> frames;
  for (uint32_t id = 1; id <= 2; ++id) {
    files.push_back(Bytes(4 << 20, static_cast<uint8_t>(id)));
    frames.emplace_back();
    for (size_t at = 0; at < files.back().size(); at += kFrame)
      frames.back().push_back(stream.Add(std::span<const uint8_t>(files.back()).subspan(at, kFrame)));
  }
  store.SetStreamFile(stream.Open(/*start=*/100), 100);
  for (uint32_t id = 1; id <= 2; ++id) {
    ASSERT_TRUE(store.Begin(id, Name(id), false).ok());
    for (size_t i = 0; i < frames[id - 1].size(); ++i) {
      auto bytes = std::span<const uint8_t>(files[id - 1]).subspan(i * kFrame, kFrame);
      ASSERT_TRUE(store.WriteFrame(id, i * kFrame, frames[id - 1][i], bytes).ok());
    }
    ASSERT_TRUE(store.End(id, files[id - 1].size()).ok());
  }
  // File 3: a dedup reference to the second frame of file 1.
  ASSERT_TRUE(store.Begin(3, Name(3), false).ok());
  auto referenced = std::span<const uint8_t>(files[0]).subspan(kFrame, kFrame);
  ASSERT_TRUE(store.Copy(3, 0, 1, kFrame, kFrame, Hash64(referenced.data(), referenced.size())).ok());
  ASSERT_TRUE(store.End(3, kFrame).ok());
  EXPECT_EQ(store.spilled_bytes(), 0u);
  EXPECT_TRUE(std::filesystem::is_empty(dir.File("spill")));
  EXPECT_LE(budget.peak(), budget.limit());
  for (uint32_t id = 1; id <= 3; ++id) {
    auto file = store.Take(Name(id));
    ASSERT_TRUE(file.ok() && *file) << id;
    const std::vector<uint8_t> expected =
        id == 3 ? std::vector<uint8_t>(referenced.begin(), referenced.end()) : files[id - 1];
    EXPECT_EQ(Contents(store, **file), expected) << id;
    store.Release(*file);
  }
  EXPECT_LT(budget.in_use(), 4096u) << "only what the store keeps of each file (its name, its state)";
}

// A stream file changed after its frames were verified: writing the file
// out fails, naming it and the frame, instead of handing over other bytes.
TEST(ImageFileStore, AStreamFileChangedSinceItWasReadFailsThePush) {
  TempDir dir;
  MemoryBudget budget(4 << 20);
  ImageFileStore store(&budget, dir.path(), false);
  ASSERT_TRUE(store.Open().ok());
  FramesInAFile stream(dir.File("s.vfs"));
  const std::vector<uint8_t> bytes = Bytes(100000, 9);
  const StoredFrame frame = stream.Add(bytes);
  UniqueFd fd = stream.Open();
  const int raw_fd = fd.get();
  store.SetStreamFile(std::move(fd), 0);
  ASSERT_TRUE(store.Begin(1, "pages-1.img", false).ok());
  ASSERT_TRUE(store.WriteFrame(1, 0, frame, bytes).ok());
  ASSERT_TRUE(store.End(1, bytes.size()).ok());
  const uint8_t flipped = 0x42;
  ASSERT_EQ(::pwrite(raw_fd, &flipped, 1, static_cast<off_t>(frame.payload_offset + 10)), 1);
  auto file = store.Take("pages-1.img");
  ASSERT_TRUE(file.ok() && *file);
  UniqueFd out(::memfd_create("image", MFD_CLOEXEC));
  Status s = store.WriteTo(**file, out.get(), "image file pages-1.img");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("pages-1.img"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("stream offset " + std::to_string(frame.payload_offset)), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.ToString().find("changed"), std::string::npos) << s.ToString();
  store.Release(*file);
}

}  // namespace
}  // namespace vramflow
