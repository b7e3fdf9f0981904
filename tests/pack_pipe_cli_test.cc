// SPDX-License-Identifier: MIT
// Issue 19, item 5: piped input (stdin, pipes, anything without a size) is
// packed on every thread: read in order, encoded in parallel, written in
// order, within the memory budget. The stream is the same for any thread
// count (and the same as the one-thread encoder wrote before), and unpacks
// to the input.
#include <gtest/gtest.h>

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

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class PackPipeCli : public ::testing::Test {
 protected:
  CommandResult Sh(const std::string& line) {
    return RunShell("cd " + ShellQuote(dir_.path()) + " && VF=" + ShellQuote(VramflowBinary()) +
                    " timeout -s KILL 30 sh -c " + ShellQuote(line + " 2>&1"));
  }
  std::vector<uint8_t> Bytes(const std::string& name) { return testing::ReadFileBytes(dir_.File(name)); }
  TempDir dir_;
};

//! Several inputs through pipes (one with zero runs, one empty, one not a
//! whole number of chunks): 1, 2 and 5 threads write the same stream, the
//! summary says how many threads encoded, and it unpacks to the inputs.
TEST_F(PackPipeCli, ParallelEncodingWritesTheSameStream) {
  ASSERT_EQ(Sh("$VF gen -k bf16 -s 3M -o a.bin && $VF gen -k zeros -s 1M -o z.bin && $VF gen -k fp32 -s 1M -o c.bin && "
               "head -c 777777 c.bin > c.part && : > empty.bin")
                .code,
            0);
  for (int threads : {1, 2, 5}) {
    const std::string j = std::to_string(threads);
    CommandResult r =
        Sh("rm -f z.fifo && mkfifo z.fifo && { cat z.bin > z.fifo & cat a.bin | $VF pack --chunk-size "
           "256K -j " +
           j + " - z.fifo c.part empty.bin --name a.bin -o s" + j + ".vfs; s=$?; wait; exit $s; }");
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_TRUE(Contains(r.output, "read in order (stdin, pipe or s3:// input) on " + j + " thread(s)")) << r.output;
    EXPECT_FALSE(Contains(r.output, "serially")) << r.output;
  }
  EXPECT_EQ(Bytes("s1.vfs"), Bytes("s2.vfs"));
  EXPECT_EQ(Bytes("s1.vfs"), Bytes("s5.vfs"));
  CommandResult u = Sh("$VF unpack -q s5.vfs -o out/");
  ASSERT_EQ(u.code, 0) << u.output;
  EXPECT_EQ(Bytes("out/a.bin"), Bytes("a.bin"));
  EXPECT_EQ(Bytes("out/z.fifo"), Bytes("z.bin"));
  EXPECT_EQ(Bytes("out/c.part"), Bytes("c.part"));
  EXPECT_EQ(Bytes("out/empty.bin"), Bytes("empty.bin"));
}

//! More threads than the budget feeds: fewer run, a note says so, and the
//! stream is the same; a budget that holds no two chunk buffers is a clear
//! error.
TEST_F(PackPipeCli, TheBudgetBoundsTheChunksInFlight) {
  ASSERT_EQ(Sh("$VF gen -k bf16 -s 4M -o a.bin").code, 0);
  CommandResult one = Sh("$VF pack -q -j 1 - --name a.bin -o one.vfs < a.bin");
  ASSERT_EQ(one.code, 0) << one.output;
  CommandResult many = Sh("$VF pack -q -j 64 -m 24M - --name a.bin -o many.vfs < a.bin");
  ASSERT_EQ(many.code, 0) << many.output;
  EXPECT_TRUE(Contains(many.output, "vramflow pack: note: running ")) << many.output;
  EXPECT_TRUE(Contains(many.output, " threads, not 64: a memory budget of 24.00 MiB feeds no more")) << many.output;
  EXPECT_EQ(Bytes("one.vfs"), Bytes("many.vfs"));
  CommandResult tiny = Sh("$VF pack -q -j 1 -m 4M --chunk-size 2M - -o tiny.vfs < a.bin");
  EXPECT_EQ(tiny.code, 1) << tiny.output;
  EXPECT_TRUE(Contains(tiny.output, "holds fewer than two")) << tiny.output;
}

}  // namespace
}  // namespace vramflow
