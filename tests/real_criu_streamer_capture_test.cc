// SPDX-License-Identifier: MIT
// `vramflow streamer capture` under the real CRIU 4.2 (`criu dump --stream`):
// the stream unpacks into an images directory that a plain `criu restore`
// brings back alive with its memory intact; a CRIU killed mid-dump leaves
// no output. Needs root and the CRIU of ../shared/criu (RealCriu fixture).
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/support/real_criu_fixture.h"

namespace vramflow {
namespace real_criu {
namespace {

// A process CRIU can dump (PrepareChildForCriu) running `argv`.
pid_t StartPlain(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    PrepareChildForCriu(log.c_str(), nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

bool WaitForFile(const std::string& path, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Holds `n` floats and writes "<count> <crc32>" of them to OUT at start and
// whenever TRIGGER appears.
constexpr char kFloatHolder[] = R"(
import array, math, os, sys, time, zlib
n, trigger, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
a = array.array('f', (math.sin(i * 0.001) * (1 + i % 7) for i in range(n)))
def report():
    with open(out + '.tmp', 'w') as f:
        f.write('%d %08x' % (len(a), zlib.crc32(a.tobytes())))
    os.rename(out + '.tmp', out)
report()
while True:
    if os.path.exists(trigger):
        os.unlink(trigger)
        report()
    time.sleep(0.02)
)";

std::string Vramflow() { return ShellQuote(VRAMFLOW_BINARY); }

std::string WaitForSocket(const std::string& images) {
  return "for i in $(seq 500); do [ -S " + ShellQuote(images) + "/streamer-capture.sock ] && break; sleep 0.02; done; ";
}

// `criu dump --stream` of `pid` through `vramflow streamer -D images capture
// -o output` (its stderr, the progress lines included, in `work`/capture.err).
// CRIU's exit status; capture's in *capture_rc.
int DumpThroughCapture(const std::string& images, const std::string& work, pid_t pid, const std::string& output,
                       int* capture_rc, std::string* capture_err) {
  const std::string rc_file = work + "/capture.rc";
  const std::string err_file = work + "/capture.err";
  testing::CommandResult r =
      RunShell("(" + Vramflow() + " streamer -D " + ShellQuote(images) + " capture -o " + ShellQuote(output) + " 2>" +
               ShellQuote(err_file) + "; echo $? > " + ShellQuote(rc_file) + ") & cap=$!; " + WaitForSocket(images) +
               CriuBinary() + " dump -D " + ShellQuote(images) + " --stream -t " + std::to_string(pid) +
               " -v4 -o dump.log; rc=$?; wait $cap; exit $rc");
  *capture_rc = std::stoi("0" + ReadText(rc_file));
  *capture_err = ReadText(err_file);
  return r.code;
}

// The children of a dumped tree (the loop's `sleep`) come to this process,
// the fixture's child subreaper, once CRIU kills the tree: reaps them so
// their pids are free for the restore.
void ReapOrphans() {
  for (int i = 0; i < 25; ++i) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// `vramflow unpack` of the stream, then a plain `criu restore` (no --stream).
void UnpackAndRestore(const std::string& stream, const std::string& restore_dir) {
  testing::CommandResult r =
      RunShell(Vramflow() + " unpack " + ShellQuote(stream) + " -o " + ShellQuote(restore_dir + "/"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = RunShell(CriuBinary() + " restore -D " + ShellQuote(restore_dir) + " -d -v4 -o restore.log");
  ASSERT_EQ(r.code, 0) << r.output << ReadText(restore_dir + "/restore.log");
}

TEST_F(RealCriu, StreamerCaptureShellLoopRestoresFromUnpack) {
  REQUIRE_REAL_CRIU();
  const std::string count = dir_.File("count");
  // Each count is written aside and renamed over the last: written in place
  // (truncated, then written), a read in between found the file empty.
  const pid_t pid = StartPlain({"/bin/sh", "-c",
                                "i=0; while :; do i=$((i+1)); echo $i > " + ShellQuote(count + ".new") + "; mv " +
                                    ShellQuote(count + ".new") + " " + ShellQuote(count) + "; sleep 0.02; done"},
                               dir_.File("loop.log"));
  started_.push_back(pid);
  ASSERT_TRUE(WaitForFile(count));
  const std::string stream = dir_.File("checkpoint.vf");
  int capture_rc = -1;
  std::string capture_err;
  ASSERT_EQ(DumpThroughCapture(images_, dir_.path(), pid, stream, &capture_rc, &capture_err), 0)
      << ReadText(images_ + "/dump.log");
  ASSERT_EQ(capture_rc, 0) << capture_err;
  EXPECT_NE(capture_err.find("checkpoint-start"), std::string::npos) << capture_err;
  EXPECT_NE(capture_err.find("{\"shards\":[{\"size\":" + std::to_string(std::filesystem::file_size(stream))),
            std::string::npos)
      << capture_err;
  ASSERT_TRUE(WaitGone(pid));
  ReapOrphans();
  // Only the logs and what CRIU always keeps local (stats-*) are on disk.
  for (const auto& e : std::filesystem::directory_iterator(images_)) {
    const std::string name = e.path().filename();
    EXPECT_TRUE(e.path().extension() == ".log" || name.rfind("stats-", 0) == 0) << "an image on disk: " << name;
  }

  const std::string restored = dir_.File("restored");
  UnpackAndRestore(stream, restored);
  ASSERT_TRUE(ProcessExists(pid)) << "the restored loop is not running";
  const int before = std::stoi("0" + ReadText(count));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_GT(std::stoi("0" + ReadText(count)), before) << "the restored loop does not count on";
}

TEST_F(RealCriu, StreamerCapturePythonFloatsIntact) {
  REQUIRE_REAL_CRIU();
  const std::string trigger = dir_.File("trigger");
  const std::string report = dir_.File("report");
  const pid_t pid =
      StartPlain({"/usr/bin/python3", "-c", kFloatHolder, "2000000", trigger, report}, dir_.File("python.log"));
  started_.push_back(pid);
  ASSERT_TRUE(WaitForFile(report)) << ReadText(dir_.File("python.log"));
  const std::string dumped = ReadText(report);
  ASSERT_EQ(dumped.rfind("2000000 ", 0), 0u) << dumped;
  std::filesystem::remove(report);

  const std::string stream = dir_.File("checkpoint.vf");
  int capture_rc = -1;
  std::string capture_err;
  ASSERT_EQ(DumpThroughCapture(images_, dir_.path(), pid, stream, &capture_rc, &capture_err), 0)
      << ReadText(images_ + "/dump.log");
  ASSERT_EQ(capture_rc, 0) << capture_err;
  ASSERT_TRUE(WaitGone(pid));

  const std::string restored = dir_.File("restored");
  UnpackAndRestore(stream, restored);
  ASSERT_TRUE(ProcessExists(pid));
  { std::ofstream touch(trigger); }
  ASSERT_TRUE(WaitForFile(report)) << "the restored process does not answer";
  EXPECT_EQ(ReadText(report), dumped) << "the floats changed across the checkpoint";
}

// SIGKILL to CRIU while it dumps a large process: capture fails, naming
// the missing inventory.img, and leaves no output file, temporary or not.
TEST_F(RealCriu, StreamerCaptureCriuKilledMidDumpLeavesNothing) {
  REQUIRE_REAL_CRIU();
  const std::string ready = dir_.File("ready");
  const pid_t pid = StartPlain({"/usr/bin/python3", "-c",
                                "import os, sys, time\n"
                                "b = bytearray(os.urandom(384 << 20))\n"  // distinct chunks: no dedup
                                "open(sys.argv[1], 'w').close()\n"
                                "while True: time.sleep(1)\n",
                                ready},
                               dir_.File("big.log"));
  started_.push_back(pid);
  ASSERT_TRUE(WaitForFile(ready));
  const std::string out_dir = dir_.File("out");
  std::filesystem::create_directories(out_dir);
  const std::string stream = out_dir + "/checkpoint.vf";
  const std::string rc_file = dir_.File("capture.rc");
  // Kill CRIU once some MiB of the stream are written, well before the end.
  testing::CommandResult r =
      RunShell("(" + Vramflow() + " streamer -D " + ShellQuote(images_) + " capture -o " + ShellQuote(stream) + " 2>" +
               ShellQuote(dir_.File("capture.err")) + "; echo $? > " + ShellQuote(rc_file) + ") & cap=$!; " +
               WaitForSocket(images_) + CriuBinary() + " dump -D " + ShellQuote(images_) + " --stream -t " +
               std::to_string(pid) +
               " -v4 -o dump.log & criu=$!; "
               "for i in $(seq 2000); do s=$(du -sb " +
               ShellQuote(out_dir) +
               " | cut -f1); [ \"$s\" -gt 8000000 ] && break; "
               "sleep 0.005; done; kill -9 $criu; wait $criu; rc=$?; wait $cap; exit $rc");
  ASSERT_EQ(r.code, 128 + SIGKILL) << "CRIU was not killed mid-dump: " << r.output << ReadText(images_ + "/dump.log");
  const std::string err = ReadText(dir_.File("capture.err"));
  EXPECT_NE(std::stoi("0" + ReadText(rc_file)), 0) << err;
  EXPECT_NE(err.find("incomplete"), std::string::npos) << err;
  EXPECT_NE(err.find("inventory.img"), std::string::npos) << err;
  EXPECT_TRUE(std::filesystem::is_empty(out_dir)) << "capture left a file behind in " << out_dir;
}

}  // namespace
}  // namespace real_criu
}  // namespace vramflow
