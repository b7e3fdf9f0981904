// SPDX-License-Identifier: MIT
// SIGINT, SIGTERM and SIGHUP on the `vramflow` commands (tools/cli/interrupt.h),
// sent at several moments: before any input, mid-stream, around the final
// move. Each time: the exit status a shell would show (130, 143, 129), no
// temporary file, no staging directory, and a network peer that fails at
// once saying why. And SIGKILL, which no handler sees: what it leaves is
// swept by the next run in that directory.
//
// "Mid-stream" is reached without sleeps: input comes from a pipe the test
// feeds, so the command has written part of its output and waits for more.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/owner_tag.h"
#include "common/unique_fd.h"
#include "tests/support/cli_child.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ::vramflow::testing::ChildStdin;
using ::vramflow::testing::CliChild;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::VramflowBinary;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Entries of `dir`, sorted, hidden ones included.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return "[" + out + "]";
}

// Bytes in the entries of `dir` whose names contain `part` (a directory: the
// files directly in it); -1 when there is none.
int64_t BytesOf(const std::string& dir, const std::string& part) {
  int64_t total = -1;
  for (const std::string& name : Entries(dir)) {
    if (!Contains(name, part)) continue;
    total = std::max<int64_t>(total, 0);
    const std::string path = dir + "/" + name;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(path, ec))
        if (e.is_regular_file(ec)) total += static_cast<int64_t>(e.file_size(ec));
    } else {
      total += static_cast<int64_t>(fs::file_size(path, ec));
    }
  }
  return total;
}

// Waits (`limit` at most) until `done` holds; feeds `input` meanwhile.
bool WaitUntil(const std::function<bool()>& done, ChildStdin* input = nullptr, const std::string* data = nullptr,
               size_t* offset = nullptr, std::chrono::seconds limit = 20s) {
  const auto start = Clock::now();
  while (Clock::now() - start < limit) {
    if (done()) return true;
    if (input && input->write_end >= 0) input->Feed(*data, offset);
    std::this_thread::sleep_for(2ms);
  }
  return done();
}

// Whether process `pid` has installed its signal handling: SIGINT, SIGTERM
// and SIGHUP blocked in its main thread (/proc/PID/status, SigBlk), as
// tools/cli/interrupt.h does first thing. Before that a signal's default action
// would end it, which is not what these tests are about.
bool HandlesSignals(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) != 0) continue;
    const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
    const unsigned long long wanted = (1ull << (SIGINT - 1)) | (1ull << (SIGTERM - 1)) | (1ull << (SIGHUP - 1));
    return (mask & wanted) == wanted;
  }
  return false;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `vramflow ARGS` to its end; its exit status.
int Vf(const std::vector<std::string>& args, const std::string& log, std::string* output = nullptr) {
  CliChild child(VramflowBinary(), args, log);
  int code = child.Wait(60000ms);
  if (output) *output = child.Log();
  return code;
}

// Incompressible bytes (the raw codec writes them as they come).
std::string Noise(const TempDir& dir, const std::string& size) {
  const std::string path = dir.File("noise-" + size);
  EXPECT_EQ(Vf({"gen", "-k", "random", "-s", size, "-o", path}, dir.File("gen.log")), 0);
  return path;
}

// A stream of `objects` objects of `size` each (raw codec), as a file.
std::string Stream(const TempDir& dir, const std::string& name, int objects, const std::string& size) {
  std::vector<std::string> args = {"pack", "-c", "raw", "-q", "-o", dir.File(name)};
  for (int i = 0; i < objects; ++i) {
    const std::string input = dir.File(name + "-in" + std::to_string(i));
    EXPECT_EQ(
        Vf({"gen", "-k", "random", "--seed", std::to_string(i + 1), "-s", size, "-o", input}, dir.File("gen.log")), 0);
    args.push_back(input);
  }
  EXPECT_EQ(Vf(args, dir.File("pack.log")), 0);
  return dir.File(name);
}

struct SignalCase {
  int signal;
  int exit_status;
};
const SignalCase kSignals[] = {{SIGINT, 130}, {SIGTERM, 143}, {SIGHUP, 129}};

