// SPDX-License-Identifier: MIT
// Issue 19, item 5: `demo` under Docker's default 64 MB /dev/shm. In a mount
// namespace of its own, the test mounts an 8 MiB tmpfs on /dev/shm: demo
// writes its temporary stream to $TMPDIR instead (it once failed with
// ENOSPC), says so in one line, and removes it.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/shell.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using ::vramflow::testing::CommandResult;
using ::vramflow::testing::RunShell;
using ::vramflow::testing::ShellQuote;
using ::vramflow::testing::TempDir;
using ::vramflow::testing::VramflowBinary;

TEST(DemoShmCli, SmallDevShmFallsBackToTmpdir) {
  if (RunShell("unshare -m sh -c 'mount -t tmpfs -o size=8m tmpfs /dev/shm' 2>&1").code != 0)
    GTEST_SKIP() << "cannot mount a tmpfs in a mount namespace here (needs root and unshare)";
  TempDir tmp;
  const std::string inner = "mount -t tmpfs -o size=8m tmpfs /dev/shm && TMPDIR=" + ShellQuote(tmp.path()) + " exec " +
                            ShellQuote(VramflowBinary()) + " demo -s 16M --json";
  CommandResult r = RunShell("timeout -s KILL 60 unshare -m sh -c " + ShellQuote(inner) + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("vramflow demo: note: /dev/shm has [0-9.]+ MiB free, less than "
                                                     "the [0-9.]+ MiB the stream may take; writing it to " +
                                                     tmp.path() + " instead\n")))
      << r.output;
  EXPECT_NE(r.output.find("\"destination\": \"" + tmp.path() + "/vramflow-demo-"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"verified\": \"here\""), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path())) << "the temporary stream was left behind";
}

}  // namespace
}  // namespace vramflow
