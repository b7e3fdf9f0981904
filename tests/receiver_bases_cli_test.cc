// SPDX-License-Identifier: MIT
// What a network sender can make a receiving command open, and what it
// learns from the answer (issue 55, items 2, 3 and 13; docs/NETWORK.md,
// "What a sender learns"): every receiving command (unpack, verify,
// streamer serve/extract --listen, recv) resolves bases only from what it
// offered, its error replies name nothing of the receiver's files or store,
// and a BASE location's control bytes never reach the terminal raw.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/cli_child.h"
#include "tests/support/shell.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using namespace std::chrono_literals;
using ::vramflow::testing::CliChild;
using ::vramflow::testing::ReadFileBytes;
using ::vramflow::testing::RunShell;
using ::vramflow::testing::ShellQuote;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::WriteFileBytes;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Ran {
  int code = -1;
  std::string output;
};

Ran RunVf(const TempDir& dir, const std::vector<std::string>& args) {
  static int counter = 0;
  CliChild child(testing::VramflowBinary(), args, dir.File("run-" + std::to_string(counter++) + ".log"));
  Ran r;
  r.code = child.Wait(60000ms);
  r.output = child.Log();
  return r;
}

// A receiver started with `args`, listening on `socket` once the socket file
// appears (it is renamed into place when it listens).
class Receiver {
 public:
  Receiver(const TempDir& dir, const std::string& socket, const std::vector<std::string>& args)
      : child_(testing::VramflowBinary(), args, dir.File("receiver-" + std::to_string(++counter_) + ".log")) {
    for (int i = 0; i < 1000 && child_.running(); ++i) {
      struct stat st;
      if (::lstat(socket.c_str(), &st) == 0) {
        listening_ = true;
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
  }
  bool listening() const { return listening_; }
  Ran Wait() {
    Ran r;
    r.code = child_.Wait(60000ms);
    r.output = child_.Log();
    return r;
  }

 private:
  static inline int counter_ = 0;
  CliChild child_;
  bool listening_ = false;
};

// Two checkpoints of one process (the same weights, another KV cache) and
// an unrelated one; ck2.vfs is built on ck1.vfs and records its absolute
// path (written to stdout, as a pipe records it), a path on the sender's
// machine that here also exists on the receiver's.
struct Streams {
  std::string ck1, ck2, other;
};
Streams MakeStreams(const TempDir& dir) {
  for (const char* name : {"v1", "v2", "o"}) std::filesystem::create_directories(dir.File(name));
  WriteFileBytes(dir.File("v1/weights"), testing::RandomBytes(1 << 20, 1));
  WriteFileBytes(dir.File("v1/kv"), testing::RandomBytes(256 << 10, 2));
  WriteFileBytes(dir.File("v2/weights"), testing::RandomBytes(1 << 20, 1));
  WriteFileBytes(dir.File("v2/kv"), testing::RandomBytes(256 << 10, 3));
  WriteFileBytes(dir.File("o/weights"), testing::RandomBytes(1 << 20, 4));
  WriteFileBytes(dir.File("o/kv"), testing::RandomBytes(256 << 10, 5));
  Streams s{dir.File("ck1.vfs"), dir.File("ck2.vfs"), dir.File("other.vfs")};
  const std::string vf = ShellQuote(testing::VramflowBinary()) + " pack -q -c raw --chunk-size 256K ";
  auto files = [&](const char* name) {
    return ShellQuote(dir.File(name) + "/weights") + " " + ShellQuote(dir.File(name) + "/kv");
  };
  EXPECT_EQ(RunShell(vf + files("v1") + " -o " + ShellQuote(s.ck1)).code, 0);
  EXPECT_EQ(RunShell(vf + files("o") + " -o " + ShellQuote(s.other)).code, 0);
  const auto ck2 = RunShell(vf + files("v2") + " --base " + ShellQuote(s.ck1) + " -o - > " + ShellQuote(s.ck2));
  EXPECT_EQ(ck2.code, 0) << ck2.output;
  return s;
}

// verify --listen and streamer extract --listen without a store: a stream
// built on a base the receiver never offered is refused, although the path
// its BASE frame names exists here (it used to be opened, and the stream
// verified or extracted against it); with the base in --base-store, it is
// offered, and the same stream verifies and extracts.
TEST(ReceiverBases, ListeningVerifyAndExtractOpenOnlyWhatTheyOffered) {
  TempDir dir;
  const Streams s = MakeStreams(dir);
  std::filesystem::create_directories(dir.File("store"));
  std::filesystem::copy_file(s.ck1, dir.File("store/ck1.vfs"));
  struct Case {
    std::string what;
    std::vector<std::string> args;
    std::string out;  // extract's images directory, empty for verify
  };
  const std::string sock = dir.File("sock");
  const std::vector<Case> cases = {
      {"verify", {"verify", "--listen", "unix:" + sock, "--accept-timeout", "30"}, ""},
      {"extract", {"streamer", "-D", dir.File("img1"), "--listen", "unix:" + sock, "extract"}, dir.File("img1")},
      {"verify --base-store",
       {"verify", "--listen", "unix:" + sock, "--accept-timeout", "30", "--base-store", dir.File("store")},
       ""},
      {"extract --base-store",
       {"streamer", "-D", dir.File("img2"), "--listen", "unix:" + sock, "--base-store", dir.File("store"), "extract"},
       dir.File("img2")},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const bool offered = Contains(c.what, "--base-store");
    if (!c.out.empty()) std::filesystem::create_directories(c.out);
    Receiver receiver(dir, sock, c.args);
    ASSERT_TRUE(receiver.listening()) << receiver.Wait().output;
    Ran sent = RunVf(dir, {"send", "-q", s.ck2, "unix:" + sock});
    Ran received = receiver.Wait();
    if (offered) {
      EXPECT_EQ(sent.code, 0) << sent.output;
      EXPECT_EQ(received.code, 0) << received.output;
      if (!c.out.empty()) {
        EXPECT_EQ(ReadFileBytes(c.out + "/kv"), testing::RandomBytes(256 << 10, 3));
      }
      continue;
    }
    EXPECT_NE(sent.code, 0) << sent.output;
    EXPECT_NE(received.code, 0) << received.output;
    EXPECT_TRUE(Contains(received.output, "never offered")) << received.output;
    EXPECT_TRUE(Contains(sent.output, "never offered")) << sent.output;
    if (!c.out.empty()) {
      EXPECT_TRUE(std::filesystem::is_empty(c.out)) << received.output;
    }
  }
}

// What a sender hears when its stream fails on the receiver's side names
// nothing of the receiver: not its store's directory, not the file a base
// was offered from, not another stream's id or size (the receiver's own
// log has them).
TEST(ReceiverBases, ErrorRepliesNameNothingOfTheReceiversStore) {
  TempDir dir;
  const Streams s = MakeStreams(dir);
  const std::string store = dir.File("store");
  std::filesystem::create_directories(store);
  std::filesystem::copy_file(s.other, store + "/other.vfs");
  const std::string sock = dir.File("sock");
  auto expect_silent = [&](const std::string& reply) {
    EXPECT_FALSE(Contains(reply, store)) << reply;
    EXPECT_FALSE(Contains(reply, "other.vfs")) << reply;
    EXPECT_FALSE(Contains(reply, "ck1.vfs")) << reply;
    EXPECT_FALSE(Contains(reply, " raw")) << reply;
  };
  {  // a base never offered (the store holds only another process's stream)
    Receiver receiver(dir, sock,
                      {"unpack", "--listen", "unix:" + sock, "-o", dir.File("out1"), "--base-store", store, "-q",
                       "--accept-timeout", "30"});
    ASSERT_TRUE(receiver.listening());
    Ran sent = RunVf(dir, {"send", "-q", s.ck2, "unix:" + sock});
    Ran received = receiver.Wait();
    EXPECT_NE(received.code, 0);
    EXPECT_TRUE(Contains(sent.output, "never offered")) << sent.output;
    expect_silent(sent.output);
  }
  {  // an offered base that changed after the scan: the file now holds another stream
    std::filesystem::copy_file(s.ck1, store + "/ck1.vfs");
    Receiver receiver(dir, sock,
                      {"unpack", "--listen", "unix:" + sock, "-o", dir.File("out2"), "--base-store", store, "-q",
                       "--accept-timeout", "30"});
    ASSERT_TRUE(receiver.listening());
    std::filesystem::copy_file(s.other, store + "/ck1.vfs", std::filesystem::copy_options::overwrite_existing);
    Ran sent = RunVf(dir, {"send", "-q", s.ck2, "unix:" + sock});
    Ran received = receiver.Wait();
    EXPECT_NE(received.code, 0);
    EXPECT_TRUE(Contains(sent.output, "cannot open it")) << sent.output;
    expect_silent(sent.output);
    EXPECT_TRUE(Contains(received.output, store + "/ck1.vfs")) << "the receiver's own log says which file";
  }
  {  // recv --output-dir: a name that is taken
    Receiver receiver(dir, sock,
                      {"recv", "--listen", "unix:" + sock, "--output-dir", store, "--count", "1", "--accept-timeout",
                       "30", "--progress", "none"});
    ASSERT_TRUE(receiver.listening());
    Ran sent = RunVf(dir, {"send", "-q", s.other, "unix:" + sock, "--name", "other.vfs"});
    EXPECT_NE(sent.code, 0);
    EXPECT_TRUE(Contains(sent.output, "exists")) << sent.output;
    EXPECT_FALSE(Contains(sent.output, store)) << sent.output;
  }
}

// A base location with control bytes (a forged "unpacked ... verified"
// line after CR LF, a terminal title, a bell) is escaped in every message
// that shows it: when the base is missing and when another stream is there.
TEST(ReceiverBases, ControlBytesOfABaseLocationAreEscaped) {
  TempDir dir;
  const Streams s = MakeStreams(dir);
  const std::string forged = "b\x1b]0;owned\x07\r\nvramflow unpack: unpacked 2 object(s), verified\n.vfs";
  std::filesystem::copy_file(s.ck1, dir.File(forged));
  const std::string vf = ShellQuote(testing::VramflowBinary());
  const auto packed = RunShell(vf + " pack -q -c raw --chunk-size 256K " + ShellQuote(dir.File("v2/weights")) + " " +
                               ShellQuote(dir.File("v2/kv")) + " --base " + ShellQuote(dir.File(forged)) + " -o " +
                               ShellQuote(dir.File("ck3.vfs")));
  ASSERT_EQ(packed.code, 0) << packed.output;
  for (const bool missing : {true, false}) {
    SCOPED_TRACE(missing ? "base missing" : "another stream in its place");
    std::filesystem::remove(dir.File(forged));
    if (!missing) std::filesystem::copy_file(s.other, dir.File(forged));
    const std::string ck3 = ShellQuote(dir.File("ck3.vfs"));
    for (const std::string& line : {vf + " verify " + ck3, vf + " unpack " + ck3 + " -o " + ShellQuote(dir.File("out")),
                                    vf + " streamer -D " + ShellQuote(dir.File("img")) + " extract < " + ck3}) {
      std::filesystem::create_directories(dir.File("img"));
      const auto r = RunShell(line);
      EXPECT_NE(r.code, 0) << line << "\n" << r.output;
      for (const char control : {'\x1b', '\x07', '\r'})
        EXPECT_FALSE(Contains(r.output, std::string(1, control))) << line << "\n" << r.output;
      EXPECT_FALSE(Contains(r.output, "\nvramflow unpack: unpacked")) << line << "\n" << r.output;
      EXPECT_TRUE(Contains(r.output, "\\x1b")) << line << "\n" << r.output;
    }
  }
}

}  // namespace
}  // namespace vramflow