// pack reading a pipe: signalled before any input (its temporary output
// exists, empty) and mid-stream (megabytes written): it exits 128 + N by
// itself (not killed by the signal) and leaves nothing behind.
TEST(Signals, PackRemovesItsTemporaryOutputAtEveryMoment) {
  TempDir in;
  const std::string data = ReadAll(Noise(in, "16M"));
  for (const SignalCase& c : kSignals) {
    for (size_t before : {size_t{0}, size_t{6} << 20}) {
      SCOPED_TRACE(std::string(strsignal(c.signal)) + ", after " + std::to_string(before) + " bytes");
      TempDir out;
      ChildStdin input;
      CliChild pack(VramflowBinary(), {"pack", "-", "--name", "x", "-c", "raw", "-j", "2", "-o", out.File("x.vfs")},
                    in.File("pack.log"), input.read_end);
      input.CloseRead();
      const std::string head = data.substr(0, before);
      size_t offset = 0;
      ASSERT_TRUE(WaitUntil([&] { return BytesOf(out.path(), ".vf-tmp-") >= static_cast<int64_t>(before / 2); }, &input,
                            &head, &offset))
          << pack.Log();
      pack.Kill(c.signal);
      EXPECT_EQ(pack.Wait(10000ms), c.exit_status) << pack.Log();
      EXPECT_EQ(pack.killed_by(), 0) << "the signal's default action ran, not the handler";
      EXPECT_EQ(Join(Entries(out.path())), "[]");
      EXPECT_TRUE(Contains(pack.Log(), "interrupted by")) << pack.Log();
    }
  }
}

// unpack from a pipe, mid-stream: its staging directory (files of every
// object begun) is removed, no output appears.
TEST(Signals, UnpackRemovesItsStagingDirectory) {
  TempDir in;
  const std::string data = ReadAll(Stream(in, "s.vfs", 3, "3M"));
  for (const SignalCase& c : {kSignals[0], kSignals[1]}) {
    SCOPED_TRACE(strsignal(c.signal));
    TempDir out;
    ChildStdin input;
    CliChild unpack(VramflowBinary(), {"unpack", "-", "-o", out.File("restored/"), "-j", "2"}, in.File("unpack.log"),
                    input.read_end);
    input.CloseRead();
    const std::string head = data.substr(0, data.size() / 2);
    size_t offset = 0;
    ASSERT_TRUE(WaitUntil([&] { return BytesOf(out.path(), ".vf-unpack-") >= (2 << 20); }, &input, &head, &offset))
        << unpack.Log() << Join(Entries(out.path()));
    unpack.Kill(c.signal);
    EXPECT_EQ(unpack.Wait(10000ms), c.exit_status) << unpack.Log();
    EXPECT_EQ(Join(Entries(out.path())), "[]");
  }
}

// A signal at moments around the end of an unpack of many objects, the
// moves into place among them: all or nothing, never a staging directory.
TEST(Signals, UnpackAroundItsFinalMoveIsAllOrNothing) {
  TempDir in;
  const std::string stream = Stream(in, "many.vfs", 24, "64K");
  int interrupted = 0;
  for (int delay_ms : {0, 5, 10, 15, 20, 30, 40, 60}) {
    SCOPED_TRACE("SIGTERM after " + std::to_string(delay_ms) + " ms");
    TempDir out;
    CliChild unpack(VramflowBinary(), {"unpack", stream, "-o", out.File("restored/"), "-q"}, in.File("unpack.log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    unpack.Kill(SIGTERM);
    const int code = unpack.Wait(10000ms);
    EXPECT_TRUE(code == 0 || code == 143) << code << unpack.Log();
    interrupted += code == 143;
    const std::vector<std::string> entries = Entries(out.path());
    if (entries.empty()) continue;  // interrupted before the moves
    EXPECT_EQ(Join(entries), "[restored]");
    EXPECT_EQ(Entries(out.File("restored")).size(), 24u) << "a partial output";
  }
  EXPECT_GT(interrupted, 0) << "no attempt was interrupted: the moments chosen were all after the end";
}

// recv -o FILE interrupted mid-stream: no temporary file, and the sender
// fails at once with the receiver's reason (not after its --timeout).
TEST(Signals, RecvInterruptedTellsTheSender) {
  TempDir dir;
  const std::string data = ReadAll(Stream(dir, "s.vfs", 1, "12M"));
  ASSERT_EQ(::mkdir(dir.File("out").c_str(), 0755), 0);
  const std::string sock = "unix:" + dir.File("sock");
  CliChild recv(VramflowBinary(), {"recv", "--listen", sock, "-o", dir.File("out/got.vfs"), "-q"},
                dir.File("recv.log"));
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(dir.File("sock")); })) << recv.Log();
  ChildStdin input;
  CliChild send(VramflowBinary(), {"send", "-", sock, "-q", "--timeout", "60"}, dir.File("send.log"), input.read_end);
  input.CloseRead();
  const std::string head = data.substr(0, data.size() / 2);
  size_t offset = 0;
  ASSERT_TRUE(WaitUntil([&] { return BytesOf(dir.File("out"), ".vf-tmp-") >= (2 << 20); }, &input, &head, &offset))
      << recv.Log() << send.Log();
  recv.Kill(SIGTERM);
  EXPECT_EQ(recv.Wait(10000ms), 143) << recv.Log();
  EXPECT_EQ(Join(Entries(dir.File("out"))), "[]");
  // A sender blocked reading its input learns of its receiver's failure at
  // its next write: end the input (the stream is incomplete either way).
  input.CloseWrite();
  const auto start = Clock::now();
  EXPECT_EQ(send.Wait(10000ms), 1) << send.Log();
  EXPECT_LT(Clock::now() - start, 5s) << "the sender waited for a timeout";
  EXPECT_TRUE(Contains(send.Log(), "the receiver interrupted by SIGTERM")) << send.Log();
}

