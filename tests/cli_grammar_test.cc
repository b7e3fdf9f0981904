// SPDX-License-Identifier: MIT
// The command line's URI grammar (docs/CLI.md, "URIs"), run against the built
// binary: an address without its scheme is refused with a hint, only
// --listen listens, a network destination connects, and `-` is stdin/stdout
// or refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/shell.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using ::vramflow::testing::RunCommand;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::VramflowBinary;
constexpr auto& Q = testing::ShellQuote;

// Runs `vramflow <args>` in `cwd`; stdout and stderr together.
CommandResult Vf(const std::string& args, const std::string& cwd) {
  CommandResult r;
  r.code = RunCommand("( cd " + Q(cwd) + " && timeout 20 " + Q(VramflowBinary()) + " " + args + " )", &r.output);
  return r;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class CliGrammar : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(Vf("gen -s 256K -o in.bin", dir_.path()).code, 0);
    ASSERT_EQ(Vf("pack -q in.bin -o s.vfs", dir_.path()).code, 0);
  }
  // Every entry of the work directory: nothing may appear on a refusal.
  size_t Entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_.path()), fs::directory_iterator()));
  }
  TempDir dir_;
};

// `send ckpt.vfs 127.0.0.1:7999` once "succeeded" by writing a local file of
// that name. Every destination, and every source, that reads as HOST:PORT is
// refused as a usage error naming the tcp:// URI meant; ./NAME is the file.
TEST_F(CliGrammar, HostPortWithoutSchemeIsRefusedWithAHint) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"send s.vfs 127.0.0.1:7999", "tcp://127.0.0.1:7999"},
      {"pack in.bin -o hostB:7070", "tcp://hostB:7070"},
      {"pack in.bin --to 10.0.0.2:7070/ckpt.vfs", "tcp://10.0.0.2:7070"},
      {"gen -s 1K -o '[::1]:7999'", "tcp://[::1]:7999"},
      {"unpack s.vfs -o 10.0.0.2:80", "tcp://10.0.0.2:80"},
      {"demo -s 1M --to node1:7000", "tcp://node1:7000"},
      {"recv --listen 127.0.0.1:7999 -o out.vfs", "tcp://127.0.0.1:7999"},
      {"verify 127.0.0.1:7999", "tcp://127.0.0.1:7999"},
      {"send 127.0.0.1:7999 out.vfs", "tcp://127.0.0.1:7999"},
  };
  const size_t before = Entries();
  for (const auto& [args, meant] : cases) {
    CommandResult r = Vf(args, dir_.path());
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, "did you mean " + meant + "?")) << args << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, "error:")) << r.output;
  }
  EXPECT_EQ(Entries(), before) << "a refused command left a file behind";
  // A file of such a name, written as the hint says.
  CommandResult file = Vf("send -q s.vfs ./127.0.0.1:7999", dir_.path());
  EXPECT_EQ(file.code, 0) << file.output;
  EXPECT_TRUE(fs::exists(dir_.File("127.0.0.1:7999")));
  CommandResult back = Vf("verify -q ./127.0.0.1:7999", dir_.path());
  EXPECT_EQ(back.code, 0) << back.output;
}

// A positional tcp:// or unix: source once listened for some commands and
// not others; now only --listen listens, and the refusal names it.
TEST_F(CliGrammar, PositionalNetworkSourceIsRefusedWithTheListenForm) {
  for (const std::string command : {"unpack", "verify", "inspect"}) {
    std::string out = command == "unpack" ? " -o out/" : "";
    for (const std::string& uri : std::vector<std::string>{"tcp://127.0.0.1:0", "unix:" + dir_.File("sock")}) {
      CommandResult r = Vf(command + " " + Q(uri) + out, dir_.path());
      EXPECT_EQ(r.code, 2) << command << " " << uri << "\n" << r.output;
      EXPECT_TRUE(Contains(r.output, "vramflow " + command + ": error:")) << r.output;
      EXPECT_TRUE(Contains(r.output, "`vramflow " + command + " --listen " + uri + "`")) << r.output;
      EXPECT_FALSE(fs::exists(dir_.File("sock"))) << "it listened";
    }
  }
  // Commands that never receive name the one that does.
  for (const std::string args : {"send tcp://127.0.0.1:0 out.vfs", "pack tcp://127.0.0.1:0 -o out.vfs"}) {
    CommandResult r = Vf(args, dir_.path());
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, "`vramflow recv --listen tcp://127.0.0.1:0`")) << r.output;
  }
}

// STREAM and --listen exclude each other; one of them is required; --listen
// takes only a network address.
TEST_F(CliGrammar, ListenAndStreamExcludeEachOtherAndOneIsRequired) {
  for (const std::string command : {"unpack", "verify", "inspect"}) {
    std::string out = command == "unpack" ? " -o out/" : "";
    CommandResult both = Vf(command + " s.vfs --listen tcp://127.0.0.1:0" + out, dir_.path());
    EXPECT_EQ(both.code, 2) << both.output;
    EXPECT_TRUE(Contains(both.output, "excludes")) << both.output;
    CommandResult neither = Vf(command + out, dir_.path());
    EXPECT_EQ(neither.code, 2) << neither.output;
    EXPECT_TRUE(Contains(neither.output, "--listen")) << neither.output;
    CommandResult file = Vf(command + " --listen s.vfs" + out, dir_.path());
    EXPECT_EQ(file.code, 2) << file.output;
    EXPECT_TRUE(Contains(file.output, "tcp://HOST:PORT")) << file.output;
  }
  CommandResult demo = Vf("demo -s 1M --listen s.vfs", dir_.path());
  EXPECT_EQ(demo.code, 2) << demo.output;
  CommandResult recv = Vf("recv --listen s.vfs -o out.vfs", dir_.path());
  EXPECT_EQ(recv.code, 2) << recv.output;
}

// `-` is stdin or stdout where it is accepted, and refused where a file or
// directory is needed: no file named "-" ever appears.
TEST_F(CliGrammar, DashIsStdioOrRefused) {
  CommandResult key = Vf("keygen -o -", dir_.path());
  ASSERT_EQ(key.code, 0) << key.output;
  EXPECT_EQ(key.output.size(), 65u) << key.output;
  EXPECT_EQ(key.output.find_first_not_of("0123456789abcdef"), 64u) << key.output;
  const std::vector<std::string> refused = {"demo -s 1M --to -", "send s.vfs tcp://127.0.0.1:1 --key-file -",
                                            "recv --listen unix:sock -d -", "criu export-upstream -",
                                            "keygen -o tcp://127.0.0.1:1"};
  for (const std::string& args : refused) {
    CommandResult r = Vf(args, dir_.path());
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, "error:")) << r.output;
  }
  EXPECT_FALSE(fs::exists(dir_.File("-")));
  EXPECT_FALSE(fs::exists(dir_.File("sock")));
  // Where it is accepted, it is the stream itself.
  CommandResult piped = Vf("pack -q in.bin -o - | " + Q(VramflowBinary()) + " verify -q -", dir_.path());
  EXPECT_EQ(piped.code, 0) << piped.output;
}

}  // namespace
}  // namespace vramflow
