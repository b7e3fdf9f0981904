// SPDX-License-Identifier: MIT
// `vramflow streamer capture` (image_streamer/capture.cc) and its engine
// (streamer/concurrent_dump.h), with CRIU played by the protocol stand-in
// (sim/criu/criu_streamer_protocol.h: CriuStreamerClient). The real CRIU runs in
// real_criu_streamer_capture_test.cc.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "image_streamer/capture.h"
#include "sim/criu/criu_streamer_protocol.h"
#include "streamer/concurrent_dump.h"
#include "streamer/format/stream_reader.h"
#include "tests/support/cli_child.h"
#include "tests/support/shell.h"
#include "tests/support/test_util.h"
#include "transport/core/memory_stream.h"
#include "transport/open_uri.h"

namespace vramflow {
namespace {

using testing::TempDir;
using testing::TestObject;

// A complete dump always ends with this (criu/cr-dump.c): INVENTORY_MAGIC,
// then one entry (a length and that many bytes).
std::vector<uint8_t> Inventory() {
  std::vector<uint8_t> bytes = {0x16, 0x31, 0x31, 0x58, 5, 0, 0, 0, 8, 1, 16, 2, 24};
  return bytes;
}

// Writes all of `data` to the non-blocking `fd` or gives up after `limit`
// (a streamer that stops reading would otherwise hang the test).
bool WriteWithin(int fd, std::span<const uint8_t> data, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    if (std::chrono::steady_clock::now() > end) return false;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, 100);
  }
  return true;
}

// What a stream holds, read back with the reference reader.
struct ReadBack {
  struct Object {
    std::vector<uint8_t> bytes;
    std::set<uint8_t> codecs;
    std::set<uint8_t> transforms;
    std::vector<std::pair<std::string, std::string>> attributes;
    size_t frames = 0;
  };
  Status status;
  std::vector<std::string> order;  // object names in OBJECT_BEGIN order
  std::map<std::string, Object> objects;
  std::vector<uint32_t> chunk_objects;  // object id of each chunk frame, in stream order
};

class Collector : public StreamVisitor {
 public:
  explicit Collector(ReadBack* out) : out_(out) {}
  Status OnObjectBegin(const ObjectState& object) override {
    out_->order.push_back(object.metadata.name);
    out_->objects[object.metadata.name].attributes = object.metadata.attributes;
    return Status::Ok();
  }
  Status OnChunk(const ChunkEvent& chunk) override {
    ReadBack::Object& object = out_->objects[chunk.object.metadata.name];
    const uint64_t end = chunk.header.offset + chunk.header.raw_size;
    if (object.bytes.size() < end) object.bytes.resize(end, 0);
    if (!chunk.data.empty())
      std::memcpy(object.bytes.data() + chunk.header.offset, chunk.data.data(), chunk.data.size());
    object.codecs.insert(chunk.header.codec);
    object.transforms.insert(chunk.header.transform);
    ++object.frames;
    out_->chunk_objects.push_back(chunk.object.id);
    return Status::Ok();
  }
  Status OnObjectEnd(const ObjectState& object) override {
    out_->objects[object.metadata.name].bytes.resize(object.size, 0);
    return Status::Ok();
  }

 private:
  ReadBack* out_;
};

ReadBack ReadStreamFile(const std::string& path) {
  ReadBack back;
  auto source = OpenSource(path, TransportOptions{});
  if (!source.ok()) {
    back.status = source.status();
    return back;
  }
  Collector collector(&back);
  back.status = ReadStream(**source, collector);
  return back;
}

std::vector<uint8_t> Bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