// send interrupted mid-stream: the receiver fails at once with the sender's
// reason and keeps nothing.
TEST(Signals, SendInterruptedTellsTheReceiver) {
  TempDir dir;
  const std::string data = ReadAll(Stream(dir, "s.vfs", 1, "12M"));
  ASSERT_EQ(::mkdir(dir.File("out").c_str(), 0755), 0);
  const std::string sock = "unix:" + dir.File("sock");
  CliChild recv(VramflowBinary(), {"recv", "--listen", sock, "-o", dir.File("out/got.vfs"), "-q", "--timeout", "60"},
                dir.File("recv.log"));
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(dir.File("sock")); })) << recv.Log();
  ChildStdin input;
  CliChild send(VramflowBinary(), {"send", "-", sock, "-q"}, dir.File("send.log"), input.read_end);
  input.CloseRead();
  const std::string head = data.substr(0, data.size() / 2);
  size_t offset = 0;
  ASSERT_TRUE(WaitUntil([&] { return BytesOf(dir.File("out"), ".vf-tmp-") >= (2 << 20); }, &input, &head, &offset))
      << recv.Log() << send.Log();
  send.Kill(SIGINT);
  EXPECT_EQ(send.Wait(10000ms), 130) << send.Log();
  const auto start = Clock::now();
  EXPECT_EQ(recv.Wait(10000ms), 1) << recv.Log();
  EXPECT_LT(Clock::now() - start, 5s) << "the receiver waited for a timeout";
  EXPECT_TRUE(Contains(recv.Log(), "the sender interrupted by SIGINT")) << recv.Log();
  EXPECT_EQ(Join(Entries(dir.File("out"))), "[]");
}

// A cleanup that cannot finish (it tells a peer that is stopped, whose
// socket is full) does not hold the process: a second signal ends it at
// once, after the local files are gone.
TEST(Signals, ASecondSignalExitsAtOnce) {
  TempDir dir;
  const std::string data = ReadAll(Noise(dir, "48M"));
  ASSERT_EQ(::mkdir(dir.File("out").c_str(), 0755), 0);
  const std::string sock = "unix:" + dir.File("sock");
  CliChild recv(VramflowBinary(), {"recv", "--listen", sock, "-o", dir.File("out/got.vfs"), "-q", "--timeout", "60"},
                dir.File("recv.log"));
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(dir.File("sock")); })) << recv.Log();
  ChildStdin input;
  // pack, not send: its own temporary state is none, its peer the stopped recv.
  CliChild pack(VramflowBinary(), {"pack", "-", "--name", "x", "-c", "raw", "-o", sock, "--timeout", "60"},
                dir.File("pack.log"), input.read_end);
  input.CloseRead();
  size_t offset = 0;
  ASSERT_TRUE(WaitUntil([&] { return BytesOf(dir.File("out"), ".vf-tmp-") >= (1 << 20); }, &input, &data, &offset))
      << recv.Log() << pack.Log();
  recv.Kill(SIGSTOP);
  // Fill everything between the two: the pipe stops taking input.
  auto last_progress = Clock::now();
  while (Clock::now() - last_progress < 500ms && offset < data.size()) {
    size_t before = offset;
    input.Feed(data, &offset);
    if (offset != before) last_progress = Clock::now();
    std::this_thread::sleep_for(5ms);
  }
  pack.Kill(SIGTERM);
  std::this_thread::sleep_for(300ms);
  const bool stuck = pack.running();
  pack.Kill(SIGTERM);
  const auto second = Clock::now();
  EXPECT_EQ(pack.Wait(10000ms), 143) << pack.Log();
  EXPECT_LT(Clock::now() - second, 2s);
  EXPECT_TRUE(stuck) << "the first signal's cleanup did not wait on the stopped peer; nothing was tested";
  recv.Kill(SIGCONT);
  recv.Kill(SIGTERM);
  EXPECT_NE(recv.Wait(10000ms), -1);
  EXPECT_EQ(Join(Entries(dir.File("out"))), "[]");
}

