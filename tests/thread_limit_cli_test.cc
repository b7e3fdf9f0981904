// SPDX-License-Identifier: MIT
// Issue 18, defect 6: a thread that cannot be created is an error value and
// the pipeline always drains. pack and unpack run with at most N threads
// (thread_cap_preload.cc: pthread_create fails with EAGAIN past N, as under
// `ulimit -u` or `ulimit -v`), for every N from none to enough: each run
// ends within seconds, either done or with exit status 1 and a message
// saying which thread could not be started; never a hang (the DMA completer
// once threw after the graph had reserved a wait) nor an abort (oneTBB's
// "pthread_create has failed"). The same for a network transfer, both ends
// capped.
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

TEST(ThreadLimitCli, PackAndUnpackFailCleanlyWhenThreadsCannotStart) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "an LD_PRELOAD library cannot come before the sanitizer runtime";
#endif
  TempDir dir;
  const std::string bin = ShellQuote(VramflowBinary());
  const std::string in = ShellQuote(dir.File("in.bin")), stream = ShellQuote(dir.File("s.vfs"));
  CommandResult made = RunShell(bin + " gen -k bf16 -s 4M -o " + in + " && " + bin + " pack -q --chunk-size 256K " +
                                in + " -o " + stream);
  ASSERT_EQ(made.code, 0) << made.output;

  const int kEnough = 16;
  for (int max_threads : {0, 1, 2, 3, 4, 5, 6, kEnough}) {
    for (const std::string& command :
         {"pack -q -j 3 --chunk-size 256K " + in + " -o " + ShellQuote(dir.File("p.vfs")) + " -f",
          "unpack -q -j 3 " + stream + " -o " + ShellQuote(dir.File("out.bin")) + " -f"}) {
      SCOPED_TRACE("at most " + std::to_string(max_threads) + " threads: " + command);
      CommandResult r = RunShell("VRAMFLOW_MAX_THREADS=" + std::to_string(max_threads) +
                                 " LD_PRELOAD=" + ShellQuote(VRAMFLOW_THREAD_CAP_PRELOAD) + " timeout -s KILL 10 " +
                                 bin + " " + command);
      if (max_threads == kEnough) {
        EXPECT_EQ(r.code, 0) << r.output;
        continue;
      }
      EXPECT_TRUE(r.code == 0 || r.code == 1) << "hung or crashed (status " << r.code << "): " << r.output;
      if (r.code == 1) {
        EXPECT_TRUE(Contains(r.output, "thread")) << r.output;
      }
      if (max_threads == 0) {
        EXPECT_EQ(r.code, 1) << r.output;
        EXPECT_TRUE(Contains(r.output, "Resource temporarily unavailable")) << r.output;
      }
    }
  }
}

// The same for a network transfer: `recv` and `send` over a UNIX socket,
// each with at most N threads (the receiver's accept loop, its pings and a
// thread per connection; the sender's connections, control loop and
// supervisor). Each pair ends within seconds, done or failed with a
// message about a thread on one end; never a hang nor an abort.
TEST(ThreadLimitCli, NetworkTransferFailsCleanlyWhenThreadsCannotStart) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "an LD_PRELOAD library cannot come before the sanitizer runtime";
#endif
  TempDir dir;
  const std::string bin = ShellQuote(VramflowBinary());
  const std::string in = ShellQuote(dir.File("in.bin")), stream = ShellQuote(dir.File("s.vfs"));
  CommandResult made =
      RunShell(bin + " gen -k bf16 -s 2M -o " + in + " && " + bin + " pack -q " + in + " -o " + stream);
  ASSERT_EQ(made.code, 0) << made.output;
  const std::string sock = ShellQuote(dir.File("sock"));
  const std::string recv_log = ShellQuote(dir.File("recv.log"));

  const int kEnough = 16;
  for (int max_threads : {0, 1, 2, 3, 4, 5, 6, kEnough}) {
    SCOPED_TRACE("at most " + std::to_string(max_threads) + " threads on each end");
    const std::string out = ShellQuote(dir.File("out" + std::to_string(max_threads) + ".vfs"));
    const std::string capped = "VRAMFLOW_MAX_THREADS=" + std::to_string(max_threads) +
                               " LD_PRELOAD=" + ShellQuote(VRAMFLOW_THREAD_CAP_PRELOAD) + " timeout -s KILL 10 " + bin;
    // The receiver in the background; the sender once it listens (or the
    // receiver has exited); then both exit statuses.
    CommandResult r = RunShell(
        capped + " recv -q --listen unix:" + sock + " -o " + out + " --accept-timeout 2 --resume-timeout 1 > " +
        recv_log + " 2>&1 & pid=$!; for i in $(seq 200); do [ -S " + sock +
        " ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.02; done; " + capped + " send -q " + stream +
        " unix:" + sock +
        " --connect-timeout 3 --timeout 3 --retries 1; echo \"send=$?\"; wait $pid; echo \"recv=$?\"; "
        "cat " +
        recv_log);
    const bool sent = Contains(r.output, "send=0"), received = Contains(r.output, "recv=0");
    for (const std::string end : {"send", "recv"}) {
      EXPECT_TRUE(Contains(r.output, end + "=0") || Contains(r.output, end + "=1"))
          << end << " hung or crashed: " << r.output;
    }
    if (max_threads == kEnough) {
      EXPECT_TRUE(sent && received) << r.output;
      continue;
    }
    EXPECT_EQ(sent, received) << "one end thinks the stream is stored, the other not: " << r.output;
    if (!sent) {
      EXPECT_TRUE(Contains(r.output, "thread")) << r.output;
    }
    // The first thread of every command takes its signals (tools/cli/interrupt.h);
    // the receiver's next is its accept loop.
    if (max_threads == 0) {
      EXPECT_FALSE(sent) << r.output;
      EXPECT_TRUE(Contains(r.output, "cannot start a thread for taking SIGINT")) << r.output;
    }
    if (max_threads == 1) {
      EXPECT_FALSE(sent) << r.output;
      EXPECT_TRUE(Contains(r.output, "cannot start a thread for the receiver's accept loop")) << r.output;
    }
  }
}

}  // namespace
}  // namespace vramflow