// One `streamer capture` run in this process, with CRIU played by a
// CriuStreamerClient the test drives.
class Capture {
 public:
  explicit Capture(uint32_t chunk_size = 64 << 10, uint64_t max_memory = 64ull << 20,
                   std::vector<std::pair<std::string, int>> ext_files = {}) {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    progress_read_.Reset(fds[0]);
    progress_write_.Reset(fds[1]);
    options_.images_dir = dir_.File("images");
    options_.stream_uri = output();
    options_.progress_fd = progress_write_.get();
    options_.ext_files = std::move(ext_files);
    options_.pipeline.chunk_size = chunk_size;
    options_.pipeline.max_memory = max_memory;
    options_.pipeline.threads = 2;
    // Should the test fail to connect, capture gives up within a minute
    // rather than holding the test until ctest's timeout.
    options_.criu_timeout_s = 60;
    thread_ = std::thread([this] { status_ = RunStreamerCapture(options_); });
    const std::string socket = options_.images_dir + "/streamer-capture.sock";
    for (int i = 0; i < 500 && !std::filesystem::exists(socket); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto client = CriuStreamerClient::Connect(options_.images_dir, /*dump=*/true);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (client.ok()) client_ = std::move(*client);
  }
  ~Capture() {
    client_.reset();
    if (thread_.joinable()) thread_.join();
  }

  // CRIU's img_streamer_open: our end of the new file's pipe.
  UniqueFd Open(const std::string& name) {
    if (!client_) return UniqueFd();
    const int fd = client_->Open(name);
    EXPECT_GE(fd, 0) << name;
    return UniqueFd(fd);
  }
  // A request capture refuses: it may end the connection before CRIU's
  // pipe is sent, so the open may fail on CRIU's side (EPIPE) or not.
  void OpenRefused(const std::string& name) {
    if (client_) UniqueFd(client_->Open(name));
  }
  void WriteFile(const std::string& name, const std::vector<uint8_t>& bytes) {
    UniqueFd fd = Open(name);
    ASSERT_TRUE(WriteWithin(fd.get(), bytes)) << name;
  }
  // CRIU closes its connection; capture's result.
  Status End() {
    client_.reset();
    thread_.join();
    return status_;
  }
  // The progress lines written so far, once there are at least `at_least`
  // (or 10 s have passed).
  std::vector<std::string> ProgressLines(size_t at_least = 0) {
    std::vector<std::string> lines = ProgressLinesNow();
    for (int i = 0; i < 1000 && lines.size() < at_least; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      lines = ProgressLinesNow();
    }
    return lines;
  }
  std::vector<std::string> ProgressLinesNow() {
    ::fcntl(progress_read_.get(), F_SETFL, O_NONBLOCK);
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(progress_read_.get(), buffer, sizeof buffer)) > 0)
      progress_.append(buffer, static_cast<size_t>(n));
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t nl; (nl = progress_.find('\n', start)) != std::string::npos; start = nl + 1)
      lines.push_back(progress_.substr(start, nl - start));
    return lines;
  }
  std::string output() const { return dir_.File("checkpoint.vf"); }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
  StreamerOptions options_;
  UniqueFd progress_read_;
  UniqueFd progress_write_;
  std::string progress_;
  std::unique_ptr<CriuStreamerClient> client_;
  std::thread thread_;
  Status status_;
};

// CRIU writes pages-N and pagemap-N turn by turn from one thread: a pipe
// that is not read while the other is full would stop it for good.
TEST(StreamerCapture, FilesWrittenInTurnsAreReadTogether) {
  Capture capture;
  UniqueFd pagemap = capture.Open("pagemap-1.img");
  UniqueFd pages = capture.Open("pages-1.img");
  std::vector<uint8_t> pagemap_bytes;
  std::vector<uint8_t> pages_bytes;
  // Each round: a little of the pagemap, then more pages than a pipe holds.
  for (int round = 0; round < 8; ++round) {
    const std::vector<uint8_t> entry = Bytes("entry-" + std::to_string(round) + ";");
    ASSERT_TRUE(WriteWithin(pagemap.get(), entry)) << "round " << round;
    pagemap_bytes.insert(pagemap_bytes.end(), entry.begin(), entry.end());
    const std::vector<uint8_t> chunk = testing::ModelBytes(DataKind::kFp32Weights, 256 << 10, round);
    ASSERT_TRUE(WriteWithin(pages.get(), chunk)) << "round " << round << ": capture stopped reading pages-1.img";
    pages_bytes.insert(pages_bytes.end(), chunk.begin(), chunk.end());
  }
  pages.Reset();
  pagemap.Reset();
  capture.WriteFile("inventory.img", Inventory());
  ASSERT_TRUE(capture.End().ok());
  ReadBack back = ReadStreamFile(capture.output());
  ASSERT_TRUE(back.status.ok()) << back.status.ToString();
  EXPECT_EQ(back.objects["pages-1.img"].bytes, pages_bytes);
  EXPECT_EQ(back.objects["pagemap-1.img"].bytes, pagemap_bytes);
}