// verify and inspect reading a pipe exit with the signal's status too.
TEST(Signals, VerifyAndInspectExitWithTheSignalsStatus) {
  TempDir dir;
  const std::vector<std::vector<std::string>> cases = {{"verify", "-"}, {"inspect", "-"}};
  for (const std::vector<std::string>& args : cases) {
    SCOPED_TRACE(args[0]);
    ChildStdin input;
    CliChild child(VramflowBinary(), args, dir.File("log"), input.read_end);
    input.CloseRead();
    ASSERT_TRUE(WaitUntil([&] { return HandlesSignals(child.pid()); })) << child.Log();
    std::this_thread::sleep_for(50ms);  // into its read of the empty pipe
    ASSERT_TRUE(child.running()) << "ended before the signal: " << child.Log();
    child.Kill(SIGTERM);
    EXPECT_EQ(child.Wait(10000ms), 143) << child.Log();
    EXPECT_EQ(child.killed_by(), 0);
  }
}

// demo, once its stream is being written (a temporary file in /dev/shm,
// or $TMPDIR): the stream goes with the signal.
TEST(Signals, DemoRemovesItsStream) {
  TempDir dir;
  const bool shm = ::access("/dev/shm", W_OK) == 0;
  const std::string where = shm ? "/dev/shm" : dir.path();
  // zstd at a high level: the dump takes seconds, however fast the machine.
  CliChild demo(VramflowBinary(), {"demo", "-g", "1", "-s", "512M", "-q", "-c", "zstd:12", "-j", "2"}, dir.File("log"),
                -1, {"TMPDIR=" + dir.path()});
  const std::string mine = "vramflow-demo-" + std::to_string(demo.pid()) + ".";
  ASSERT_TRUE(
      WaitUntil([&] { return BytesOf(where, mine) >= (256 << 10) || !demo.running(); }, nullptr, nullptr, nullptr, 60s))
      << demo.Log();
  ASSERT_TRUE(demo.running()) << "the demo ended before the signal: " << demo.Log();
  demo.Kill(SIGTERM);
  EXPECT_EQ(demo.Wait(10000ms), 143) << demo.Log();
  EXPECT_EQ(BytesOf(where, mine), -1) << Join(Entries(where));
}

// gen: before it could open its output (a FIFO nobody reads) and while it
// writes a file: no temporary file either way.
TEST(Signals, GenRemovesItsTemporaryOutput) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.File("fifo").c_str(), 0600), 0);
  CliChild blocked(VramflowBinary(), {"gen", "-s", "1M", "-o", dir.File("fifo")}, dir.File("log"));
  ASSERT_TRUE(WaitUntil([&] { return HandlesSignals(blocked.pid()); })) << blocked.Log();
  std::this_thread::sleep_for(50ms);  // into its open of the FIFO
  ASSERT_TRUE(blocked.running()) << blocked.Log();
  blocked.Kill(SIGHUP);
  EXPECT_EQ(blocked.Wait(10000ms), 129) << blocked.Log();

  TempDir out;
  CliChild writing(VramflowBinary(), {"gen", "-k", "random", "-s", "8G", "-o", out.File("big")}, dir.File("log"));
  ASSERT_TRUE(WaitUntil([&] { return BytesOf(out.path(), ".vf-tmp-") >= (8 << 20); })) << writing.Log();
  writing.Kill(SIGINT);
  EXPECT_EQ(writing.Wait(10000ms), 130) << writing.Log();
  EXPECT_EQ(Join(Entries(out.path())), "[]");
}

// A UNIX socket bound by this test at `path`, not listening: a file that is
// not the command's.
UniqueFd BindSocketAt(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  return fd;
}

