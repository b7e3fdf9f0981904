// SPDX-License-Identifier: MIT
// RealCriu.StreamerServe* / StreamerExtract*FromAPackedDump: `vramflow
// streamer serve` and `extract` with the real CRIU 4.2, on streams that no
// `streamer capture` wrote: a real process is dumped with a plain
// `criu dump -D DIR`, its image files are packed into one vramflow stream by
// `vramflow pack` (one object per file, named as CRIU names it; no list of
// files, so absent files are answered at the stream's end), the files are
// removed, and the process comes back through `serve` + `criu restore
// --stream`, or through `extract` + a plain `criu restore -D`. The process
// is the fixture's float holder, whose array is checked after the restore.
// real_criu_streamer_test.cc runs capture and serve together.
#include "tests/support/real_criu_fixture.h"

namespace vramflow {
namespace real_criu {
namespace {

class PackedDump {
 public:
  PackedDump(const TempDir& dir, std::string images)
      : images_(std::move(images)), stream_(dir.File("packed.vfs")), tmp_(dir.File("tmp")) {}

  // Dumps `pid` into the images directory with a plain `criu dump`, packs
  // every file into the stream and empties the directory.
  void DumpAndPack(pid_t pid) {
    testing::CommandResult r =
        RunShell(CriuBinary() + " dump -D " + ShellQuote(images_) + " -v4 -t " + std::to_string(pid) + " -o dump.log");
    ASSERT_EQ(r.code, 0) << r.output << ReadText(images_ + "/dump.log");
    ASSERT_TRUE(WaitGone(pid));
    r = RunShell("cd " + ShellQuote(images_) + " && " + Vramflow() + " pack -q * -o " + ShellQuote(stream_) +
                 " && rm -f -- *");
    ASSERT_EQ(r.code, 0) << r.output;
    ASSERT_TRUE(std::filesystem::is_empty(images_));
    std::filesystem::create_directories(tmp_);
  }
  // Flips a byte in the middle of the stream (in pages-1.img's frames).
  void Corrupt() { FlipAByteInTheMiddle(stream_); }
  // `vramflow streamer serve` (its spill directory under tmp()) beside
  // `criu restore --stream`: CRIU's exit status; serve's in `serve_code`,
  // its output (progress lines and errors) in `serve_output`.
  int ServeAndRestore(const std::string& serve_options, int* serve_code, std::string* serve_output) {
    const std::string log = tmp_ + "/../serve.log", rc = tmp_ + "/../serve.rc";
    const std::string socket = images_ + "/streamer-serve.sock";
    testing::CommandResult r =
        RunShell("(TMPDIR=" + ShellQuote(tmp_) + " " + Vramflow() + " streamer -D " + ShellQuote(images_) + " -i " +
                 ShellQuote(stream_) + " " + serve_options + " serve > " + ShellQuote(log) + " 2>&1; echo $? > " +
                 ShellQuote(rc) + ") & srv=$!; for i in $(seq 500); do [ -S " + ShellQuote(socket) +
                 " ] && break; sleep 0.02; done; " + CriuBinary() + " restore -D " + ShellQuote(images_) +
                 " --stream -d -v4 -o restore.log; criu=$?; wait $srv; exit $criu");
    const std::string code = ReadText(rc);
    *serve_code = code.empty() ? -1 : std::atoi(code.c_str());
    *serve_output = ReadText(log);
    return r.code;
  }
  const std::string& stream() const { return stream_; }
  const std::string& tmp() const { return tmp_; }

 private:
  std::string images_;
  std::string stream_;
  std::string tmp_;
};

// Dump -> pack -> serve with a budget smaller than the image (files spill)
// -> criu restore --stream: alive, its floats intact, nothing left behind.
TEST_F(RealCriu, StreamerServeFromAPackedDump) {
  REQUIRE_REAL_CRIU();
  const pid_t pid = StartFloatHolder(16);
  PackedDump packed(dir_, images_);
  packed.DumpAndPack(pid);
  ASSERT_FALSE(HasFatalFailure());
  int serve_code = -1;
  std::string serve_output;
  const int criu = packed.ServeAndRestore("-m 8M", &serve_code, &serve_output);
  ASSERT_EQ(criu, 0) << RestoreLog() << serve_output;
  EXPECT_EQ(serve_code, 0) << serve_output;
  // socket-init at once, the stats line once the stream was read.
  EXPECT_EQ(serve_output.rfind(
                "socket-init\n{\"shards\":[{\"size\":" + std::to_string(std::filesystem::file_size(packed.stream())) +
                    ",\"transfer_duration_millis\":",
                0),
            0u)
      << serve_output;
  CheckFloatHolder(pid);
  EXPECT_TRUE(std::filesystem::is_empty(packed.tmp())) << "the spill directory is left behind";
  EXPECT_FALSE(std::filesystem::exists(images_ + "/streamer-serve.sock"));
}

// Dump -> pack -> extract -> plain criu restore -D: alive, floats intact.
TEST_F(RealCriu, StreamerExtractFromAPackedDump) {
  REQUIRE_REAL_CRIU();
  const pid_t pid = StartFloatHolder(8);
  PackedDump packed(dir_, images_);
  packed.DumpAndPack(pid);
  ASSERT_FALSE(HasFatalFailure());
  testing::CommandResult r =
      RunShell(Vramflow() + " streamer -D " + ShellQuote(images_) + " -i " + ShellQuote(packed.stream()) + " extract");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("{\"shards\":[{\"size\":", 0), 0u) << r.output;
  EXPECT_TRUE(std::filesystem::exists(images_ + "/inventory.img"));
  r = RunShell(CriuBinary() + " restore -D " + ShellQuote(images_) + " -d -v4 -o restore.log");
  ASSERT_EQ(r.code, 0) << r.output << RestoreLog();
  CheckFloatHolder(pid);
}

// A flipped byte in pages-1.img's frames: serve fails naming the frame, the
// restore fails, no process comes back, nothing is left behind.
TEST_F(RealCriu, StreamerServeCorruptPackedDump) {
  REQUIRE_REAL_CRIU();
  const pid_t pid = StartFloatHolder(16);
  PackedDump packed(dir_, images_);
  packed.DumpAndPack(pid);
  ASSERT_FALSE(HasFatalFailure());
  packed.Corrupt();
  int serve_code = -1;
  std::string serve_output;
  const int criu = packed.ServeAndRestore("", &serve_code, &serve_output);
  EXPECT_NE(criu, 0) << "CRIU restored from a corrupt stream\n" << RestoreLog();
  EXPECT_NE(serve_code, 0) << serve_output;
  EXPECT_NE(serve_output.find("pages-1.img"), std::string::npos) << serve_output;
  EXPECT_NE(serve_output.find("stream offset"), std::string::npos) << serve_output;
  EXPECT_FALSE(ProcessExists(pid)) << "a process came back from a corrupt stream";
  EXPECT_TRUE(std::filesystem::is_empty(packed.tmp())) << "the spill directory is left behind";
  EXPECT_FALSE(std::filesystem::exists(images_ + "/streamer-serve.sock"));
}

}  // namespace
}  // namespace real_criu
}  // namespace vramflow