// Many files open at once, written round-robin in small pieces, more files
// than the capture has chunk buffers: each comes back whole and in order,
// and their chunks interleave in the stream.
TEST(StreamerCapture, ManyConcurrentFilesInterleave) {
  // 128 KiB chunks in 4 MiB: a handful of buffers for 12 files.
  Capture capture(128 << 10, 4ull << 20);
  constexpr int kFiles = 12;
  std::vector<UniqueFd> fds;
  std::vector<std::vector<uint8_t>> contents(kFiles);
  for (int i = 0; i < kFiles; ++i) fds.push_back(capture.Open("pages-" + std::to_string(i + 1) + ".img"));
  for (int round = 0; round < 24; ++round) {
    for (int i = 0; i < kFiles; ++i) {
      const std::vector<uint8_t> piece = testing::ModelBytes(DataKind::kBf16Weights, 40 << 10, round * 100 + i);
      ASSERT_TRUE(WriteWithin(fds[i].get(), piece)) << "file " << i << " round " << round;
      contents[i].insert(contents[i].end(), piece.begin(), piece.end());
    }
  }
  fds.clear();
  capture.WriteFile("inventory.img", Inventory());
  ASSERT_TRUE(capture.End().ok());
  ReadBack back = ReadStreamFile(capture.output());
  ASSERT_TRUE(back.status.ok()) << back.status.ToString();
  for (int i = 0; i < kFiles; ++i)
    EXPECT_EQ(back.objects["pages-" + std::to_string(i + 1) + ".img"].bytes, contents[i]) << "file " << i;
  size_t switches = 0;
  for (size_t i = 1; i < back.chunk_objects.size(); ++i) switches += back.chunk_objects[i] != back.chunk_objects[i - 1];
  EXPECT_GT(switches, static_cast<size_t>(kFiles)) << "the files' chunks did not interleave";
}

// The plugin's VRAM streams (already vramflow streams) and CRIU's small
// images are stored as they are; pages and large files are compressed.
TEST(StreamerCapture, CodecPolicyPerFile) {
  Capture capture;
  std::vector<TestObject> vram = {{"bo-0", testing::TextBytes(300 << 10)}};
  const std::vector<uint8_t> vram_stream = testing::PackToMemory(vram, EncoderOptions{}, 64 << 10);
  const std::vector<uint8_t> small = testing::TextBytes(3000);
  const std::vector<uint8_t> small_pages = testing::TextBytes(5000);
  const std::vector<uint8_t> large = testing::TextBytes(500 << 10);
  capture.WriteFile("amdgpu-vram-1.img", vram_stream);
  capture.WriteFile("core-1.img", small);
  capture.WriteFile("pages-1.img", small_pages);
  capture.WriteFile("tmpfs-dev-1.tar.gz.img", large);
  capture.WriteFile("inventory.img", Inventory());
  ASSERT_TRUE(capture.End().ok());
  ReadBack back = ReadStreamFile(capture.output());
  ASSERT_TRUE(back.status.ok()) << back.status.ToString();
  const uint8_t raw = static_cast<uint8_t>(CodecId::kRaw);
  const uint8_t none = static_cast<uint8_t>(TransformId::kNone);
  EXPECT_EQ(back.objects["amdgpu-vram-1.img"].bytes, vram_stream);
  EXPECT_EQ(back.objects["amdgpu-vram-1.img"].codecs, std::set<uint8_t>{raw});
  EXPECT_EQ(back.objects["amdgpu-vram-1.img"].transforms, std::set<uint8_t>{none});
  EXPECT_EQ(back.objects["core-1.img"].bytes, small);
  EXPECT_EQ(back.objects["core-1.img"].codecs, std::set<uint8_t>{raw});
  EXPECT_EQ(back.objects["inventory.img"].codecs, std::set<uint8_t>{raw});
  EXPECT_EQ(back.objects["pages-1.img"].bytes, small_pages);
  EXPECT_EQ(back.objects["pages-1.img"].codecs.count(raw), 0u) << "pages are compressed, however small";
  EXPECT_EQ(back.objects["tmpfs-dev-1.tar.gz.img"].bytes, large);
  EXPECT_EQ(back.objects["tmpfs-dev-1.tar.gz.img"].codecs.count(raw), 0u) << "a file larger than a chunk is compressed";
}

