// RealCriu.StreamerServe* / StreamerExtract*: `vramflow streamer serve` and
// `extract` with the real CRIU 4.2. A real process is dumped with a plain
// `criu dump -D DIR`, its image files packed into one vramflow stream (one
// object per file, named as CRIU names it), and restored through
// `vramflow streamer serve` + `criu restore --stream`, or through `extract`
// + a plain `criu restore -D`. The process is Python holding a float array
// (the `array` module) that prints a checksum of it on SIGUSR1, so its memory
// is checked after the restore.
#include "tests/real_criu_fixture.h"

namespace vramflow {
namespace real_criu {
namespace {

// 2M floats (8 MiB) from sin(), a checksum of them printed at start and on
// every SIGUSR1.
constexpr char kFloatHolder[] = R"(
import array, math, signal, time, zlib
a = array.array('f', [math.sin(i * 0.001) * 1000.0 for i in range(2 * 1024 * 1024)])
def report(*_):
    print('sum', zlib.crc32(a.tobytes()), flush=True)
signal.signal(signal.SIGUSR1, report)
report()
while True:
    time.sleep(1)
)";

// Starts the float holder as CRIU wants it; returns its pid once it printed
// its first checksum (into `log`).
pid_t StartFloatHolder(const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    PrepareChildForCriu(log.c_str(), nullptr);
    ::execl("/usr/bin/python3", "python3", "-c", kFloatHolder, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 1000 && ReadText(log).find("sum ") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return pid;
}

// The checksum lines the float holder printed so far.
std::vector<std::string> Sums(const std::string& log) {
  std::vector<std::string> sums;
  std::istringstream in(ReadText(log));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("sum ", 0) == 0) sums.push_back(line);
  return sums;
}

std::string Vramflow() { return ShellQuote(VRAMFLOW_BINARY); }

// Shell: waits until $0 (a socket) exists.
std::string WaitForSocket(const std::string& path) {
  return "for i in $(seq 500); do [ -S " + ShellQuote(path) + " ] && break; sleep 0.02; done; [ -S " +
         ShellQuote(path) + " ] || exit 99; ";
}

// What a test shares: the stream, the restore's images directory, serve's
// $TMPDIR (where its spill directory goes).
struct ServeBed {
  ServeBed(const TempDir& dir, std::string images) : dir_(dir), images_(std::move(images)) {}
  // Dumps `pid` into images_ with a plain `criu dump` and packs its files
  // into one stream, objects named by file name.
  void DumpAndPack(pid_t pid) {
    testing::CommandResult r =
        RunShell(CriuBinary() + " dump -D " + ShellQuote(images_) + " -v4 -t " + std::to_string(pid) + " -o dump.log");
    ASSERT_EQ(r.code, 0) << r.output << ReadText(images_ + "/dump.log");
    ASSERT_TRUE(WaitGone(pid));
    r = RunShell("cd " + ShellQuote(images_) + " && " + Vramflow() + " pack -q * -o " + ShellQuote(stream_));
    ASSERT_EQ(r.code, 0) << r.output;
    std::filesystem::create_directories(restore_dir_);
    std::filesystem::create_directories(tmp_);
  }
  // `vramflow streamer serve -i stream_` and `criu restore --stream` beside
  // it; returns CRIU's result, serve's exit status in `serve_code`.
  testing::CommandResult ServeAndRestore(int* serve_code, const std::string& serve_options = "") {
    const std::string serve_log = dir_.File("serve.log");
    testing::CommandResult r = RunShell(
        "(TMPDIR=" + ShellQuote(tmp_) + " " + Vramflow() + " streamer -D " + ShellQuote(restore_dir_) + " -i " +
        ShellQuote(stream_) + " " + serve_options + " serve > " + ShellQuote(serve_log) + " 2>&1; echo $? > " +
        ShellQuote(dir_.File("serve.rc")) + ") & srv=$!; " + WaitForSocket(restore_dir_ + "/streamer-serve.sock") +
        CriuBinary() + " restore -D " + ShellQuote(restore_dir_) + " --stream -d -v4 -o restore.log; rc=$?; wait $srv; exit $rc");
    const std::string rc = ReadText(dir_.File("serve.rc"));
    *serve_code = rc.empty() ? -1 : std::atoi(rc.c_str());
    serve_output_ = ReadText(serve_log);
    return r;
  }
  std::string RestoreLogOf(const std::string& dir) const { return ReadText(dir + "/restore.log"); }

