// SPDX-License-Identifier: MIT
// `vramflow demo --base`: a full checkpoint of the simulated GPUs, a
// simulated training step, an incremental checkpoint against the first,
// restored with it and checked byte for byte (tools/demo.cc).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/shell.h"
#include "tests/support/test_util.h"

namespace vramflow {
namespace {

using ::vramflow::testing::CommandResult;
using ::vramflow::testing::RunShell;
using ::vramflow::testing::ShellQuote;
using ::vramflow::testing::VramflowBinary;

TEST(DemoBaseCli, IncrementalCheckpointIsSmallAndRestoresEveryByte) {
  CommandResult r = RunShell(ShellQuote(VramflowBinary()) + " demo --base -g 2 -s 24M -j 2 -q --json 2>&1");
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["ok"], true) << r.output;
  EXPECT_EQ(j["incremental"], true) << r.output;
  EXPECT_EQ(j["verified"], "here") << r.output;
  const uint64_t raw = j["raw_bytes"], full = j["base_stream_bytes"], incremental = j["stream_bytes"];
  const uint64_t refs = j["base_ref_bytes"], deltas = j["base_delta_bytes"], changed = j["changed_bytes"];
  // The bf16 weights did not change: references; the fp32 and Adam state
  // changed in low bits: deltas; the rest is new.
  EXPECT_GE(refs, raw / 5) << r.output;
  EXPECT_GE(deltas, raw / 3) << r.output;
  EXPECT_LE(refs + deltas, raw) << r.output;
  EXPECT_GT(changed, 0u) << r.output;
  EXPECT_LT(2 * incremental, full) << r.output;
}

TEST(DemoBaseCli, TextReportNamesBothCheckpoints) {
  CommandResult r = RunShell(ShellQuote(VramflowBinary()) + " demo --base -g 1 -s 8M -q 2>&1");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* row : {"full checkpoint", "training step", "incremental checkpoint", "taken from the base",
                          "restore (with the base)", "every byte of every BO matches"})
    EXPECT_NE(r.output.find(row), std::string::npos) << row << "\n" << r.output;
}

TEST(DemoBaseCli, BaseDoesNotCombineWithToOrListen) {
  testing::TempDir dir;
  for (const std::string& args : {"--to " + dir.File("x.vfs"), "--listen unix:" + dir.File("s")}) {
    CommandResult r = RunShell(ShellQuote(VramflowBinary()) + " demo --base -g 1 -s 1M -q " + args + " 2>&1");
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;  // a usage error
    EXPECT_NE(r.output.find("--base"), std::string::npos) << args << ": " << r.output;
  }
}

}  // namespace
}  // namespace vramflow