// The last object lists every file, CRIU's and ext files, each ended by a
// NUL, and says what it is; the progress lines come in order, the stats
// line with the stream's size.
TEST(StreamerCapture, FileListAndProgressLines) {
  int ext[2];
  ASSERT_EQ(::pipe2(ext, O_CLOEXEC), 0);
  UniqueFd ext_write(ext[1]);
  const std::vector<uint8_t> tar = testing::TextBytes(200 << 10);
  Capture capture(64 << 10, 64ull << 20, {{"fs.tar", ext[0]}});
  std::thread ext_writer([&] {
    EXPECT_TRUE(WriteWithin(ext_write.get(), tar));
    ext_write.Reset();
  });
  EXPECT_EQ(capture.ProgressLines(1), std::vector<std::string>{"socket-init"});
  capture.WriteFile("cpuinfo.img", Bytes("cpu"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(capture.ProgressLines(), std::vector<std::string>{"socket-init"})
      << "cpuinfo.img is read before the freeze";
  capture.WriteFile("core-7.img", Bytes("core"));
  capture.WriteFile("inventory.img", Inventory());
  ext_writer.join();
  ASSERT_TRUE(capture.End().ok());
  const std::vector<std::string> lines = capture.ProgressLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "socket-init");
  EXPECT_EQ(lines[1], "checkpoint-start");
  const std::string size = "{\"shards\":[{\"size\":" + std::to_string(std::filesystem::file_size(capture.output())) +
                           ",\"transfer_duration_millis\":";
  EXPECT_EQ(lines[2].rfind(size, 0), 0u) << lines[2];
  EXPECT_EQ(lines[2].substr(lines[2].size() - 3), "}]}") << lines[2];

  ReadBack back = ReadStreamFile(capture.output());
  ASSERT_TRUE(back.status.ok()) << back.status.ToString();
  EXPECT_EQ(back.objects["fs.tar"].bytes, tar);
  EXPECT_EQ(back.objects["cpuinfo.img"].bytes, Bytes("cpu"));
  const ReadBack::Object& list = back.objects[".vramflow-streamer-files"];
  const std::vector<std::pair<std::string, std::string>> attributes = {{"vramflow-streamer", "file-list"}};
  EXPECT_EQ(list.attributes, attributes);
  EXPECT_EQ(list.bytes, Bytes(std::string("fs.tar\0cpuinfo.img\0core-7.img\0inventory.img\0", 44)));
}

// A file CRIU asks for twice is an error, and nothing is committed.
TEST(StreamerCapture, SecondRequestForAFileFails) {
  Capture capture;
  capture.WriteFile("core-1.img", Bytes("one"));
  capture.OpenRefused("core-1.img");
  Status s = capture.End();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("core-1.img a second time"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(capture.output()));
}

// CRIU ending without a whole inventory.img (a failed or killed dump): an
// error naming it, and no output.
TEST(StreamerCapture, DumpWithoutInventoryFails) {
  Capture capture;
  capture.WriteFile("core-1.img", Bytes("core"));
  Status s = capture.End();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("inventory.img"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(capture.output()));
  for (const auto& e : std::filesystem::directory_iterator(capture.dir().path()))
    EXPECT_EQ(e.path().filename().string().rfind("checkpoint.vf", 0), std::string::npos) << "left behind: " << e.path();
}

TEST(StreamerCapture, TruncatedInventoryFails) {
  Capture capture;
  std::vector<uint8_t> cut = Inventory();
  cut.pop_back();
  capture.WriteFile("inventory.img", cut);
  Status s = capture.End();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("inventory.img holds 12 bytes where its entry needs 13"), std::string::npos)
      << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(capture.output()));
}