  const TempDir& dir_;
  std::string images_;
  std::string stream_ = dir_.File("checkpoint.vfs");
  std::string restore_dir_ = dir_.File("restore");
  std::string tmp_ = dir_.File("tmp");
  std::string serve_output_;
};

// Dump -> pack -> serve -> criu restore --stream: alive, its floats intact,
// with a budget smaller than its image (files spilled).
TEST_F(RealCriu, StreamerServeRestoresAPythonProcessWithItsMemory) {
  REQUIRE_REAL_CRIU();
  ServeBed bed(dir_, images_);
  const std::string log = dir_.File("app.log");
  const pid_t pid = StartFloatHolder(log);
  started_.push_back(pid);
  ASSERT_EQ(Sums(log).size(), 1u) << ReadText(log);
  bed.DumpAndPack(pid);
  ASSERT_FALSE(HasFatalFailure());
  int serve_code = -1;
  testing::CommandResult r = bed.ServeAndRestore(&serve_code, "-m 8M");
  ASSERT_EQ(r.code, 0) << r.output << bed.RestoreLogOf(bed.restore_dir_) << bed.serve_output_;
  EXPECT_EQ(serve_code, 0) << bed.serve_output_;
  EXPECT_NE(bed.serve_output_.find("socket-init\n"), std::string::npos) << bed.serve_output_;
  EXPECT_NE(bed.serve_output_.find("{\"shards\":[{\"size\":" + std::to_string(std::filesystem::file_size(bed.stream_))),
            std::string::npos)
      << bed.serve_output_;
  ASSERT_TRUE(ProcessExists(pid)) << "the restored process is not running";
  ::kill(pid, SIGUSR1);
  for (int i = 0; i < 500 && Sums(log).size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::vector<std::string> sums = Sums(log);
  ASSERT_EQ(sums.size(), 2u) << ReadText(log);
  EXPECT_EQ(sums[1], sums[0]) << "the float array changed across the dump and restore";
  EXPECT_TRUE(std::filesystem::is_empty(bed.tmp_)) << "the spill directory is left behind";
  EXPECT_FALSE(std::filesystem::exists(bed.restore_dir_ + "/streamer-serve.sock"));
}

// Dump -> pack -> extract -> plain criu restore -D: alive, floats intact.
TEST_F(RealCriu, StreamerExtractThenPlainRestore) {
  REQUIRE_REAL_CRIU();
  ServeBed bed(dir_, images_);
  const std::string log = dir_.File("app.log");
  const pid_t pid = StartFloatHolder(log);
  started_.push_back(pid);
  bed.DumpAndPack(pid);
  ASSERT_FALSE(HasFatalFailure());
  testing::CommandResult r = RunShell(Vramflow() + " streamer -D " + ShellQuote(bed.restore_dir_) + " -i " +
                                      ShellQuote(bed.stream_) + " extract 2>&1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("{\"shards\":[{\"size\":", 0), 0u) << r.output;
  for (const auto& e : std::filesystem::directory_iterator(images_)) {
    if (e.path().filename() == "dump.log") continue;
    EXPECT_EQ(testing::ReadFileBytes(bed.restore_dir_ + "/" + e.path().filename().string()),
              testing::ReadFileBytes(e.path()))
        << e.path().filename();
  }
  r = RunShell(CriuBinary() + " restore -D " + ShellQuote(bed.restore_dir_) + " -d -v4 -o restore.log");
  ASSERT_EQ(r.code, 0) << r.output << bed.RestoreLogOf(bed.restore_dir_);
  ASSERT_TRUE(ProcessExists(pid));
  ::kill(pid, SIGUSR1);
  for (int i = 0; i < 500 && Sums(log).size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::vector<std::string> sums = Sums(log);
  ASSERT_EQ(sums.size(), 2u) << ReadText(log);
  EXPECT_EQ(sums[1], sums[0]);
}

// A flipped byte in the stream: serve fails naming the frame, CRIU's
// restore fails, no process comes back, nothing is left behind.
TEST_F(RealCriu, StreamerServeCorruptStreamFailsTheRestore) {
  REQUIRE_REAL_CRIU();
  ServeBed bed(dir_, images_);
  const pid_t pid = StartFloatHolder(dir_.File("app.log"));
  started_.push_back(pid);
  bed.DumpAndPack(pid);  // the middle of the stream is in pages-1.img
  ASSERT_FALSE(HasFatalFailure());
  {
    std::fstream f(bed.stream_, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(bed.stream_) / 2);
    f.seekg(middle);
    const char byte = static_cast<char>(f.get());
    f.seekp(middle);
    f.put(static_cast<char>(byte ^ 0x5a));
  }
  int serve_code = -1;
  testing::CommandResult r = bed.ServeAndRestore(&serve_code);
  EXPECT_NE(r.code, 0) << "CRIU restored from a corrupt stream\n" << bed.RestoreLogOf(bed.restore_dir_);
  EXPECT_NE(serve_code, 0) << bed.serve_output_;
  EXPECT_NE(bed.serve_output_.find("stream offset"), std::string::npos) << bed.serve_output_;
  EXPECT_FALSE(ProcessExists(pid)) << "a process came back from a corrupt stream";
  EXPECT_TRUE(std::filesystem::is_empty(bed.tmp_)) << "the spill directory is left behind";
  EXPECT_FALSE(std::filesystem::exists(bed.restore_dir_ + "/streamer-serve.sock"));
}

}  // namespace
}  // namespace real_criu
}  // namespace vramflow