// Issue 55, item 14: recv and unpack listening on unix:P remove P when
// SIGTERM stops them (and when they give up waiting), but not a file put
// at P since they bound it, which is someone else's.
TEST(Signals, ListenersRemoveTheirSocketFile) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.File("out").c_str(), 0755), 0);
  for (const std::string command : {"recv", "unpack"}) {
    SCOPED_TRACE(command);
    const std::string sock = dir.File(command + ".sock");
    const std::vector<std::string> args = {command, "--listen", "unix:" + sock, "-q", "-o", dir.File("out/" + command)};
    auto listening = [&](CliChild& child) {
      return WaitUntil([&] { return fs::exists(fs::symlink_status(sock)) || !child.running(); }) && child.running();
    };
    CliChild stopped(VramflowBinary(), args, dir.File(command + ".log"));
    ASSERT_TRUE(listening(stopped)) << stopped.Log();
    stopped.Kill(SIGTERM);
    EXPECT_EQ(stopped.Wait(10000ms), 143) << stopped.Log();
    EXPECT_FALSE(fs::exists(fs::symlink_status(sock))) << "the socket file stayed after SIGTERM";

    std::vector<std::string> waiting = args;
    waiting.insert(waiting.end(), {"--accept-timeout", "1"});
    for (bool signalled : {true, false}) {
      SCOPED_TRACE(signalled ? "replaced, then SIGTERM" : "replaced, then the wait ends");
      CliChild replaced(VramflowBinary(), signalled ? args : waiting, dir.File(command + ".log"));
      ASSERT_TRUE(listening(replaced)) << replaced.Log();
      fs::rename(sock, sock + ".moved");
      UniqueFd other = BindSocketAt(sock);
      if (signalled) replaced.Kill(SIGTERM);
      EXPECT_EQ(replaced.Wait(10000ms), signalled ? 143 : 1) << replaced.Log();
      EXPECT_TRUE(fs::is_socket(fs::symlink_status(sock))) << "another's socket file was removed";
      fs::remove(sock);
      fs::remove(sock + ".moved");
    }
    EXPECT_EQ(Vf(waiting, dir.File(command + ".log")), 1);
    EXPECT_FALSE(fs::exists(fs::symlink_status(sock))) << "the socket file stayed after the wait ended";
  }
  EXPECT_EQ(Join(Entries(dir.File("out"))), "[]");
}

// SIGKILL runs no handler: the temporary output stays, named after the dead
// pack, and the next pack in that directory removes it, but not the
// temporary file of a live writer.
TEST(Signals, AKilledPacksTemporaryFileIsSweptByTheNextRun) {
  TempDir in, out;
  const std::string noise = Noise(in, "8M");
  const std::string data = ReadAll(noise);
  ChildStdin input;
  CliChild pack(VramflowBinary(), {"pack", "-", "--name", "x", "-c", "raw", "-o", out.File("x.vfs")},
                in.File("pack.log"), input.read_end);
  input.CloseRead();
  size_t offset = 0;
  ASSERT_TRUE(WaitUntil([&] { return BytesOf(out.path(), ".vf-tmp-") >= (1 << 20); }, &input, &data, &offset))
      << pack.Log();
  pack.Kill(SIGKILL);
  EXPECT_EQ(pack.Wait(10000ms), 128 + SIGKILL);
  const std::vector<std::string> left = Entries(out.path());
  ASSERT_EQ(left.size(), 1u) << Join(left);
  EXPECT_TRUE(Contains(left[0], "x.vfs.vf-tmp-" + std::to_string(pack.pid()) + ".")) << left[0];
  const std::string live = "y.vfs.vf-tmp-" + OwnerTag() + "-01234567";  // this test process: alive
  std::ofstream(out.File(live)) << "in use";

  EXPECT_EQ(Vf({"pack", "-q", "-c", "raw", noise, "-o", out.File("next.vfs")}, in.File("next.log")), 0);
  EXPECT_EQ(Join(Entries(out.path())), "[next.vfs, " + live + "]");
}

// The same for unpack's staging directory.
TEST(Signals, AKilledUnpacksStagingDirectoryIsSweptByTheNextUnpack) {
  TempDir in, out;
  const std::string stream = Stream(in, "s.vfs", 2, "4M");
  const std::string data = ReadAll(stream);
  ChildStdin input;
  CliChild unpack(VramflowBinary(), {"unpack", "-", "-o", out.File("restored/")}, in.File("unpack.log"),
                  input.read_end);
  input.CloseRead();
  const std::string head = data.substr(0, data.size() * 3 / 4);
  size_t offset = 0;
  ASSERT_TRUE(WaitUntil([&] { return BytesOf(out.path(), ".vf-unpack-") >= (2 << 20); }, &input, &head, &offset))
      << unpack.Log();
  unpack.Kill(SIGKILL);
  EXPECT_EQ(unpack.Wait(10000ms), 128 + SIGKILL);
  ASSERT_GE(BytesOf(out.path(), ".vf-unpack-" + std::to_string(unpack.pid()) + "."), 0) << Join(Entries(out.path()));

  EXPECT_EQ(Vf({"unpack", "-q", stream, "-o", out.File("again/")}, in.File("next.log")), 0);
  EXPECT_EQ(Join(Entries(out.path())), "[again]");
}

}  // namespace
}  // namespace vramflow