// The command itself: by default the stream goes to stdout (the shard fd),
// the progress lines to stderr.
TEST(StreamerCaptureCli, StreamToStdout) {
  TempDir dir;
  const std::string images = dir.File("images");
  const std::string stream = dir.File("stream.vf");
  FILE* capture =
      ::popen((testing::ShellQuote(VRAMFLOW_BINARY) + " streamer -D " + testing::ShellQuote(images) + " capture > " +
               testing::ShellQuote(stream) + " 2>" + testing::ShellQuote(dir.File("err")) + "; echo $?")
                  .c_str(),
              "r");
  ASSERT_NE(capture, nullptr);
  for (int i = 0; i < 500 && !std::filesystem::exists(images + "/streamer-capture.sock"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::vector<uint8_t> pages = testing::ModelBytes(DataKind::kFp32Weights, 3 << 20, 5);
  {
    auto client = CriuStreamerClient::Connect(images, /*dump=*/true);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    UniqueFd fd((*client)->Open("pages-1.img"));
    ASSERT_TRUE(WriteWithin(fd.get(), pages));
    fd.Reset();
    UniqueFd inventory((*client)->Open("inventory.img"));
    ASSERT_TRUE(WriteWithin(inventory.get(), Inventory()));
  }
  char rc[16] = {};
  ASSERT_NE(::fgets(rc, sizeof rc, capture), nullptr);
  ::pclose(capture);
  const std::vector<uint8_t> err = testing::ReadFileBytes(dir.File("err"));
  EXPECT_STREQ(rc, "0\n") << std::string(err.begin(), err.end());
  ReadBack back = ReadStreamFile(stream);
  ASSERT_TRUE(back.status.ok()) << back.status.ToString();
  EXPECT_EQ(back.objects["pages-1.img"].bytes, pages);
  EXPECT_FALSE(std::filesystem::exists(images + "/streamer-capture.sock"));
}

// The memory mappings of process `pid` (each thread's stack is two, the
// stack and its guard page, kept until the thread is joined).
size_t MappingCount(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  size_t lines = 0;
  for (std::string line; std::getline(maps, line);) ++lines;
  return lines;
}

// The threads of process `pid` that are running (a finished thread is not
// one, joined or not).
size_t LiveThreads(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoul(line.substr(8));
  return 0;
}

// Waits (up to 10 s) until `pid` runs at most `threads` threads.
void WaitForThreads(pid_t pid, size_t threads) {
  for (int i = 0; i < 10000 && LiveThreads(pid) > threads; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Issue 55, defect 5: each file has a reader thread, joined once it has
// finished, not at the dump's end: 3000 files written one after another
// leave no trace in capture's mappings (each kept its stack, and about
// 32,700 files ran out of threads: "Resource temporarily unavailable").
// CRIU waits whenever capture runs many readers, so that a busy machine
// never has it hold 256 files open at once (another limit).
TEST(StreamerCaptureCli, FinishedReadersAreJoinedAsTheyFinish) {
  constexpr int kFiles = 3000;
  TempDir dir;
  const std::string images = dir.File("images");
  testing::CliChild capture(VRAMFLOW_BINARY, {"streamer", "-D", images, "-o", dir.File("out.vf"), "capture"},
                            dir.File("capture.log"));
  for (int i = 0; i < 500 && !std::filesystem::exists(images + "/streamer-capture.sock"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  size_t before = 0;
  size_t after = 0;
  std::string failed;  // the file CRIU could not write, if any
  {
    auto client = CriuStreamerClient::Connect(images, /*dump=*/true);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    auto write = [&](const std::string& name, const std::string& text) {
      UniqueFd fd((*client)->Open(name));
      if (!fd.valid() || !WriteWithin(fd.get(), name == "inventory.img" ? Inventory() : Bytes(text))) failed = name;
      return failed.empty();
    };
    write("core-0.img", "first");
    WaitForThreads(capture.pid(), 16);
    before = MappingCount(capture.pid());
    for (int i = 1; i < kFiles && write("core-" + std::to_string(i) + ".img", std::to_string(i)); ++i)
      if (i % 16 == 0) WaitForThreads(capture.pid(), 64);
    WaitForThreads(capture.pid(), 16);
    after = MappingCount(capture.pid());
    if (failed.empty()) write("inventory.img", "");
  }
  const int code = capture.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(failed.empty() && code == 0) << "CRIU failed at " << failed << "; capture exited " << code << "\n"
                                           << capture.Log();
  EXPECT_LT(after, before + 1000) << kFiles << " files written in turn left " << after - before
                                  << " more mappings in capture: finished readers are not joined";
  ReadBack back = ReadStreamFile(dir.File("out.vf"));
  ASSERT_TRUE(back.status.ok()) << back.status.ToString();
  EXPECT_EQ(back.objects["core-2999.img"].bytes, Bytes("2999"));
  EXPECT_EQ(back.order.size(), kFiles + 2u) << "the files, inventory.img and the file list";
}

// SIGTERM before CRIU connects: the socket file goes, the exit status says
// the signal.
TEST(StreamerCaptureCli, SigtermRemovesTheSocket) {
  TempDir dir;
  const std::string images = dir.File("images");
  testing::CommandResult r = testing::RunShell(
      testing::ShellQuote(VRAMFLOW_BINARY) + " streamer -D " + testing::ShellQuote(images) + " capture -o " +
      testing::ShellQuote(dir.File("out.vf")) + " & p=$!; for i in $(seq 500); do [ -S " + testing::ShellQuote(images) +
      "/streamer-capture.sock ] && break; sleep 0.01; done; kill -TERM $p; wait $p; echo rc=$?");
  EXPECT_NE(r.output.find("rc=143"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(images + "/streamer-capture.sock"));
  EXPECT_FALSE(std::filesystem::exists(dir.File("out.vf")));
}

// The engine alone: an input far larger than the memory budget goes
// through a fixed set of buffers, within the budget.
TEST(ConcurrentDump, LargeInputWithinASmallBudget) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  MemorySink sink;
  PipelineOptions options;
  options.chunk_size = 64 << 10;
  options.max_memory = 3ull << 20;
  options.threads = 2;
  auto dump = ConcurrentDump::Start(&sink, options);
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  ConcurrentInput input;
  input.metadata.name = "pages-1.img";
  input.fd = std::move(read_end);
  ASSERT_TRUE((*dump)->Add(std::move(input)).ok());
  constexpr size_t kTotal = 48u << 20;
  uint64_t sum = 0;
  for (size_t done = 0; done < kTotal; done += 1 << 20) {
    const std::vector<uint8_t> piece = testing::ModelBytes(DataKind::kFp32Weights, 1 << 20, done);
    for (uint8_t b : piece) sum += b;
    ASSERT_TRUE(WriteWithin(write_end.get(), piece));
  }
  write_end.Reset();
  std::vector<ConcurrentObject> objects;
  ASSERT_TRUE((*dump)->Drain(&objects).ok());
  PipelineStats stats;
  ASSERT_TRUE((*dump)->Finish(&stats).ok());
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0].size, kTotal);
  EXPECT_LE(stats.budget_peak, options.max_memory);
  EXPECT_GT(stats.budget_peak, 0u);
  std::vector<TestObject> back;
  ASSERT_TRUE(testing::UnpackFromMemory(sink.bytes(), &back).ok());
  ASSERT_EQ(back.size(), 1u);
  uint64_t back_sum = 0;
  for (uint8_t b : back[0].bytes) back_sum += b;
  EXPECT_EQ(back[0].bytes.size(), kTotal);
  EXPECT_EQ(back_sum, sum);
}

// Dedup within one object only: a chunk repeated in the same input becomes a
// reference to its first copy; the same bytes in another input stay a DATA
// frame (serve lets each file go once CRIU has it). Without dedup, none.
TEST(ConcurrentDump, DedupReferencesStayWithinOneObject) {
  constexpr size_t kChunk = 64 << 10;
  const std::vector<uint8_t> x = testing::ModelBytes(DataKind::kFp32Weights, kChunk, 1);
  const std::vector<uint8_t> y = testing::ModelBytes(DataKind::kFp32Weights, kChunk, 2);
  std::vector<uint8_t> a = x;
  a.insert(a.end(), y.begin(), y.end());
  a.insert(a.end(), x.begin(), x.end());
  for (bool dedup : {true, false}) {
    MemorySink sink;
    PipelineOptions options;
    options.chunk_size = kChunk;
    options.max_memory = 16ull << 20;
    options.threads = 2;
    options.dedup = dedup;
    auto dump = ConcurrentDump::Start(&sink, options);
    ASSERT_TRUE(dump.ok()) << dump.status().ToString();
    ConcurrentInput first, second;
    first.metadata.name = "pages-1.img";
    first.content = a;
    second.metadata.name = "pages-2.img";
    second.content = x;
    ASSERT_TRUE((*dump)->Add(std::move(first)).ok());
    ASSERT_TRUE((*dump)->Add(std::move(second)).ok());
    std::vector<ConcurrentObject> objects;
    ASSERT_TRUE((*dump)->Drain(&objects).ok());
    PipelineStats stats;
    ASSERT_TRUE((*dump)->Finish(&stats).ok());

    // Every reference, as (object it is in, object it names).
    class References : public StreamVisitor {
     public:
      Status OnChunk(const ChunkEvent& chunk) override {
        if (chunk.dedup) {
          found.emplace_back(chunk.object.metadata.name, chunk.dedup->source_object_id);
          EXPECT_EQ(chunk.object.id, chunk.dedup->source_object_id);
        }
        return Status::Ok();
      }
      std::vector<std::pair<std::string, uint32_t>> found;
    } references;
    MemorySource source(sink.bytes());
    ASSERT_TRUE(ReadStream(source, references).ok());
    if (dedup) {
      ASSERT_EQ(references.found.size(), 1u) << "the repeated chunk of pages-1.img, and only that";
      EXPECT_EQ(references.found[0].first, "pages-1.img");
    } else {
      EXPECT_TRUE(references.found.empty());
    }
    std::vector<TestObject> back;
    ASSERT_TRUE(testing::UnpackFromMemory(sink.bytes(), &back).ok());
    ASSERT_EQ(back.size(), 2u);
    for (const TestObject& object : back) EXPECT_EQ(object.bytes, object.name == "pages-1.img" ? a : x) << object.name;
  }
}

// Each open input has a thread: past the limit, the dump fails.
TEST(ConcurrentDump, TooManyOpenInputsFail) {
  MemorySink sink;
  PipelineOptions options;
  options.chunk_size = 64 << 10;
  options.max_memory = 8ull << 20;
  options.threads = 1;
  auto dump = ConcurrentDump::Start(&sink, options, /*max_open_inputs=*/3);
  ASSERT_TRUE(dump.ok()) << dump.status().ToString();
  std::vector<UniqueFd> writers;
  for (int i = 0; i < 4; ++i) {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    writers.emplace_back(fds[1]);
    ConcurrentInput input;
    input.metadata.name = "file-" + std::to_string(i);
    input.fd = UniqueFd(fds[0]);
    Status s = (*dump)->Add(std::move(input));
    if (i < 3) {
      EXPECT_TRUE(s.ok()) << s.ToString();
    } else {
      EXPECT_FALSE(s.ok());
      EXPECT_NE(s.message().find("at most 3"), std::string::npos) << s.ToString();
    }
  }
  writers.clear();
  std::vector<ConcurrentObject> objects;
  EXPECT_FALSE((*dump)->Drain(&objects).ok());
}

// A budget that cannot hold two chunk buffers is refused up front.
TEST(ConcurrentDump, BudgetTooSmallIsRefused) {
  MemorySink sink;
  PipelineOptions options;
  options.chunk_size = 4 << 20;
  options.max_memory = 8ull << 20;
  options.threads = 1;
  auto dump = ConcurrentDump::Start(&sink, options);
  ASSERT_FALSE(dump.ok());
  EXPECT_NE(dump.status().message().find("fewer than two"), std::string::npos) << dump.status().ToString();
}

}  // namespace
}  // namespace vramflow
